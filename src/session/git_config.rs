//! Just enough of git's config syntax to find the settings that make git read files from a
//! checkout: `core.hooksPath`, `core.worktree`, `include.path` and `includeIf.*.path`
//! (`session::git_guard`, docs/security.md, "Host workspaces"). Pure: text in, entries out.
//!
//! The syntax followed is git-config(1)'s: `[section]` or `[section "subsection"]` headers
//! (the old `[section.subsection]` too), `name = value` lines, bare `name` for true, values
//! with `"…"` quoting and the `\"`, `\\`, `\n`, `\t`, `\b` escapes, `#` and `;` comments
//! outside quotes, and a `\` at the end of a line continuing the value. Section and key names
//! are case-insensitive; subsections are not. A line this parser cannot read is skipped:
//! git refuses such a file altogether, so nothing it names is used anyway.

/// One `section.subsection.key = value`, names lowercased (not the subsection).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The section, lowercased (`core`, `include`, `includeif`).
    pub section: String,
    /// The subsection as written (`gitdir:~/work/`), if any.
    pub subsection: Option<String>,
    /// The key, lowercased (`hookspath`).
    pub key: String,
    /// The value, unquoted and unescaped; `None` for a bare key.
    pub value: Option<String>,
}

/// Every entry of `text`, in order (later ones win for single-valued keys, as in git).
pub fn parse(text: &str) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut section = String::new();
    let mut subsection = None;
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let mut rest = line.trim_start();
        if rest.starts_with('[') {
            match header(rest) {
                Some((s, sub, after)) => {
                    section = s;
                    subsection = sub;
                    rest = after.trim_start();
                    if rest.is_empty() || rest.starts_with('#') || rest.starts_with(';') {
                        continue;
                    }
                }
                None => continue,
            }
        }
        if rest.is_empty() || rest.starts_with('#') || rest.starts_with(';') {
            continue;
        }
        let name_len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(rest.len());
        if name_len == 0 || section.is_empty() {
            continue;
        }
        let key = rest[..name_len].to_ascii_lowercase();
        let after = rest[name_len..].trim_start();
        let value = if let Some(v) = after.strip_prefix('=') {
            // A value may continue on the next lines after a trailing backslash.
            let mut raw = v.to_string();
            while ends_continued(&raw) {
                raw.pop();
                match lines.next() {
                    Some(next) => raw.push_str(next),
                    None => break,
                }
            }
            match value(&raw) {
                Some(v) => Some(v),
                None => continue,
            }
        } else if after.is_empty() || after.starts_with('#') || after.starts_with(';') {
            None
        } else {
            continue;
        };
        out.push(Entry {
            section: section.clone(),
            subsection: subsection.clone(),
            key,
            value,
        });
    }
    out
}

/// The last value of `section.key` outside any subsection.
pub fn last<'a>(entries: &'a [Entry], section: &str, key: &str) -> Option<&'a str> {
    entries
        .iter()
        .rev()
        .find(|e| e.section == section && e.subsection.is_none() && e.key == key)
        .and_then(|e| e.value.as_deref())
}

/// The paths of every `include.path` and `includeIf.<condition>.path`, whatever the
/// condition: a condition that does not hold today may hold tomorrow.
pub fn includes(entries: &[Entry]) -> Vec<&str> {
    entries
        .iter()
        .filter(|e| e.key == "path" && (e.section == "include" || e.section == "includeif"))
        .filter_map(|e| e.value.as_deref())
        .collect()
}

