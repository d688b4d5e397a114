//! Choosing what part of a file `read_file` shows, and recognising binary files. Pure over a
//! reader: the shell opens the file (docs/mcp.md, "read_file").

use std::io::{self, BufRead, Read};

/// How much of the start of a file decides whether it is binary.
pub const SNIFF_BYTES: usize = 8192;

/// A file is binary when its first bytes hold a NUL or are not UTF-8 (a character cut at the
/// end of the sample does not count).
pub fn is_binary(head: &[u8]) -> bool {
    if head.contains(&0) {
        return true;
    }
    match std::str::from_utf8(head) {
        Ok(_) => false,
        Err(e) => e.error_len().is_some(),
    }
}

/// The part of a file that was read.
#[derive(Debug, PartialEq)]
pub struct Window {
    /// The bytes shown.
    pub bytes: Vec<u8>,
    /// First line shown (1-based); for a byte range, 0.
    pub first_line: u64,
    /// Lines shown.
    pub lines: u64,
    /// More of the file follows what is shown.
    pub more: bool,
    /// The scan bound stopped the search for the first line.
    pub scan_bound_hit: bool,
}

/// Lines `offset`.. (1-based, `limit` of them) from `r`, at most `max_bytes` of them (a line
/// that alone is longer is cut there), scanning at most `max_scan` bytes to find them.
pub fn lines<R: Read>(
    r: R,
    offset: u64,
    limit: u64,
    max_bytes: u64,
    max_scan: u64,
) -> io::Result<Window> {
    let first = offset.max(1);
    let mut reader = io::BufReader::new(r.take(max_scan));
    let mut line_no = 0u64;
    let mut out = Vec::new();
    let mut shown = 0u64;
    let mut buf = Vec::new();
    let mut scanned = 0u64;
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf)? as u64;
        if n == 0 {
            let scan_bound_hit = scanned >= max_scan;
            return Ok(Window {
                bytes: out,
                first_line: first,
                lines: shown,
                more: scan_bound_hit,
                scan_bound_hit: scan_bound_hit && shown == 0,
            });
        }
        scanned += n;
        line_no += 1;
        if line_no < first {
            continue;
        }
        if shown == limit || out.len() as u64 + n > max_bytes {
            if shown == 0 {
                // One line longer than the bound: show its start.
                out.extend_from_slice(&buf[..(max_bytes as usize).min(buf.len())]);
                shown = 1;
            }
            return Ok(Window {
                bytes: out,
                first_line: first,
                lines: shown,
                more: true,
                scan_bound_hit: false,
            });
        }
        out.extend_from_slice(&buf);
        shown += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_is_nul_or_not_utf8() {
        assert!(!is_binary(b"plain text\n"));
        assert!(!is_binary("héllo".as_bytes()));
        // A character cut by the sample's end is still text.
        assert!(!is_binary(&"é".as_bytes()[..1]));
        assert!(is_binary(b"ELF\0\x01"));
        assert!(is_binary(b"\xff\xfe bad"));
    }

    #[test]
    fn line_windows() {
        let text = b"1\n2\n3\n4\n5\n";
        // (offset, limit, max bytes, shown, first line, lines, more)
        let rows: [(u64, u64, u64, &str, u64, u64, bool); 7] = [
            (1, 100, 1000, "1\n2\n3\n4\n5\n", 1, 5, false),
            (0, 2, 1000, "1\n2\n", 1, 2, true),
            (4, 100, 1000, "4\n5\n", 4, 2, false),
            (5, 1, 1000, "5\n", 5, 1, false),
            (9, 10, 1000, "", 9, 0, false),
            (2, 100, 4, "2\n3\n", 2, 2, true),
            (1, 100, 1, "1", 1, 1, true),
        ];
        for (offset, limit, max, want, first, n, more) in rows {
            let w = lines(&text[..], offset, limit, max, 1 << 20).unwrap();
            assert_eq!(
                String::from_utf8(w.bytes).unwrap(),
                want,
                "{offset},{limit},{max}"
            );
            assert_eq!(
                (w.first_line, w.lines, w.more),
                (first, n, more),
                "{offset},{limit}"
            );
        }
        let w = lines(&text[..], 5, 1, 1000, 4).unwrap();
        assert!(w.scan_bound_hit && w.more && w.lines == 0);
    }
}
