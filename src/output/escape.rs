//! Text made safe to show or to hand a shell: escaping the characters that would hide or
//! disguise text on a terminal, and single-quoting a word for a POSIX shell. One place, so every
//! error message, page and record that repeats untrusted text escapes it the same way
//! (docs/security.md).

/// Whether a character would hide or disguise text on a terminal: controls, bidi overrides,
/// zero-width and other invisible or look-alike spacing characters.
pub fn is_deceptive(c: char) -> bool {
    c.is_control()
        || matches!(c as u32,
            0x00A0 | 0x00AD | 0x034F | 0x061C | 0x115F | 0x1160 | 0x17B4 | 0x17B5
            | 0x180B..=0x180F | 0x2000..=0x200F | 0x2028..=0x202F | 0x205F..=0x206F
            | 0x3000 | 0x3164 | 0xFE00..=0xFE0F | 0xFEFF | 0xFFA0 | 0xFFF9..=0xFFFB
            | 0xE0000..=0xE007F)
}

/// Escapes control, bidi and invisible characters so displayed text shows what is really there.
pub fn escape_display(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if is_deceptive(c) => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// An argv as a shell-like line, quoting only words that need it, escaped for display.
pub fn display_argv(argv: &[String]) -> String {
    let words: Vec<String> = argv
        .iter()
        .map(|word| match shlex::try_quote(word) {
            Ok(quoted) => quoted.into_owned(),
            Err(_) => quote(word),
        })
        .collect();
    escape_display(&words.join(" "))
}

/// Quotes one word for a POSIX shell, always with single quotes so nothing inside expands.
pub fn quote(word: &str) -> String {
    let mut out = String::with_capacity(word.len() + 2);
    out.push('\'');
    for c in word.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_display_table() {
        let rows = [
            ("ls -la", "ls -la"),
            ("a\nb", "a\\nb"),
            ("a\rb", "a\\rb"),
            ("\u{1b}[31m", "\\u{001b}[31m"),
            ("ls\u{a0}-la", "ls\\u{00a0}-la"),
            ("a\u{202e}b", "a\\u{202e}b"),
            ("zero\u{200b}width", "zero\\u{200b}width"),
            ("caf\u{e9}", "caf\u{e9}"),
            ("\u{feff}x", "\\u{feff}x"),
        ];
        for (input, want) in rows {
            assert_eq!(escape_display(input), want, "input {input:?}");
        }
    }

    #[test]
    fn display_argv_quotes_only_when_needed() {
        let argv: Vec<String> = ["ls", "a b", "it's", "", "x\ny"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        assert_eq!(display_argv(&argv), "ls 'a b' \"it's\" '' 'x\\ny'");
    }

    #[test]
    fn quoting() {
        let rows = [
            ("ls", "'ls'"),
            ("", "''"),
            ("a b", "'a b'"),
            ("it's", "'it'\\''s'"),
            ("$HOME", "'$HOME'"),
            ("`id`", "'`id`'"),
            ("a\nb", "'a\nb'"),
            ("\\", "'\\'"),
        ];
        for (word, want) in rows {
            assert_eq!(quote(word), want, "word {word:?}");
        }
    }
}
