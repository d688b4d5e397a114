//! The command that actually runs.
//!
//! In allowlist mode the plan is rebuilt from the checked IR, never taken from the original
//! text: `argv[0]` becomes the resolved absolute path, every word is single-quoted, joiners and
//! the modelled redirections are re-emitted, and here-document bodies are re-emitted verbatim
//! under a quoted delimiter. Re-parsing the plan yields exactly the checked segments.

use serde::{Deserialize, Serialize};

use crate::output::quote;

/// What will run if the command is allowed (or approved).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// The exact shell text to execute.
    pub command: String,
    /// Whether `command` was rebuilt from the checked segments (allowlist mode) rather than
    /// being the original text (full mode, or an approval for something the model could not
    /// rebuild), so a caller knows whether `segments` describes it.
    pub rebuilt: bool,
    /// The segments of a rebuilt command; empty when `rebuilt` is false.
    pub segments: Vec<PlannedSegment>,
}

/// One segment of a rebuilt command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedSegment {
    /// The argv that runs: wrappers and the command with their resolved absolute paths.
    pub argv: Vec<String>,
    /// Output redirections, verbatim (`2>&1`, `>/dev/null`, `2>/dev/null`), in source order.
    pub redirects: Vec<String>,
    /// The literal stdin of a quoted here-document, kept apart because its body is emitted after
    /// the command line.
    pub heredoc: Option<String>,
    /// The operator to the next segment (`|`, `&&`, `||`, `;`); `None` on the last one.
    pub joiner: Option<String>,
}

/// A here-document delimiter that no body line equals.
fn delimiter(segments: &[PlannedSegment]) -> String {
    let lines: Vec<&str> = segments
        .iter()
        .filter_map(|s| s.heredoc.as_deref())
        .flat_map(|body| body.split('\n'))
        .collect();
    let mut candidate = "MOATEOF".to_owned();
    let mut counter = 0u32;
    while lines.contains(&candidate.as_str()) {
        counter += 1;
        candidate = format!("MOATEOF{counter}");
    }
    candidate
}

/// Renders planned segments as one shell command.
pub fn render(segments: &[PlannedSegment]) -> String {
    let delimiter = delimiter(segments);
    let mut line = String::new();
    let mut bodies = String::new();
    for segment in segments {
        let words: Vec<String> = segment.argv.iter().map(|w| quote(w)).collect();
        line.push_str(&words.join(" "));
        for redirect in &segment.redirects {
            line.push(' ');
            line.push_str(redirect);
        }
        if let Some(body) = &segment.heredoc {
            line.push_str(" <<'");
            line.push_str(&delimiter);
            line.push('\'');
            bodies.push_str(body);
            bodies.push_str(&delimiter);
            bodies.push('\n');
        }
        if let Some(joiner) = &segment.joiner {
            line.push(' ');
            line.push_str(joiner);
            line.push(' ');
        }
    }
    if !bodies.is_empty() {
        line.push('\n');
        line.push_str(&bodies);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::ir::Redirect;
    use crate::policy::parse::parse_script;

    fn segment(argv: &[&str], joiner: Option<&str>) -> PlannedSegment {
        PlannedSegment {
            argv: argv.iter().map(|s| (*s).to_owned()).collect(),
            redirects: Vec::new(),
            heredoc: None,
            joiner: joiner.map(str::to_owned),
        }
    }

    #[test]
    fn render_table() {
        let rows: Vec<(Vec<PlannedSegment>, &str)> = vec![
            (
                vec![segment(&["/usr/bin/ls", "-la"], None)],
                "'/usr/bin/ls' '-la'",
            ),
            (
                vec![
                    segment(&["/usr/bin/grep", "foo"], Some("|")),
                    segment(&["/usr/bin/head", "-5"], None),
                ],
                "'/usr/bin/grep' 'foo' | '/usr/bin/head' '-5'",
            ),
            (
                vec![
                    segment(&["/usr/bin/ls"], Some("&&")),
                    segment(&["/usr/bin/git", "status"], Some(";")),
                    segment(&["/usr/bin/true"], Some("||")),
                    segment(&["/usr/bin/false"], None),
                ],
                "'/usr/bin/ls' && '/usr/bin/git' 'status' ; '/usr/bin/true' || '/usr/bin/false'",
            ),
            (
                vec![PlannedSegment {
                    argv: vec!["/usr/bin/make".into(), "test".into()],
                    redirects: vec!["2>&1".into()],
                    heredoc: None,
                    joiner: None,
                }],
                "'/usr/bin/make' 'test' 2>&1",
            ),
            (
                vec![
                    PlannedSegment {
                        argv: vec!["/usr/bin/cat".into()],
                        redirects: vec![],
                        heredoc: Some("MOATEOF\n$x\n".into()),
                        joiner: Some("|".into()),
                    },
                    segment(&["/usr/bin/wc", "-l"], None),
                ],
                "'/usr/bin/cat' <<'MOATEOF1' | '/usr/bin/wc' '-l'\nMOATEOF\n$x\nMOATEOF1\n",
            ),
        ];
        for (segments, want) in rows {
            assert_eq!(render(&segments), want);
        }
    }

    #[test]
    fn rendered_heredoc_reparses_to_the_same_body() {
        let body = "line one\n$HOME `id` $(id)\nMOATEOF\n\ttabbed\n";
        let segments = vec![
            PlannedSegment {
                argv: vec!["/usr/bin/cat".into()],
                redirects: vec![],
                heredoc: Some(body.into()),
                joiner: Some("|".into()),
            },
            PlannedSegment {
                argv: vec!["/usr/bin/wc".into()],
                redirects: vec![],
                heredoc: Some(String::new()),
                joiner: Some("&&".into()),
            },
            segment(&["/usr/bin/ls"], None),
        ];
        let script = parse_script(&render(&segments));
        assert_eq!(script.first_miss(), None);
        assert_eq!(script.segments.len(), 3);
        assert_eq!(
            script.segments[0].redirects,
            vec![Redirect::HereDoc { body: body.into() }]
        );
        assert_eq!(
            script.segments[1].redirects,
            vec![Redirect::HereDoc {
                body: String::new()
            }]
        );
        assert_eq!(script.segments[2].argv, vec!["/usr/bin/ls".to_owned()]);
    }
}
