//! Hostile text as the console shows it (docs/console.md, "Hostile text"). Commands, plans
//! and outputs come from agents: the templates HTML-escape every piece, and this turns each
//! character that would hide or disguise text (controls, the ESC of an ANSI sequence, bidi
//! overrides and isolates, zero-width and other invisible characters) into a piece of its own
//! that the page shows as a visible badge (`U+202E`), so an operator reads the characters
//! that are really there, in the order they are stored. Nothing is ever cut.

use crate::output::is_deceptive;

/// One run of text on a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    /// What the page prints: the text itself, or for a marked character its code point
    /// (`U+202E`) so the character never reaches the browser's layout.
    pub text: String,
    /// For a marked character, the name shown on hover and read by screen readers (the page
    /// must say *why* the badge is there, not only which code point).
    pub name: Option<&'static str>,
}

impl Piece {
    fn plain(text: &str) -> Self {
        Self {
            text: text.to_string(),
            name: None,
        }
    }
}

/// How line breaks are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lines {
    /// Output: a line feed breaks the line and needs no mark.
    Keep,
    /// A command or plan: a line feed separates commands, so it is marked (`LF`) and then
    /// breaks the line, and the operator cannot miss a second command on a second line.
    Mark,
}

/// `text` split into plain runs and marked characters. Tabs and (under [`Lines::Keep`]) line
/// feeds stay plain; every other character [`is_deceptive`] accepts is marked.
pub fn pieces(text: &str, lines: Lines) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut run = String::new();
    for c in text.chars() {
        let keep = c == '\t' || (c == '\n' && lines == Lines::Keep);
        if keep || !is_deceptive(c) {
            run.push(c);
            continue;
        }
        if !run.is_empty() {
            out.push(Piece::plain(&run));
            run.clear();
        }
        out.push(Piece {
            text: format!("U+{:04X}", c as u32),
            name: Some(name_of(c)),
        });
        if c == '\n' {
            // The mark, then the break itself, so a multi-line plan still reads as lines.
            run.push('\n');
        }
    }
    if !run.is_empty() {
        out.push(Piece::plain(&run));
    }
    out
}

/// Whether `text` holds a character [`pieces`] marks (other than a line feed): the approval
/// view says so above the plan, so an operator is warned before reading it.
pub fn has_hidden(text: &str) -> bool {
    text.chars()
        .any(|c| c != '\n' && c != '\t' && is_deceptive(c))
}

/// What a marked character is, in words.
fn name_of(c: char) -> &'static str {
    match c as u32 {
        0x1B => "escape (starts an ANSI sequence; shown, never interpreted)",
        0x0A => "line feed (a new command line)",
        0x0D => "carriage return (would overwrite the line on a terminal)",
        0x08 => "backspace",
        0x7F => "delete",
        0x00..=0x1F => "control character",
        0x80..=0x9F => "C1 control character",
        0x202A => "left-to-right embedding (bidi)",
        0x202B => "right-to-left embedding (bidi)",
        0x202C => "pop directional formatting (bidi)",
        0x202D => "left-to-right override (bidi)",
        0x202E => "right-to-left override (bidi: reverses what follows)",
        0x2066 => "left-to-right isolate (bidi)",
        0x2067 => "right-to-left isolate (bidi)",
        0x2068 => "first strong isolate (bidi)",
        0x2069 => "pop directional isolate (bidi)",
        0x200E => "left-to-right mark (bidi)",
        0x200F => "right-to-left mark (bidi)",
        0x061C => "Arabic letter mark (bidi)",
        0x200B => "zero-width space",
        0x200C => "zero-width non-joiner",
        0x200D => "zero-width joiner",
        0x2060 => "word joiner (zero-width)",
        0xFEFF => "zero-width no-break space",
        0x00AD => "soft hyphen (invisible)",
        0xE0000..=0xE007F => "tag character (invisible)",
        _ => "invisible or look-alike space",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(text: &str, lines: Lines) -> String {
        pieces(text, lines)
            .iter()
            .map(|p| match p.name {
                Some(_) => format!("[{}]", p.text),
                None => p.text.clone(),
            })
            .collect()
    }

    #[test]
    fn marks_what_hides_text_and_keeps_the_rest() {
        let rows: &[(&str, Lines, &str)] = &[
            ("ls -la", Lines::Mark, "ls -la"),
            // The override is shown where it is; what follows stays in stored order.
            ("echo \u{202E}txt.exe", Lines::Mark, "echo [U+202E]txt.exe"),
            ("a\u{2066}b\u{2069}c", Lines::Mark, "a[U+2066]b[U+2069]c"),
            (
                "\u{200E}\u{200F}\u{061C}",
                Lines::Mark,
                "[U+200E][U+200F][U+061C]",
            ),
            (
                "rm\u{200B}-rf\u{200C}\u{200D}\u{2060}\u{FEFF}",
                Lines::Mark,
                "rm[U+200B]-rf[U+200C][U+200D][U+2060][U+FEFF]",
            ),
            (
                "\u{1b}[31mred\u{1b}[0m",
                Lines::Keep,
                "[U+001B][31mred[U+001B][0m",
            ),
            ("ok\rEVIL", Lines::Keep, "ok[U+000D]EVIL"),
            ("one\ntwo", Lines::Keep, "one\ntwo"),
            ("one\ntwo", Lines::Mark, "one[U+000A]\ntwo"),
            ("a\tb", Lines::Mark, "a\tb"),
            // Markup is plain text here: escaping it is the template's job.
            ("<script>x</script>", Lines::Mark, "<script>x</script>"),
            ("", Lines::Mark, ""),
        ];
        for (text, lines, want) in rows {
            assert_eq!(show(text, *lines), *want, "{text:?}");
        }
    }

    #[test]
    fn never_cuts_and_names_each_mark() {
        let long = format!("echo {}\u{202E}end", "x".repeat(100_000));
        let p = pieces(&long, Lines::Mark);
        let total: usize = p
            .iter()
            .filter(|p| p.name.is_none())
            .map(|p| p.text.len())
            .sum();
        assert_eq!(total, long.len() - '\u{202E}'.len_utf8());
        let mark = p.iter().find(|p| p.name.is_some()).unwrap();
        assert!(mark.name.unwrap().contains("right-to-left override"));
    }

    #[test]
    fn hidden_detection() {
        for (text, want) in [
            ("plain", false),
            ("two\nlines\tand tab", false),
            ("x\u{202E}", true),
            ("\u{200B}", true),
            ("\u{1b}[0m", true),
        ] {
            assert_eq!(has_hidden(text), want, "{text:?}");
        }
    }
}
