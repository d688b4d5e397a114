//! Holes in a process log: skipped, never read.
//!
//! A log's length is the sandbox's to choose: the command's stdout *is* the log file, so
//! `truncate -s 4T /dev/stdout` makes it four terabytes long while it holds no data. Read
//! byte by byte, the zeros of such a hole kept a daemon thread busy for days and every session
//! waited (the hostile review of issue 25). moat frees consumed bytes the same way
//! (`exec.spill_max_bytes`). So every reader of a log asks the filesystem where the next data
//! is (`SEEK_DATA`) and jumps there: what it reads is bounded by what the log really holds,
//! which the disk bound bounds (docs/security.md, "Process output record"). A hole reads as
//! NUL bytes, which the sanitizer drops anyway, so skipping it changes no output.

use std::fs::File;
use std::os::fd::AsFd;

use nix::errno::Errno;
use nix::unistd::{lseek, Whence};

/// The offset of the first data at or after `from`; `None` when there is none (the rest of
/// the file, if any, is a hole). A filesystem without `SEEK_DATA` answers `from`.
pub fn next_data(file: &File, from: u64) -> Option<u64> {
    match lseek(file.as_fd(), from as i64, Whence::SeekData) {
        Ok(at) => Some(at as u64),
        Err(Errno::ENXIO) => None,
        Err(_) => Some(from),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    #[test]
    fn a_hole_is_jumped_and_the_end_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let f = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("log"))
            .unwrap();
        f.write_all_at(b"head", 0).unwrap();
        // A terabyte-long hole, then data: the file costs a few blocks.
        f.write_all_at(b"tail", 1 << 40).unwrap();
        assert_eq!(next_data(&f, 0), Some(0));
        // Data is found by block: past the first block, the next data is the tail's block.
        let next = next_data(&f, 1 << 20).unwrap();
        assert!(
            next > 1 << 30 && next <= 1 << 40,
            "the hole was not jumped: {next}"
        );
        assert_eq!(next_data(&f, (1 << 40) + (1 << 20)), None);
    }
}
