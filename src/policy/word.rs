//! Turning one shell word into the literal string the shell would pass, or a miss.
//!
//! Only quoting is modelled: single quotes, double quotes without expansions, and backslash
//! escapes. Anything whose value depends on the environment or the file system (parameters,
//! substitutions, globs, braces, tildes) is refused rather than guessed, because the plan runs
//! the literal text and a silently un-expanded `*.rs` would not be what the agent meant.

use brush_parser::word::{self, WordPiece, WordPieceWithSource};
use brush_parser::ParserOptions;

/// Parser options shared by every parse: bash grammar, so bash-only syntax is recognised as
/// such even when the shell that runs the command is a plain `sh`.
pub(crate) fn parser_options() -> ParserOptions {
    ParserOptions::default()
}

/// Splits a word into pieces. A panic inside the parser counts as a failure rather than
/// taking the caller down: for a classifier, "could not parse" is a safe answer.
pub(crate) fn pieces(raw: &str) -> Option<Vec<WordPieceWithSource>> {
    std::panic::catch_unwind(|| word::parse(raw, &parser_options()).ok())
        .ok()
        .flatten()
}

/// Splits a here-document body into pieces (quotes are literal there).
pub(crate) fn heredoc_pieces(body: &str) -> Option<Vec<WordPieceWithSource>> {
    std::panic::catch_unwind(|| word::parse_heredoc(body, &parser_options()).ok())
        .ok()
        .flatten()
}

/// The literal value of a raw word, or why it has none.
pub(crate) fn literal(raw: &str) -> Result<String, String> {
    if raw.contains('\0') {
        return Err("NUL character".to_owned());
    }
    let pieces = pieces(raw).ok_or_else(|| "unparsable word".to_owned())?;
    let mut out = String::new();
    let mut braces = Braces::default();
    for (position, piece) in pieces.iter().enumerate() {
        if let WordPiece::Text(text) = &piece.piece {
            for c in text.chars() {
                braces.open |= c == '{';
                braces.close |= braces.open && c == '}';
            }
        }
        push_piece(&mut out, &piece.piece, position == 0)?;
    }
    // Bash expands `{a,b}` and `{1..3}` (quoted parts included) but leaves `{}` and `@{0}`
    // alone, so only an unquoted pair with a comma or `..` in the word counts.
    if braces.open && braces.close && (raw.contains(',') || raw.contains("..")) {
        return Err("brace expansion".to_owned());
    }
    Ok(out)
}

/// Unquoted braces seen in a word.
#[derive(Debug, Default)]
struct Braces {
    /// An unquoted `{` was seen.
    open: bool,
    /// An unquoted `}` was seen after it.
    close: bool,
}

/// Appends one unquoted-context piece.
fn push_piece(out: &mut String, piece: &WordPiece, first: bool) -> Result<(), String> {
    match piece {
        WordPiece::Text(text) => {
            check_unquoted(text, first)?;
            out.push_str(text);
            Ok(())
        }
        WordPiece::SingleQuotedText(text) => {
            out.push_str(text);
            Ok(())
        }
        WordPiece::AnsiCQuotedText(_) => Err("ANSI-C quoting $'…'".to_owned()),
        WordPiece::DoubleQuotedSequence(inner) => push_double_quoted(out, inner),
        WordPiece::GettextDoubleQuotedSequence(_) => Err("locale quoting $\"…\"".to_owned()),
        WordPiece::TildeExpansion(_) => Err("tilde expansion".to_owned()),
        WordPiece::ParameterExpansion(_) => Err("parameter expansion".to_owned()),
        WordPiece::CommandSubstitution(_) | WordPiece::BackquotedCommandSubstitution(_) => {
            Err("command substitution".to_owned())
        }
        WordPiece::EscapeSequence(sequence) => {
            let escaped = escaped_char(sequence)?;
            if escaped.is_control() || !escaped.is_ascii() {
                return Err("escaped control or non-ASCII character outside quotes".to_owned());
            }
            out.push(escaped);
            Ok(())
        }
        WordPiece::ArithmeticExpression(_) => Err("arithmetic expansion".to_owned()),
    }
}

/// Appends the pieces of a double-quoted sequence.
fn push_double_quoted(out: &mut String, pieces: &[WordPieceWithSource]) -> Result<(), String> {
    for piece in pieces {
        match &piece.piece {
            WordPiece::Text(text) => {
                // The word parser would have split these off; seeing one means the grammar
                // and the model disagree, so refuse.
                if text.contains('$') || text.contains('`') {
                    return Err("expansion inside double quotes".to_owned());
                }
                out.push_str(text);
            }
            WordPiece::EscapeSequence(sequence) => out.push(escaped_char(sequence)?),
            WordPiece::ParameterExpansion(_) => {
                return Err("parameter expansion inside double quotes".to_owned())
            }
            WordPiece::CommandSubstitution(_) | WordPiece::BackquotedCommandSubstitution(_) => {
                return Err("command substitution inside double quotes".to_owned())
            }
            WordPiece::ArithmeticExpression(_) => {
                return Err("arithmetic expansion inside double quotes".to_owned())
            }
            WordPiece::SingleQuotedText(_)
            | WordPiece::AnsiCQuotedText(_)
            | WordPiece::DoubleQuotedSequence(_)
            | WordPiece::GettextDoubleQuotedSequence(_)
            | WordPiece::TildeExpansion(_) => {
                return Err("unexpected construct inside double quotes".to_owned())
            }
        }
    }
    Ok(())
}

