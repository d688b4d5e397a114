//! Text bound for an operator's terminal. Commands, output, event texts and error messages can
//! carry what an agent wrote; printed raw, an escape sequence clears the screen or retitles the
//! window, a bare `\r` overwrites what came before it on the line, and a bidi override reverses
//! what the operator reads. Every line the CLI prints goes through one of these two functions
//! (docs/security.md, "Operator-facing text").

use super::escape::is_deceptive;

/// Escapes text for a terminal the way `moat approvals list` shows a command (control, bidi and
/// invisible characters as `\u{…}`, `\r` as `\r`), but keeps line breaks and tabs so multi-line
/// output stays readable. A `\r` right before `\n` is a line ending and is dropped.
///
/// Already escaped text comes out unchanged: the escapes are plain ASCII.
pub fn escape_terminal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' | '\t' => out.push(c),
            '\r' if chars.peek() == Some(&'\n') => {}
            '\r' => out.push_str("\\r"),
            c if is_deceptive(c) => push_escape(&mut out, c),
            c => out.push(c),
        }
    }
    out
}

/// Escapes serialized JSON for a terminal without changing what it decodes to: every control,
/// bidi or invisible character (serde_json leaves DEL, C1 controls and bidi overrides raw)
/// becomes a `\uXXXX` escape, which JSON reads back as the same character. Line breaks stay:
/// serialized JSON has them only between tokens.
pub fn escape_json_text(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if c != '\n' && is_deceptive(c) {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn push_escape(out: &mut String, c: char) {
    out.push_str(&format!("\\u{{{:04x}}}", c as u32));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_table() {
        let rows = [
            ("plain text", "plain text"),
            ("two\nlines\tand a tab", "two\nlines\tand a tab"),
            ("crlf\r\nline", "crlf\nline"),
            ("fake\rreal", "fake\\rreal"),
            ("trailing cr\r", "trailing cr\\r"),
            ("\u{1b}[2Jclear", "\\u{001b}[2Jclear"),
            ("\u{1b}]0;pwn\u{7}title", "\\u{001b}]0;pwn\\u{0007}title"),
            ("unterminated \u{1b}]0;pwn", "unterminated \\u{001b}]0;pwn"),
            ("c1 csi \u{9b}31m", "c1 csi \\u{009b}31m"),
            ("del\u{7f}", "del\\u{007f}"),
            ("abc\u{202e}fed", "abc\\u{202e}fed"),
            ("zero\u{200b}width", "zero\\u{200b}width"),
            ("tag\u{e0041}", "tag\\u{e0041}"),
            ("caf\u{e9} \u{4e2d}", "caf\u{e9} \u{4e2d}"),
            ("already \\u{001b} escaped", "already \\u{001b} escaped"),
        ];
        for (input, want) in rows {
            assert_eq!(escape_terminal(input), want, "input {input:?}");
            // Idempotent: escaping twice changes nothing more.
            assert_eq!(escape_terminal(want), want, "twice {input:?}");
        }
    }

    /// What a process printed, sanitized as moat keeps it, then escaped for the terminal.
    fn shown(raw: &[u8]) -> String {
        let mut s = crate::output::Sanitizer::new();
        let mut kept = String::new();
        s.push(raw, &mut kept);
        s.finish(&mut kept);
        escape_terminal(&kept)
    }

    fn acts_on_terminal(c: char) -> bool {
        c != '\n' && c != '\t' && is_deceptive(c)
    }

    #[test]
    fn sanitized_output_table() {
        let rows: &[(&[u8], &str)] = &[
            (
                b"progress 10%\rprogress 20%\n",
                "progress 10%\nprogress 20%\n",
            ),
            (b"line\r\n", "line\n"),
            (b"title \x1b]0;pwn", "title "),
            (b"csi \x1b[", "csi "),
            (b"lone \x1b", "lone "),
            (b"dcs \x1bP1$r", "dcs "),
            (b"c1 \xc2\x9b2J", "c1 "),
            (b"\x1b[2J\x1b]0;pwn\x07ok", "ok"),
            (b"rlo \xe2\x80\xaeabc", "rlo abc"),
        ];
        for (raw, want) in rows {
            assert_eq!(shown(raw), *want, "{:?}", String::from_utf8_lossy(raw));
        }
    }

    proptest::proptest! {
        #[test]
        fn nothing_reaches_the_terminal_raw(raw in proptest::collection::vec(
            proptest::prop_oneof![
                proptest::prelude::Just(0x1bu8),
                proptest::prelude::Just(b'\r'),
                proptest::prelude::Just(0x07u8),
                proptest::prelude::Just(b'['),
                proptest::prelude::Just(b']'),
                proptest::prelude::any::<u8>(),
            ],
            0..64,
        )) {
            let out = shown(&raw);
            proptest::prop_assert!(!out.chars().any(acts_on_terminal), "{:?}", out);
            let direct = escape_terminal(&String::from_utf8_lossy(&raw));
            proptest::prop_assert!(!direct.chars().any(acts_on_terminal), "{:?}", direct);
        }
    }

    #[test]
    fn json_table() {
        let rows = [
            "plain",
            "\u{1b}[2J\u{7}",
            "a\u{202e}b\u{7f}\u{9b}",
            "\r bare",
            "tag \u{e0041} and zero\u{200b}width",
            "multi\nline",
        ];
        for value in rows {
            for pretty in [false, true] {
                let v = serde_json::json!({ "command": value, "list": [value] });
                let raw = if pretty {
                    serde_json::to_string_pretty(&v).unwrap()
                } else {
                    serde_json::to_string(&v).unwrap()
                };
                let shown = escape_json_text(&raw);
                assert!(
                    !shown.chars().any(|c| c != '\n' && is_deceptive(c)),
                    "{shown:?}"
                );
                let back: serde_json::Value = serde_json::from_str(&shown).unwrap();
                assert_eq!(back, v, "round trip of {value:?}");
            }
        }
        assert_eq!(escape_json_text("\"a\u{202e}\""), "\"a\\u202e\"");
        assert_eq!(escape_json_text("\"\u{e0041}\""), "\"\\udb40\\udc41\"");
    }
}
