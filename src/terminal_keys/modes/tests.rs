//! Tests of the terminal mode tracking.

use super::*;

/// Observes `chunks` with a fresh tracker; returns (known, app cursor, bracketed paste,
/// requests).
fn observe_all(chunks: &[&[u8]]) -> (bool, bool, bool, usize) {
    let mut m = TermModes::new();
    let requests = chunks.iter().map(|c| m.observe(c)).sum();
    (
        m.cursor_mode_known(),
        m.app_cursor(),
        m.bracketed_paste(),
        requests,
    )
}

#[test]
fn table() {
    type Row<'a> = (&'a str, &'a [u8], (bool, bool, bool, usize));
    let rows: &[Row] = &[
        ("nothing", b"", (false, false, false, 0)),
        ("plain text", b"hello\n", (false, false, false, 0)),
        ("smkx", b"\x1b[?1h\x1b=", (true, true, false, 0)),
        ("rmkx", b"\x1b[?1l\x1b>", (true, false, false, 0)),
        (
            "set then reset",
            b"\x1b[?1h..\x1b[?1l",
            (true, false, false, 0),
        ),
        (
            "reset then set",
            b"\x1b[?1l..\x1b[?1h",
            (true, true, false, 0),
        ),
        ("combined params", b"\x1b[?1049;1h", (true, true, false, 0)),
        (
            "combined params first",
            b"\x1b[?1;1049h",
            (true, true, false, 0),
        ),
        (
            "other private mode",
            b"\x1b[?1049h\x1b[?25l",
            (false, false, false, 0),
        ),
        ("param 10 is not 1", b"\x1b[?10h", (false, false, false, 0)),
        ("param 01 is 1", b"\x1b[?01h", (true, true, false, 0)),
        ("not private", b"\x1b[1h", (false, false, false, 0)),
        ("intermediate", b"\x1b[?1$p", (false, false, false, 0)),
        ("other marker", b"\x1b[>1h", (false, false, false, 0)),
        ("late question mark", b"\x1b[1?h", (false, false, false, 0)),
        ("bracketed paste", b"\x1b[?2004h", (false, false, true, 0)),
        (
            "bracketed paste off",
            b"\x1b[?2004h\x1b[?2004l",
            (false, false, false, 0),
        ),
        ("both", b"\x1b[?1;2004h", (true, true, true, 0)),
        ("dsr", b"\x1b[6n", (false, false, false, 1)),
        ("dec dsr", b"\x1b[?6n", (false, false, false, 1)),
        ("two dsr", b"a\x1b[6nb\x1b[6n", (false, false, false, 2)),
        (
            "status report is not cpr",
            b"\x1b[5n",
            (false, false, false, 0),
        ),
        (
            "dsr with two params",
            b"\x1b[6;1n",
            (false, false, false, 0),
        ),
        ("dsr 16", b"\x1b[16n", (false, false, false, 0)),
        ("esc restarts", b"\x1b[?1\x1b[6n", (false, false, false, 1)),
        ("can aborts", b"\x1b[?1\x18h", (false, false, false, 0)),
        (
            "non ascii aborts",
            "\x1b[?1éh".as_bytes(),
            (false, false, false, 0),
        ),
        (
            "newline inside ignored",
            b"\x1b[?\n1h",
            (true, true, false, 0),
        ),
        ("ris resets", b"\x1b[?1;2004h\x1bc", (true, false, false, 0)),
        (
            "decstr resets",
            b"\x1b[?1;2004h\x1b[!p",
            (true, false, false, 0),
        ),
        ("esc esc", b"\x1b\x1b[?1h", (true, true, false, 0)),
        (
            "huge param",
            b"\x1b[?99999999999999999999h",
            (false, false, false, 0),
        ),
    ];
    for (name, input, expected) in rows {
        assert_eq!(observe_all(&[input]), *expected, "{name}");
        for cut in 0..=input.len() {
            let (a, b) = input.split_at(cut);
            assert_eq!(observe_all(&[a, b]), *expected, "{name}: split at {cut}");
        }
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(observe_all(&bytes), *expected, "{name}: bytewise");
    }
}

#[test]
fn requests_counted_in_chunk_where_they_end() {
    let mut m = TermModes::new();
    assert_eq!(m.observe(b"\x1b[6n\x1b["), 1);
    assert_eq!(m.observe(b"6"), 0);
    assert_eq!(m.observe(b"n\x1b[6n"), 2);
}

#[test]
fn report() {
    assert_eq!(cursor_position_report(1, 1), b"\x1b[1;1R");
    assert_eq!(cursor_position_report(30, 120), b"\x1b[30;120R");
}