/// The character a `\x` escape stands for.
fn escaped_char(sequence: &str) -> Result<char, String> {
    let mut chars = sequence.chars();
    match (chars.next(), chars.next(), chars.next()) {
        (Some('\\'), Some(escaped), None) => Ok(escaped),
        _ => Err("unexpected escape sequence".to_owned()),
    }
}

/// Refuses unquoted text whose meaning the shell would change.
fn check_unquoted(text: &str, first_piece: bool) -> Result<(), String> {
    let mut previous: Option<char> = None;
    for (index, c) in text.chars().enumerate() {
        let reason = match c {
            '*' | '?' | '[' | ']' => Some("glob pattern"),
            '$' => Some("expansion"),
            '`' => Some("command substitution"),
            '\\' => Some("stray backslash"),
            '(' | ')' => Some("parenthesis or extended glob"),
            '~' if (index == 0 && first_piece) || matches!(previous, Some('=' | ':')) => {
                Some("tilde expansion")
            }
            '\r' => Some("carriage return outside quotes"),
            c if c.is_control() => Some("control character outside quotes"),
            c if !c.is_ascii() => Some("non-ASCII character outside quotes"),
            _ => None,
        };
        if let Some(reason) = reason {
            return Err(reason.to_owned());
        }
        previous = Some(c);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_words() {
        let rows: &[(&str, &str)] = &[
            ("ls", "ls"),
            ("-la", "-la"),
            ("'t''ouch'", "touch"),
            ("'l''s'", "ls"),
            ("\"ls\"", "ls"),
            ("l\"s\"", "ls"),
            ("a\\ b", "a b"),
            ("\\$HOME", "$HOME"),
            ("'$HOME'", "$HOME"),
            ("\"a\\$b\"", "a$b"),
            ("\"a\\\"b\"", "a\"b"),
            ("\"a\\\\b\"", "a\\b"),
            ("\"d\\e\"", "d\\e"),
            ("'a b'", "a b"),
            ("''", ""),
            ("\"\"", ""),
            ("'*.rs'", "*.rs"),
            ("\"*.rs\"", "*.rs"),
            ("HEAD~1", "HEAD~1"),
            ("-d,", "-d,"),
            ("a=b", "a=b"),
            ("'x\ny'", "x\ny"),
            ("'caf\u{e9}'", "caf\u{e9}"),
            ("\"caf\u{e9}\"", "caf\u{e9}"),
            ("100%", "100%"),
            ("a#b", "a#b"),
            ("!", "!"),
            ("--format=%H", "--format=%H"),
            ("{}", "{}"),
            ("stash@{0}", "stash@{0}"),
            ("'{'a,b}", "{a,b}"),
            ("{a,b'}'", "{a,b}"),
            ("}{,", "}{,"),
        ];
        for (raw, want) in rows {
            assert_eq!(literal(raw).as_deref(), Ok(*want), "raw {raw:?}");
        }
    }

    #[test]
    fn non_literal_words() {
        let rows: &[(&str, &str)] = &[
            ("$x", "parameter expansion"),
            ("${x}", "parameter expansion"),
            ("\"$x\"", "parameter expansion inside double quotes"),
            ("\"a${x}b\"", "parameter expansion inside double quotes"),
            ("$(id)", "command substitution"),
            ("`id`", "command substitution"),
            ("\"$(id)\"", "command substitution inside double quotes"),
            ("\"`id`\"", "command substitution inside double quotes"),
            ("$((1+1))", "arithmetic expansion"),
            ("$'ls'", "ANSI-C quoting $'…'"),
            ("$'\\x6c\\x73'", "ANSI-C quoting $'…'"),
            ("$\"ls\"", "locale quoting $\"…\""),
            ("~", "tilde expansion"),
            ("~/x", "tilde expansion"),
            ("~root", "tilde expansion"),
            ("a=~/x", "tilde expansion"),
            ("PATH=/a:~/b", "tilde expansion"),
            ("*.rs", "glob pattern"),
            ("l?", "glob pattern"),
            ("[ab]", "glob pattern"),
            ("{a,b}", "brace expansion"),
            ("{1..3}", "brace expansion"),
            ("x{a,b}", "brace expansion"),
            ("{a,'b'}", "brace expansion"),
            ("-{x..y}", "brace expansion"),
            ("@(a|b)", "parenthesis or extended glob"),
            ("ls\r", "carriage return outside quotes"),
            ("\r", "carriage return outside quotes"),
            ("ls\u{a0}-la", "non-ASCII character outside quotes"),
            ("l\u{0455}", "non-ASCII character outside quotes"),
            ("a\u{2028}b", "non-ASCII character outside quotes"),
            ("a\u{7}b", "control character outside quotes"),
            ("a\0b", "NUL character"),
        ];
        for (raw, want) in rows {
            assert_eq!(literal(raw), Err((*want).to_owned()), "raw {raw:?}");
        }
    }
}
