//! Safe-bin profiles an operator writes in configuration (`safe_bin_profiles.<bin>`), for
//! stdin filters moat has no built-in profile for (`jq`, `yq`, …). See docs/policy.md,
//! "Operator safe-bin profiles".
//!
//! moat does not know the options of an operator's program, so a custom profile is matched
//! exactly: every option must be written as listed (no abbreviations of long options, no
//! clustered short flags, no value glued to a short option), anything else starting with `-`
//! is refused, and operands past `max_positional` would be files and are refused too. A safe
//! bin reads stdin only, so there is no switch that allows file operands.

use serde::{Deserialize, Serialize};

/// One operator-defined profile.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BinProfile {
    /// Options that take no value (`-r`, `--raw-output`), accepted only exactly as written.
    pub allowed_flags: Vec<String>,
    /// Options that take one value, in the next argument (`--indent 2`) or, for long
    /// options, after `=` (`--indent=2`); the value is never judged as an option or operand.
    pub value_flags: Vec<String>,
    /// Operands the program needs (a jq filter, a pattern); fewer is a miss.
    pub min_positional: usize,
    /// Operands it may take; any further operand would be a file (`-` for stdin excepted).
    pub max_positional: usize,
    /// When non-empty, the first operand must be one of these words (`systemctl status`,
    /// `git log`), so a profile can name the read-only subcommands of a program that also
    /// has others. The subcommand counts as an operand; with `min_positional = 0` a use
    /// with no operand at all (`git --version`) passes too.
    pub subcommands: Vec<String>,
}

/// Largest `max_positional` accepted: operands beyond a handful are files in any filter.
pub const MAX_POSITIONAL: usize = 16;

impl BinProfile {
    /// Checks the profile of `bin` as configured; the error names the offending key under
    /// `safe_bin_profiles.<bin>`.
    pub fn validate(&self, bin: &str) -> Result<(), String> {
        self.validate_in("safe_bin_profiles", bin)
    }

    /// Checks the profile of `bin` found in the table `table` (`safe_bin_profiles`,
    /// `argv_profiles`); the error names the offending key.
    pub fn validate_in(&self, table: &str, bin: &str) -> Result<(), String> {
        let key = |field: &str| format!("{table}.{bin}.{field}");
        if bin.is_empty() || bin.contains('/') || bin.chars().any(char::is_whitespace) {
            return Err(format!(
                "{table}.{bin:?}: a profile is named by a bare binary name"
            ));
        }
        if let Some(word) = self
            .subcommands
            .iter()
            .find(|w| w.is_empty() || w.starts_with('-') || w.contains('/'))
        {
            return Err(format!(
                "{}: {word:?} is not a subcommand (a word without a leading - or a /)",
                key("subcommands")
            ));
        }

        for (field, list) in [
            ("allowed_flags", &self.allowed_flags),
            ("value_flags", &self.value_flags),
        ] {
            for opt in list {
                if let Err(why) = option_shape(opt) {
                    return Err(format!("{}: {opt:?} {why}", key(field)));
                }
            }
        }
        if let Some(both) = self
            .allowed_flags
            .iter()
            .find(|f| self.value_flags.contains(f))
        {
            return Err(format!(
                "{}: {both:?} is also in allowed_flags; an option either takes a value or not",
                key("value_flags")
            ));
        }
        if self.max_positional > MAX_POSITIONAL {
            return Err(format!(
                "{}: {} is above the limit of {MAX_POSITIONAL}",
                key("max_positional"),
                self.max_positional
            ));
        }
        if self.min_positional > self.max_positional {
            return Err(format!(
                "{}: {} is above max_positional ({})",
                key("min_positional"),
                self.min_positional,
                self.max_positional
            ));
        }
        Ok(())
    }

    /// Checks the arguments (without `argv[0]`) of a use; the error says what missed.
    pub fn check(&self, args: &[String]) -> Result<(), String> {
        let mut operands = 0usize;
        let mut options_done = false;
        let mut i = 0;
        while i < args.len() {
            let arg = &args[i];
            i += 1;
            if options_done || arg == "-" || !arg.starts_with('-') {
                if arg != "-" {
                    operands += 1;
                    if operands > self.max_positional {
                        return Err(format!("file operand {arg:?}"));
                    }
                }
                continue;
            }
            if arg == "--" {
                options_done = true;
                continue;
            }
            if self.allowed_flags.iter().any(|f| f == arg) {
                continue;
            }
            if self.value_flags.iter().any(|f| f == arg) {
                if i >= args.len() {
                    return Err(format!("option {arg} needs a value"));
                }
                i += 1;
                continue;
            }
            if let Some((name, _)) = arg.split_once('=') {
                if name.starts_with("--") && self.value_flags.iter().any(|f| f == name) {
                    continue;
                }
            }
            return Err(format!("option {arg} is not in the profile"));
        }
        if let Some(first) = first_operand(args, &self.value_flags) {
            if !self.subcommands.is_empty() && !self.subcommands.iter().any(|w| w == first) {
                return Err(format!(
                    "{} is not one of the profile's subcommands ({})",
                    crate::output::escape_display(first),
                    self.subcommands.join(", ")
                ));
            }
        }
        if operands < self.min_positional {
            return Err(format!(
                "{operands} operand(s), the profile needs at least {}",
                self.min_positional
            ));
        }
        Ok(())
    }
}

