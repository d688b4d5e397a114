//! The command words of a parsed script, as evaluation and the callers that resolve names
//! through PATH both read them: every segment's argv with its `time` keyword, and the bare
//! names of the commands it and its wrappers run.

use super::ir::{Script, Segment, TimeKeyword};
use super::resolve::is_bare_name;
use super::wrappers::{is_code_builtin, pattern_layers};

/// The names [`command_names`](super::command_names) lists, from a script already parsed.
pub(crate) fn names_of(script: &Script) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for segment in &script.segments {
        for layer in pattern_layers(&with_time_keyword(segment)) {
            let first = &layer[0];
            let wanted = is_bare_name(first) && !is_code_builtin(first) && first != "command";
            if wanted && !names.contains(first) {
                names.push(first.clone());
            }
        }
    }
    names
}

/// The argv of a segment with a `time` keyword turned back into the `time` program.
pub(crate) fn with_time_keyword(segment: &Segment) -> Vec<String> {
    let prefix: &[&str] = match segment.time_keyword {
        None => &[],
        Some(TimeKeyword::Plain) => &["time"],
        Some(TimeKeyword::Posix) => &["time", "-p"],
    };
    prefix
        .iter()
        .map(|s| (*s).to_owned())
        .chain(segment.argv.iter().cloned())
        .collect()
}