/// `[section]`, `[section "sub"]` or `[section.sub]` at the start of `line`: the names and
/// what follows the `]`.
fn header(line: &str) -> Option<(String, Option<String>, &str)> {
    let inner = &line[1..];
    let name_len = inner
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '.'))
        .unwrap_or(inner.len());
    let name = &inner[..name_len];
    let after = &inner[name_len..];
    if let Some(after) = after.strip_prefix(']') {
        return match name.split_once('.') {
            Some((s, sub)) => Some((
                s.to_ascii_lowercase(),
                Some(sub.to_ascii_lowercase()),
                after,
            )),
            None if !name.is_empty() => Some((name.to_ascii_lowercase(), None, after)),
            None => None,
        };
    }
    let quoted = after.trim_start().strip_prefix('"')?;
    let mut sub = String::new();
    let mut chars = quoted.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => sub.push(chars.next()?.1),
            '"' => {
                let rest = quoted[i + 1..].strip_prefix(']')?;
                if name.is_empty() || name.contains('.') {
                    return None;
                }
                return Some((name.to_ascii_lowercase(), Some(sub), rest));
            }
            c => sub.push(c),
        }
    }
    None
}

/// Whether `raw` ends in a backslash that is not itself escaped.
fn ends_continued(raw: &str) -> bool {
    let trailing = raw.bytes().rev().take_while(|b| *b == b'\\').count();
    trailing % 2 == 1
}

/// A value as git reads it: quotes removed, escapes applied, an unquoted comment dropped,
/// unquoted surrounding blanks trimmed. `None` for a bad escape or an unclosed quote.
fn value(raw: &str) -> Option<String> {
    let mut out = String::new();
    // Blanks seen outside quotes are kept only when something follows them.
    let mut pending = String::new();
    let mut quoted = false;
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                out.push_str(&pending);
                pending.clear();
                quoted = !quoted;
            }
            '\\' => {
                let e = match chars.next()? {
                    'n' => '\n',
                    't' => '\t',
                    'b' => '\u{8}',
                    '"' => '"',
                    '\\' => '\\',
                    _ => return None,
                };
                out.push_str(&pending);
                pending.clear();
                out.push(e);
            }
            '#' | ';' if !quoted => break,
            c if c.is_whitespace() && !quoted => {
                if !out.is_empty() {
                    pending.push(c);
                }
            }
            c => {
                out.push_str(&pending);
                pending.clear();
                out.push(c);
            }
        }
    }
    (!quoted).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_settings_that_name_files_are_found_as_git_reads_them() {
        let text = r#"
[core]
	repositoryformatversion = 0
	bare = false
	hooksPath = .husky/_   # husky's
[CORE]
	HooksPath = "tools/git hooks" ; quoted
[include]
	path = ../shared.gitconfig
[includeIf "gitdir:~/work/"]
	path = work.inc
[submodule "lib"]
	path = never-an-include
[core]
	worktree = ../../../lib
	fsmonitor
[alias]
	long = "!echo \"a\" \
b"
[broken
	hooksPath = ignored-without-a-section-change
"#;
        let e = parse(text);
        assert_eq!(last(&e, "core", "hookspath"), Some("tools/git hooks"));
        assert_eq!(last(&e, "core", "worktree"), Some("../../../lib"));
        assert_eq!(includes(&e), vec!["../shared.gitconfig", "work.inc"]);
        let sub = e.iter().find(|x| x.section == "includeif").unwrap();
        assert_eq!(sub.subsection.as_deref(), Some("gitdir:~/work/"));
        let bare = e.iter().find(|x| x.key == "fsmonitor").unwrap();
        assert_eq!(bare.value, None);
        let alias = e.iter().find(|x| x.key == "long").unwrap();
        assert_eq!(alias.value.as_deref(), Some("!echo \"a\" b"));
    }

    #[test]
    fn old_style_subsections_and_odd_lines() {
        let e = parse(
            "[include.sub]\npath=x\n[core] hooksPath = inline\n=oops\n[core]\nbad = \"open\n",
        );
        assert_eq!(e[0].section, "include");
        assert_eq!(e[0].subsection.as_deref(), Some("sub"));
        assert_eq!(last(&e, "core", "hookspath"), Some("inline"));
        assert!(e.iter().all(|x| x.key != "bad"));
        assert!(parse("").is_empty());
    }
}
