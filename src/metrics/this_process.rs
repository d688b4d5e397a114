//! This process as the kernel counts it: resident memory and open descriptors, read from
//! `/proc/self` at scrape time (Linux).

/// Resident set size in bytes (`VmRSS` of `/proc/self/status`); 0 when it cannot be read.
pub fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| vm_rss_bytes(&s))
        .unwrap_or(0)
}

/// Open file descriptors (the entries of `/proc/self/fd`, less the one reading it); 0 when
/// it cannot be read.
pub fn open_fds() -> u64 {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count().saturating_sub(1) as u64)
        .unwrap_or(0)
}

/// `VmRSS:   1234 kB` of a `/proc/<pid>/status` text, in bytes.
fn vm_rss_bytes(status: &str) -> Option<u64> {
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rss_is_read_in_bytes() {
        let status = "Name:\tmoat\nVmHWM:\t  9000 kB\nVmRSS:\t   24576 kB\nThreads:\t4\n";
        assert_eq!(vm_rss_bytes(status), Some(24576 * 1024));
        assert_eq!(vm_rss_bytes("Name:\tmoat\n"), None);
        assert!(resident_bytes() > 0);
        // stdin, stdout and stderr at least.
        assert!(open_fds() >= 3);
    }
}
