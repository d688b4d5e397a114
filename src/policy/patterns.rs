//! Operator argv patterns (`ask_patterns`, `deny_patterns`).
//!
//! A pattern is split like a shell line (quotes group words) into tokens. The first token
//! names the command and is compared with the basename of `argv[0]` (or with the whole path when
//! the token contains a `/`). Every other token matches one argument with glob syntax, where
//! `*` may cross `/`. A trailing lone `*` matches any number of remaining arguments, including
//! none, and a pattern of a single token matches the command with any arguments, so
//! `sudo` and `sudo *` mean the same.

use globset::{GlobBuilder, GlobMatcher};

use super::error::PolicyError;
use super::paths::basename;

/// One compiled argv pattern.
#[derive(Debug, Clone)]
pub struct ArgvPattern {
    /// The pattern as configured, reported when it matches.
    text: String,
    /// Matcher for `argv[0]`.
    command: GlobMatcher,
    /// Whether `argv[0]` is compared as a full path rather than by basename.
    command_is_path: bool,
    /// Matchers for the following arguments.
    args: Vec<GlobMatcher>,
    /// Whether any further arguments are accepted.
    open_ended: bool,
}

impl ArgvPattern {
    /// Compiles a pattern.
    pub fn compile(text: &str) -> Result<Self, PolicyError> {
        let invalid = |reason: &str| PolicyError::InvalidPattern {
            pattern: text.to_owned(),
            reason: reason.to_owned(),
        };
        let mut tokens = shlex::split(text).ok_or_else(|| invalid("unbalanced quotes"))?;
        if tokens.is_empty() {
            return Err(invalid("empty pattern"));
        }
        let open_ended = tokens.len() == 1 || tokens.last().is_some_and(|t| t == "*");
        if tokens.len() > 1 && open_ended {
            tokens.pop();
        }
        let compile = |token: &str| {
            GlobBuilder::new(token)
                .literal_separator(false)
                .backslash_escape(true)
                .build()
                .map(|glob| glob.compile_matcher())
                .map_err(|err| invalid(&err.to_string()))
        };
        let command = compile(&tokens[0])?;
        let args = tokens[1..]
            .iter()
            .map(|t| compile(t))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            text: text.to_owned(),
            command,
            command_is_path: tokens[0].contains('/'),
            args,
            open_ended,
        })
    }

    /// The pattern as configured.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the pattern matches an argv; `resolved` is the resolved path of `argv[0]`, if known.
    pub fn matches(&self, argv: &[String], resolved: Option<&str>) -> bool {
        let Some(first) = argv.first() else {
            return false;
        };
        let command_matches = if self.command_is_path {
            self.command.is_match(first) || resolved.is_some_and(|r| self.command.is_match(r))
        } else {
            self.command.is_match(basename(first))
                || resolved.is_some_and(|r| self.command.is_match(basename(r)))
        };
        if !command_matches {
            return false;
        }
        let rest = &argv[1..];
        if rest.len() < self.args.len() || (!self.open_ended && rest.len() != self.args.len()) {
            return false;
        }
        self.args
            .iter()
            .zip(rest)
            .all(|(glob, arg)| glob.is_match(arg))
    }
}

/// A compiled list of patterns.
#[derive(Debug, Clone, Default)]
pub struct PatternSet {
    /// Patterns in configuration order; the first match is reported.
    patterns: Vec<ArgvPattern>,
}

impl PatternSet {
    /// Compiles the usable patterns; broken ones are reported by
    /// [`Policy::validate`](super::Policy::validate) and never match here.
    pub fn compile_lenient(patterns: &[String]) -> Self {
        Self {
            patterns: patterns
                .iter()
                .filter_map(|p| ArgvPattern::compile(p).ok())
                .collect(),
        }
    }

