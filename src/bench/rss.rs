//! This process's memory, read from `/proc/self/status`.

/// Resident set size now, in MiB (0 when unreadable).
pub(super) fn rss_mib() -> f64 {
    status_kib("VmRSS:") / 1024.0
}

/// Peak resident set size since the last [`reset_peak`], in MiB.
pub(super) fn peak_rss_mib() -> f64 {
    status_kib("VmHWM:") / 1024.0
}

/// Resets the kernel's peak-RSS counter (Linux ≥ 4.0), so the next peak is a figure's own.
pub(super) fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn status_kib(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0)
}
