//! Tests of the bracketed paste.

use super::*;

#[test]
fn table() {
    let rows: &[(&str, bool, &[u8])] = &[
        ("", true, b"\x1b[200~\x1b[201~"),
        ("", false, b""),
        ("hello\nworld", true, b"\x1b[200~hello\nworld\x1b[201~"),
        ("hello\nworld", false, b"hello\nworld"),
        ("a\x1b[201~b", true, b"\x1b[200~ab\x1b[201~"),
        ("a\x1b[201~b", false, b"a\x1b[201~b"),
        ("\x1b[201~", true, b"\x1b[200~\x1b[201~"),
        ("\x1b[201~\x1b[201~x", true, b"\x1b[200~x\x1b[201~"),
        (
            "\x1b[20\x1b[201~1~rm -rf ~\n",
            true,
            b"\x1b[200~rm -rf ~\n\x1b[201~",
        ),
        ("\x1b\x1b[201~[201~", true, b"\x1b[200~\x1b[201~"),
        ("\x1b[200~inner", true, b"\x1b[200~\x1b[200~inner\x1b[201~"),
        ("\x1b[201", true, b"\x1b[200~\x1b[201\x1b[201~"),
        ("ünï", true, "\x1b[200~ünï\x1b[201~".as_bytes()),
    ];
    for (text, bracketed, expected) in rows {
        assert_eq!(paste(text, *bracketed), *expected, "{text:?} {bracketed}");
    }
}

#[test]
fn body_never_contains_end_marker() {
    let pieces = ["\x1b[201~", "\x1b", "[", "20", "1", "~", "x"];
    // Every sequence of up to 5 pieces.
    let mut stack = vec![(String::new(), 0)];
    while let Some((s, depth)) = stack.pop() {
        let out = paste(&s, true);
        assert!(out.starts_with(PASTE_START) && out.ends_with(PASTE_END));
        let body = &out[PASTE_START.len()..out.len() - PASTE_END.len()];
        assert!(
            !body.windows(PASTE_END.len()).any(|w| w == PASTE_END),
            "{s:?}"
        );
        if depth < 5 {
            for p in pieces {
                stack.push((format!("{s}{p}"), depth + 1));
            }
        }
    }
}
