//! A command parsed once for every use one exec makes of it: the names to resolve, the
//! segments to judge and the commands the deny and ask patterns look into all come from the
//! same parse, done after the bounds (docs/security.md, "Command parsing bounds").

use super::bounds::{self, BoundsError};
use super::ir::Script;
use super::parse::{parse_program, script_from};
use super::probe::{self, Probes};

/// A command, bounded and parsed.
#[derive(Debug, Clone)]
pub struct Parsed {
    /// The command line as sent: plans, approvals and exact allow-always entries use it.
    command: String,
    /// The bound the command passes, if any: such a command is refused in every mode, without
    /// having been parsed.
    refusal: Option<BoundsError>,
    /// The IR the allowlist judges.
    pub(crate) script: Script,
    /// Every command the text could run, for patterns and the `/approve` refusal.
    pub(crate) probes: Probes,
}

impl Parsed {
    /// A command refused before (or instead of) its parse.
    pub fn refused(command: &str, why: BoundsError) -> Self {
        Parsed {
            command: command.to_owned(),
            script: Script::failed(why.to_string()),
            probes: Probes::default(),
            refusal: Some(why),
        }
    }

    /// The command line.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// Why the command is refused before any rule looks at it.
    pub fn refusal(&self) -> Option<&BoundsError> {
        self.refusal.as_ref()
    }

    /// Bare command names a caller should resolve through PATH before evaluating: every
    /// segment's command word and the commands its wrappers run.
    pub fn command_names(&self) -> Vec<String> {
        super::command_words::names_of(&self.script)
    }
}

/// Checks the bounds, then parses `command` once. Pure and synchronous: callers that serve
/// others run it off their async workers, under a deadline (`tools::exec_tool::analyse`).
pub fn analyse(command: &str) -> Parsed {
    if let Err(why) = bounds::check(command) {
        return Parsed::refused(command, why);
    }
    let program = parse_program(command);
    Parsed {
        command: command.to_owned(),
        refusal: None,
        script: script_from(command, &program),
        probes: probe::collect_from(command, &program),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_commands_are_not_parsed() {
        let parsed = analyse(&format!("{}1", "((".repeat(16)));
        assert_eq!(
            parsed.refusal(),
            Some(&BoundsError::TooManyParens {
                max: bounds::BOUNDS.max_parens
            })
        );
        assert!(parsed.command_names().is_empty());
    }

    #[test]
    fn one_parse_serves_every_use() {
        let parsed = analyse("nice git status | sh -c 'rm -rf x'");
        assert_eq!(parsed.refusal(), None);
        assert_eq!(parsed.command_names(), vec!["nice", "git", "sh"]);
        assert!(parsed.probes.argvs.iter().any(|a| a[0] == "rm"));
        assert_eq!(parsed.script.segments.len(), 2);
    }
}
