//! GNU-style option scanning shared by the safe-bin profiles and the wrapper rules.
//!
//! getopt_long accepts any unambiguous prefix of a long option (`--comp` for
//! `--compress-program`), so a profile lists every long option the real program knows, with a
//! verdict for each: a prefix is resolved against the whole list exactly as the program would,
//! and only then judged. Unknown options are refused.

/// Whether an option takes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arg {
    /// A flag.
    None,
    /// Takes a value: attached (`-n5`, `--lines=5`) or in the next argument.
    Required,
    /// Takes a value only when attached with `=` (`--color=auto`).
    Optional,
}

/// One option of a program.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Opt {
    /// The short form, if any.
    pub short: Option<char>,
    /// The long form without dashes, if any.
    pub long: Option<&'static str>,
    /// Whether and how it takes a value.
    pub arg: Arg,
    /// Whether a profile lets it pass; denied options read or write files or run programs.
    pub allowed: bool,
}

impl Opt {
    /// The name used in reports: the long form if there is one.
    pub(crate) fn name(&self) -> String {
        match (self.long, self.short) {
            (Some(long), _) => format!("--{long}"),
            (None, Some(short)) => format!("-{short}"),
            (None, None) => "?".to_owned(),
        }
    }
}

/// Shorthand constructors keep the profile tables readable.
pub(crate) const fn flag(short: Option<char>, long: Option<&'static str>) -> Opt {
    Opt {
        short,
        long,
        arg: Arg::None,
        allowed: true,
    }
}

/// An allowed option that takes a value.
pub(crate) const fn value(short: Option<char>, long: Option<&'static str>) -> Opt {
    Opt {
        short,
        long,
        arg: Arg::Required,
        allowed: true,
    }
}

/// An allowed long option with an optional `=value`.
pub(crate) const fn optional(long: &'static str) -> Opt {
    Opt {
        short: None,
        long: Some(long),
        arg: Arg::Optional,
        allowed: true,
    }
}

/// A denied option.
pub(crate) const fn deny(short: Option<char>, long: Option<&'static str>, arg: Arg) -> Opt {
    Opt {
        short,
        long,
        arg,
        allowed: false,
    }
}

/// How a program parses its options.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OptionSpec {
    /// Every option the program knows.
    pub opts: &'static [Opt],
    /// Whether `-NUM` is an option (`head -5`, `grep -3`).
    pub numeric: bool,
    /// Whether options may follow operands (GNU permutation); when false, the first operand
    /// ends option parsing, as for wrappers whose operand is the command to run.
    pub permute: bool,
}

/// What a scan found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Scanned {
    /// Operands in order.
    pub operands: Vec<String>,
    /// Options seen, by report name, in order.
    pub seen: Vec<String>,
    /// With `permute == false`: the index in `args` of the first operand.
    pub rest_at: Option<usize>,
}

/// Resolves a long option name (without dashes) the way getopt_long does.
pub(crate) fn resolve_long<'t>(opts: &'t [Opt], given: &str) -> Result<&'t Opt, String> {
    if let Some(exact) = opts.iter().find(|o| o.long == Some(given)) {
        return Ok(exact);
    }
    let mut matches = opts
        .iter()
        .filter(|o| o.long.is_some_and(|l| l.starts_with(given)));
    match (matches.next(), matches.next()) {
        (Some(only), None) => Ok(only),
        (Some(_), Some(_)) => Err(format!("ambiguous option --{given}")),
        (None, _) => Err(format!("unknown option --{given}")),
    }
}

/// Scans `args` (without `argv[0]`) against a spec, refusing denied and unknown options.
pub(crate) fn scan(spec: &OptionSpec, args: &[String]) -> Result<Scanned, String> {
    let mut scanned = Scanned::default();
    let mut index = 0;
    while index < args.len() {
        let arg = &args[index];
        index += 1;
        if arg == "--" {
            if !spec.permute {
                scanned.rest_at = Some(index);
                return Ok(scanned);
            }
            scanned.operands.extend(args[index..].iter().cloned());
            return Ok(scanned);
        }
        if let Some(body) = arg.strip_prefix("--") {
            let (name, attached) = match body.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (body, None),
            };
            let opt = resolve_long(spec.opts, name)?;
            judge(opt, &format!("--{name}"))?;
            match (opt.arg, attached) {
                (Arg::None, Some(_)) => {
                    return Err(format!("option {} takes no value", opt.name()))
                }
                (Arg::Required, None) => {
                    if index >= args.len() {
                        return Err(format!("option {} needs a value", opt.name()));
                    }
                    index += 1;
                }
                (Arg::None | Arg::Optional, None) | (Arg::Required | Arg::Optional, Some(_)) => {}
            }
            scanned.seen.push(opt.name());
            continue;
        }
        if arg.len() > 1 && arg.starts_with('-') {
            let cluster = &arg[1..];
            if spec.numeric && cluster.starts_with(|c: char| c.is_ascii_digit()) {
                if !cluster.chars().all(|c| c.is_ascii_digit()) {
                    return Err(format!("unknown option {arg}"));
                }
                scanned.seen.push("-NUM".to_owned());
                continue;
            }
            for (offset, c) in cluster.char_indices() {
                let Some(opt) = spec.opts.iter().find(|o| o.short == Some(c)) else {
                    return Err(format!("unknown option -{c}"));
                };
                judge(opt, &format!("-{c}"))?;
                scanned.seen.push(opt.name());
                if opt.arg == Arg::Required {
                    let rest = &cluster[offset + c.len_utf8()..];
                    if rest.is_empty() {
                        if index >= args.len() {
                            return Err(format!("option -{c} needs a value"));
                        }
                        index += 1;
                    }
                    break;
                }
            }
            continue;
        }
        if !spec.permute {
            scanned.rest_at = Some(index - 1);
            return Ok(scanned);
        }
        scanned.operands.push(arg.clone());
    }
    Ok(scanned)
}