    /// Whether the set has no patterns.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// The first pattern matching any of the layers. `resolve` names what `argv[0]` of a layer
    /// also goes by: its PATH hit, so that path-form patterns (`/usr/bin/rm *`) also catch
    /// `rm`, and its symlink target, so that a link named `x` to `sudo` is caught by `sudo *`.
    pub fn find<'s>(
        &'s self,
        layers: &[Vec<String>],
        resolve: &dyn Fn(&str) -> Vec<String>,
    ) -> Option<&'s str> {
        let resolved: Vec<Vec<String>> = layers
            .iter()
            .map(|layer| {
                layer
                    .first()
                    .map(|first| resolve(first))
                    .unwrap_or_default()
            })
            .collect();
        self.patterns
            .iter()
            .find(|p| {
                layers.iter().zip(&resolved).any(|(layer, paths)| {
                    p.matches(layer, None) || paths.iter().any(|path| p.matches(layer, Some(path)))
                })
            })
            .map(ArgvPattern::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(text: &str) -> Vec<String> {
        text.split(' ')
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn matching_table() {
        let rows: &[(&str, &str, bool)] = &[
            ("sudo *", "sudo", true),
            ("sudo *", "sudo rm -rf /", true),
            ("sudo", "sudo rm -rf /", true),
            ("sudo", "sudoedit x", false),
            ("sudo *", "/usr/bin/sudo ls", true),
            ("git push *", "git push", true),
            ("git push *", "git push origin main", true),
            ("git push *", "git pull", false),
            ("git push *", "git", false),
            ("git push", "git push", true),
            ("git push", "git push origin", false),
            ("rm -rf *", "rm -rf /", true),
            ("rm -rf *", "rm -rf", true),
            ("rm -rf *", "rm -fr /", false),
            ("rm -r* *", "rm -rf /", true),
            ("rm * /", "rm -rf /", true),
            ("rm * /", "rm -rf /tmp", false),
            ("git push --force*", "git push --force-with-lease", true),
            ("git push * --force", "git push origin --force", true),
            ("git push * --force", "git push --force", false),
            ("curl *://evil*", "curl https://evil.example", true),
            ("/usr/bin/rm *", "/usr/bin/rm x", true),
            ("/usr/bin/rm *", "rm x", false),
            ("py* -c *", "python3 -c x", true),
            ("* --delete *", "rsync -a --delete a b", false),
            ("* -a --delete *", "rsync -a --delete a b", true),
            ("*", "anything at all", true),
            ("echo 'a b'", "echo", false),
        ];
        for (pattern, command, want) in rows {
            let compiled = ArgvPattern::compile(pattern).unwrap();
            assert_eq!(
                compiled.matches(&argv(command), None),
                *want,
                "{pattern:?} vs {command:?}"
            );
        }
        let quoted = ArgvPattern::compile("echo 'a b'").unwrap();
        assert!(quoted.matches(&["echo".to_owned(), "a b".to_owned()], None));
        let by_path = ArgvPattern::compile("/usr/bin/rm *").unwrap();
        assert!(by_path.matches(&argv("rm x"), Some("/usr/bin/rm")));
        let by_name = ArgvPattern::compile("rm *").unwrap();
        assert!(by_name.matches(&argv("./rm x"), None));
    }

    #[test]
    fn invalid_patterns() {
        for pattern in ["", "   ", "echo 'unbalanced", "rm [abc"] {
            assert!(ArgvPattern::compile(pattern).is_err(), "{pattern:?}");
        }
    }

    #[test]
    fn set_reports_first_match_over_layers() {
        let set = PatternSet::compile_lenient(&["rm -rf *".to_owned(), "sudo *".to_owned()]);
        let layers = vec![argv("sudo rm -rf /"), argv("rm -rf /")];
        let nothing = |_: &str| Vec::new();
        assert_eq!(set.find(&layers, &nothing), Some("rm -rf *"));
        assert_eq!(set.find(&[argv("ls")], &nothing), None);
        let by_path = PatternSet::compile_lenient(&["/usr/bin/rm *".to_owned()]);
        let path = |word: &str| vec![format!("/usr/bin/{word}")];
        assert_eq!(
            by_path.find(&[argv("nice rm x"), argv("rm x")], &path),
            Some("/usr/bin/rm *")
        );
        assert_eq!(by_path.find(&[argv("nice ls")], &path), None);
        assert!(PatternSet::compile_lenient(&[]).is_empty());
        // A symlink named `x` that resolves to sudo is sudo.
        let sudo = PatternSet::compile_lenient(&["sudo *".to_owned()]);
        let link = |word: &str| {
            if word == "/workspace/x" || word == "x" {
                vec!["/usr/bin/sudo".to_owned()]
            } else {
                Vec::new()
            }
        };
        assert_eq!(sudo.find(&[argv("/workspace/x id")], &link), Some("sudo *"));
        assert_eq!(sudo.find(&[argv("x id")], &link), Some("sudo *"));
        assert_eq!(sudo.find(&[argv("y id")], &link), None);
    }
}