/// The first operand of `args`, skipping options and the values of `value_flags` as
/// [`BinProfile::check`] does.
fn first_operand<'a>(args: &'a [String], value_flags: &[String]) -> Option<&'a str> {
    let mut index = 0;
    while index < args.len() {
        let arg = &args[index];
        index += 1;
        if arg == "--" {
            return args.get(index).map(String::as_str);
        }
        if arg == "-" || !arg.starts_with('-') {
            return Some(arg);
        }
        if value_flags.iter().any(|f| f == arg) {
            index += 1;
        }
    }
    None
}

/// An option as a profile may list it: `-x` (one character) or `--name`.
fn option_shape(opt: &str) -> Result<(), &'static str> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    if let Some(long) = opt.strip_prefix("--") {
        if long.is_empty() || long.starts_with('-') || !long.chars().all(ok_char) {
            return Err("is not an option (expected -x or --name, without a value)");
        }
        return Ok(());
    }
    match opt.strip_prefix('-').map(|s| s.chars().collect::<Vec<_>>()) {
        Some(c) if c.len() == 1 && c[0].is_ascii_alphanumeric() => Ok(()),
        Some(c) if c.len() > 1 && c.iter().all(|c| ok_char(*c)) => {
            Err("is several short options or a single-dash long option; list each -x on its own")
        }
        _ => Err("is not an option (expected -x or --name, without a value)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jq() -> BinProfile {
        BinProfile {
            allowed_flags: ["-r", "--raw-output", "-c", "-S", "-e", "-n"]
                .map(String::from)
                .to_vec(),
            value_flags: ["--indent", "--arg"].map(String::from).to_vec(),
            min_positional: 1,
            max_positional: 1,
            subcommands: Vec::new(),
        }
    }

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn check_table() {
        let rows: &[(&str, Result<(), &str>)] = &[
            (".", Ok(())),
            ("-r .", Ok(())),
            (". -r", Ok(())),
            ("-r -c -S .name", Ok(())),
            ("--indent 4 .", Ok(())),
            ("--indent=4 .", Ok(())),
            ("--arg -f .", Ok(())),
            (". -", Ok(())),
            ("-- -weird-filter", Ok(())),
            ("", Err("0 operand(s), the profile needs at least 1")),
            ("-r", Err("0 operand(s), the profile needs at least 1")),
            (". /etc/passwd", Err("file operand \"/etc/passwd\"")),
            ("-- . -r", Err("file operand \"-r\"")),
            ("-f /dev/stdin", Err("option -f is not in the profile")),
            (
                "--from-file x",
                Err("option --from-file is not in the profile"),
            ),
            ("-rf x", Err("option -rf is not in the profile")),
            ("--raw .", Err("option --raw is not in the profile")),
            (
                "--raw-output=x .",
                Err("option --raw-output=x is not in the profile"),
            ),
            ("-r=1 .", Err("option -r=1 is not in the profile")),
            (
                "--rawfile a b .",
                Err("option --rawfile is not in the profile"),
            ),
            (". --indent", Err("option --indent needs a value")),
            ("-L /tmp .", Err("option -L is not in the profile")),
        ];
        for (args, want) in rows {
            let got = jq().check(&words(args));
            assert_eq!(
                got.as_ref().map_err(String::as_str),
                want.as_ref().map_err(|w| *w),
                "{args:?}"
            );
        }
    }

    #[test]
    fn validate_table() {
        let with = |f: &dyn Fn(&mut BinProfile)| {
            let mut p = jq();
            f(&mut p);
            p
        };
        let rows: Vec<(BinProfile, &str, Result<(), &str>)> = vec![
            (jq(), "jq", Ok(())),
            (BinProfile::default(), "tac", Ok(())),
            (
                with(&|p| p.allowed_flags.push("-rc".into())),
                "jq",
                Err("safe_bin_profiles.jq.allowed_flags: \"-rc\" is several short options"),
            ),
            (
                with(&|p| p.value_flags.push("--indent=2".into())),
                "jq",
                Err("safe_bin_profiles.jq.value_flags: \"--indent=2\" is not an option"),
            ),
            (
                with(&|p| p.allowed_flags.push("raw".into())),
                "jq",
                Err("safe_bin_profiles.jq.allowed_flags: \"raw\" is not an option"),
            ),
            (
                with(&|p| p.allowed_flags.push("--".into())),
                "jq",
                Err("safe_bin_profiles.jq.allowed_flags: \"--\" is not an option"),
            ),
            (
                with(&|p| p.allowed_flags.push("-".into())),
                "jq",
                Err("safe_bin_profiles.jq.allowed_flags: \"-\" is not an option"),
            ),
            (
                with(&|p| p.value_flags.push("-r".into())),
                "jq",
                Err("safe_bin_profiles.jq.value_flags: \"-r\" is also in allowed_flags"),
            ),
            (
                with(&|p| p.min_positional = 2),
                "jq",
                Err("safe_bin_profiles.jq.min_positional: 2 is above max_positional (1)"),
            ),
            (
                with(&|p| p.max_positional = 17),
                "jq",
                Err("safe_bin_profiles.jq.max_positional: 17 is above the limit of 16"),
            ),
            (
                jq(),
                "/usr/bin/jq",
                Err("safe_bin_profiles.\"/usr/bin/jq\": a profile is named by a bare binary name"),
            ),
        ];
        for (profile, bin, want) in rows {
            let got = profile.validate(bin);
            match (got, want) {
                (Ok(()), Ok(())) => {}
                (Err(e), Err(w)) => assert!(e.starts_with(w), "{e:?} should start with {w:?}"),
                (got, want) => panic!("{bin}: got {got:?}, want {want:?}"),
            }
        }
    }
}