/// Refuses a denied option, naming both what was typed and what it means.
fn judge(opt: &Opt, typed_name: &str) -> Result<(), String> {
    if opt.allowed {
        return Ok(());
    }
    let name = opt.name();
    if typed_name == name {
        Err(format!("denied option {name}"))
    } else {
        Err(format!("denied option {typed_name} ({name})"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPTS: &[Opt] = &[
        flag(Some('r'), Some("reverse")),
        value(Some('k'), Some("key")),
        deny(Some('o'), Some("output"), Arg::Required),
        deny(None, Some("compress-program"), Arg::Required),
        flag(None, Some("check")),
        optional("color"),
    ];
    const SPEC: OptionSpec = OptionSpec {
        opts: OPTS,
        numeric: true,
        permute: true,
    };

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn long_prefixes_resolve_like_getopt() {
        let rows: &[(&str, Result<&str, &str>)] = &[
            ("reverse", Ok("--reverse")),
            ("rev", Ok("--reverse")),
            ("r", Ok("--reverse")),
            ("out", Ok("--output")),
            ("comp", Ok("--compress-program")),
            ("c", Err("ambiguous option --c")),
            ("ch", Ok("--check")),
            ("x", Err("unknown option --x")),
            ("reversed", Err("unknown option --reversed")),
        ];
        for (given, want) in rows {
            let got = resolve_long(OPTS, given).map(|o| o.name());
            assert_eq!(
                got.as_deref().map_err(String::as_str),
                *want,
                "given {given:?}"
            );
        }
    }

    #[test]
    fn scan_table() {
        type Row<'a> = (&'a [&'a str], Result<&'a [&'a str], &'a str>);
        let rows: &[Row<'_>] = &[
            (&["-r"], Ok(&[])),
            (&["-rk1"], Ok(&[])),
            (&["-k", "1", "x"], Ok(&["x"])),
            (&["--key=1"], Ok(&[])),
            (&["--key", "1"], Ok(&[])),
            (&["-5"], Ok(&[])),
            (&["-5r"], Err("unknown option -5r")),
            (&["-ro", "f"], Err("denied option -o (--output)")),
            (&["--out=f"], Err("denied option --out (--output)")),
            (&["--output", "f"], Err("denied option --output")),
            (
                &["--comp", "sh"],
                Err("denied option --comp (--compress-program)"),
            ),
            (&["--reverse=1"], Err("option --reverse takes no value")),
            (&["--color"], Ok(&[])),
            (&["--color=auto"], Ok(&[])),
            (&["-k"], Err("option -k needs a value")),
            (&["--key"], Err("option --key needs a value")),
            (&["-z"], Err("unknown option -z")),
            (&["a", "-r", "b"], Ok(&["a", "b"])),
            (&["--", "-o", "x"], Ok(&["-o", "x"])),
            (&["-"], Ok(&["-"])),
        ];
        for (input, want) in rows {
            let got = scan(&SPEC, &args(input)).map(|s| s.operands);
            let want = want.map(args).map_err(str::to_owned);
            assert_eq!(got, want, "args {input:?}");
        }
    }

    #[test]
    fn scan_without_permutation_stops_at_the_first_operand() {
        let spec = OptionSpec {
            opts: OPTS,
            numeric: false,
            permute: false,
        };
        let scanned = scan(&spec, &args(&["-r", "ls", "-o"])).unwrap();
        assert_eq!(scanned.rest_at, Some(1));
        let scanned = scan(&spec, &args(&["-k", "1", "--", "-o"])).unwrap();
        assert_eq!(scanned.rest_at, Some(3));
        let scanned = scan(&spec, &args(&["-r"])).unwrap();
        assert_eq!(scanned.rest_at, None);
    }
}
