//! Options that make an allowlisted program run, load or write something else (docs/policy.md,
//! "Gadget options").
//!
//! An allowlist entry names an executable, but many programs take an option that executes a
//! command (`tar --checkpoint-action=exec=…`, `split --filter=…`, `rg --pre …`), loads a
//! library (`curl --engine`, `openssl -engine`), writes a file beside their output (`sort -o`,
//! `curl -o`) or reads a configuration file that can do any of those (`curl -K`, `apt -c`).
//! Such an option turns "the operator allowed tar" into "the operator allowed a shell". This
//! table lists them for the programs the default image ships that the public GTFOBins catalogue
//! lists with a shell, command, library-load or file-write function; a use of one is a miss
//! even when the program is allowlisted.
//!
//! Matching errs towards the miss, never towards the allow:
//! - a long option matches every prefix of its name (GNU getopt_long and git resolve
//!   unambiguous abbreviations: `--checkpoint-act=` is `--checkpoint-action=`), except the
//!   program's own harmless options that happen to be such a prefix, listed exactly
//!   (`tar --checkpoint=1` is not `--checkpoint-action`);
//! - a short gadget anywhere in a cluster matches (`-xIf`), even where the program would
//!   read the letter as another option's value;
//! - `tar`'s old-style first argument (`tar xIf …`) is a cluster too;
//! - scanning stops only at `--`, after which every word is an operand.
//!
//! Programs whose purpose is writing files (`cp`, `mv`, `tee`, `dd`, `install`, `ln`, `tar`
//! extracting) are not gadgets here: allowlisting one trusts it with its purpose
//! (docs/policy.md says so). Interpreters are the inline-eval rules' business
//! (`inline_eval.rs`); programs that run a command they are handed are wrappers or dispatchers
//! (`wrappers.rs`); git's subcommands have their own table (`git.rs`), which uses the matcher
//! below.

use super::paths::basename;

/// What a gadget option does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Power {
    /// Executes a program or shell command it names.
    Runs,
    /// Loads a shared library (an engine, a provider, a plugin).
    Loads,
    /// Writes a file it names, beside or instead of the output.
    Writes,
    /// Reads a configuration file, which can set any of the above.
    Configures,
    /// Changes the system beyond files (the clock).
    Changes,
}

impl Power {
    /// The phrase a miss reason uses.
    pub(crate) fn phrase(self) -> &'static str {
        match self {
            Self::Runs => "runs a program",
            Self::Loads => "loads a library",
            Self::Writes => "writes a file",
            Self::Configures => "reads a configuration file that can run or write anything",
            Self::Changes => "changes the system",
        }
    }
}

/// One gadget option, spelled as the program spells it: `--checkpoint-action`, `-I`, or for
/// single-dash programs (`find`, `openssl`) `-exec`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Gadget {
    /// The option as written in the program's documentation.
    pub option: &'static str,
    /// What it does, for the reason.
    pub power: Power,
}

/// How a program parses its options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Style {
    /// GNU getopt_long: `-x` clusters, `--name[=value]` with unambiguous prefixes.
    Gnu,
    /// GNU getopt_long, and the first argument without a dash is a cluster too (`tar xIf`).
    GnuOldTar,
    /// Whole words with one dash (`find -exec`, `openssl -engine`); a second leading dash is
    /// tolerated as the program tolerates it, and no prefix is accepted.
    SingleDash,
}

/// The gadgets of one program.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Program {
    /// Basenames the program goes by.
    pub names: &'static [&'static str],
    /// How it parses options.
    pub style: Style,
    /// Its gadget options.
    pub gadgets: &'static [Gadget],
    /// The program's own long options (without dashes) that are a prefix of a gadget's name
    /// but are harmless themselves; getopt takes an exact match first, so these are not
    /// abbreviations of the gadget.
    pub exact_ok: &'static [&'static str],
    /// Words that are gadgets wherever they occur in an option's name, for programs whose
    /// options come in families (openssl's `-engine`, `-ssl_client_engine`,
    /// `-keygen_engine`, `-provider-path`, …): a family member the table forgot still misses.
    pub families: &'static [Gadget],
    /// First operands (subcommands) that are gadgets themselves (`openssl engine PATH`).
    pub subcommands: &'static [Gadget],
}

pub(crate) const fn g(option: &'static str, power: Power) -> Gadget {
    Gadget { option, power }
}

use Power::{Changes, Configures, Loads, Runs, Writes};

/// The table. Sources: each program's manual, and GTFOBins (`_gtfobins/<name>`) for which of
/// its functions reach a shell, a command, a library or a file write.
pub(crate) const PROGRAMS: &[Program] = &[
    Program {
        names: &["tar"],
        style: Style::GnuOldTar,
        gadgets: &[
            g("--checkpoint-action", Runs),
            g("--to-command", Runs),
            g("--use-compress-program", Runs),
            g("-I", Runs),
            g("--info-script", Runs),
            g("--new-volume-script", Runs),
            g("-F", Runs),
            g("--rsh-command", Runs),
            g("--rmt-command", Runs),
            g("--index-file", Writes),
            g("--volno-file", Writes),
            // The next-volume prompt runs a shell on `!` (a PTY command's keys are the agent's).
            g("--multi-volume", Runs),
            g("-M", Runs),
            g("--tape-length", Runs),
            g("-L", Runs),
        ],
        exact_ok: &["checkpoint", "to-stdout"],
        families: &[],
        subcommands: &[],
    },
    Program {
        names: &["find"],
        style: Style::SingleDash,
        gadgets: &[
            g("-exec", Runs),
            g("-execdir", Runs),
            g("-ok", Runs),
            g("-okdir", Runs),
            g("-delete", Writes),
            g("-fprint", Writes),
            g("-fprint0", Writes),
            g("-fprintf", Writes),
            g("-fls", Writes),
        ],
        exact_ok: &[],
        families: &[],
        subcommands: &[],
    },
    Program {
        names: &["split"],
        style: Style::Gnu,
        gadgets: &[g("--filter", Runs)],
        exact_ok: &[],
        families: &[],
        subcommands: &[],
    },
    Program {
        names: &["sort"],
        style: Style::Gnu,
        gadgets: &[
            g("--compress-program", Runs),
            g("--output", Writes),
            g("-o", Writes),
            g("--temporary-directory", Writes),
            g("-T", Writes),
        ],
        exact_ok: &[],
        families: &[],
        subcommands: &[],
    },
    Program {
        names: &["shuf"],
        style: Style::Gnu,
        gadgets: &[g("--output", Writes), g("-o", Writes)],
        exact_ok: &[],
        families: &[],
        subcommands: &[],
    },
    Program {
        names: &["rg"],
        style: Style::Gnu,
        gadgets: &[
            g("--pre", Runs),
            g("--search-zip", Runs),
            g("-z", Runs),
            g("--hostname-bin", Runs),
        ],
        exact_ok: &[],
        families: &[],
        subcommands: &[],
    },
    Program {
        names: &["curl"],
        style: Style::Gnu,
        gadgets: &[
            g("--engine", Loads),
            g("--config", Configures),
            g("-K", Configures),
            g("--output", Writes),
            g("-o", Writes),
            g("--remote-name", Writes),
            g("--remote-name-all", Writes),
            g("-O", Writes),
            g("--output-dir", Writes),
            g("--dump-header", Writes),
            g("-D", Writes),
            g("--cookie-jar", Writes),
            g("-c", Writes),
            g("--libcurl", Writes),
            g("--trace", Writes),
            g("--trace-ascii", Writes),
            g("--stderr", Writes),
            g("--etag-save", Writes),
            g("--hsts", Writes),
            g("--alt-svc", Writes),
            g("--create-dirs", Writes),
        ],
        exact_ok: &[],
        families: &[],
        subcommands: &[],
    },
    Program {
        names: &["openssl"],
        style: Style::SingleDash,
        gadgets: &[
            g("-engine", Loads),
            g("-keygen_engine", Loads),
            g("-provider", Loads),
            g("-provider-path", Loads),
            g("-config", Configures),
            g("-out", Writes),
            g("-keyout", Writes),
            g("-writerand", Writes),
            g("-sess_out", Writes),
            g("-keylogfile", Writes),
            g("-msgfile", Writes),
            g("-signature", Writes),
            g("-reqout", Writes),
            g("-respout", Writes),
        ],
        exact_ok: &[],
        families: &[g("engine", Loads), g("provider", Loads)],
        subcommands: &[g("engine", Loads)],
    },
    Program {
        names: &["dpkg"],
        style: Style::Gnu,
        gadgets: &[
            g("--pre-invoke", Runs),
            g("--post-invoke", Runs),
            g("--status-logger", Runs),
            g("--install", Runs),
            g("-i", Runs),
            g("--unpack", Runs),
            g("--configure", Runs),
            g("--extract", Writes),
            g("-x", Writes),
            g("--vextract", Writes),
            g("-X", Writes),
            g("--log", Writes),
            g("--root", Configures),
            g("--admindir", Configures),
            g("--instdir", Configures),
        ],
        exact_ok: &[],
        families: &[],
        subcommands: &[],
    },
    Program {
        names: &["apt", "apt-get", "apt-cache", "apt-config", "apt-mark"],
        style: Style::Gnu,
        gadgets: &[
            g("--option", Runs),
            g("-o", Runs),
            g("--config-file", Configures),
            g("-c", Configures),
        ],
        exact_ok: &[],
        families: &[],
        subcommands: &[],
    },
    Program {
        names: &["date"],
        style: Style::Gnu,
        gadgets: &[g("--set", Changes), g("-s", Changes)],
        exact_ok: &[],
        families: &[],
        subcommands: &[],
    },
    Program {
        names: &["uniq"],
        style: Style::Gnu,
        // uniq's second operand is its output file; see `operand_miss`.
        gadgets: &[],
        exact_ok: &[],
        families: &[],
        subcommands: &[],
    },
    Program {
        names: &["tic"],
        style: Style::Gnu,
        gadgets: &[g("-o", Writes)],
        exact_ok: &[],
        families: &[],
        subcommands: &[],
    },
    Program {
        names: &["agetty", "getty"],
        style: Style::Gnu,
        gadgets: &[g("--login-program", Runs), g("-l", Runs)],
        exact_ok: &[],
        families: &[],
        subcommands: &[],
    },
    Program {
        names: &["ldconfig"],
        style: Style::Gnu,
        gadgets: &[g("-f", Configures), g("-C", Writes), g("-r", Configures)],
        exact_ok: &[],
        families: &[],
        subcommands: &[],
    },
    Program {
        names: &["sysctl"],
        style: Style::Gnu,
        // A `NAME=VALUE` operand writes too (`kernel.core_pattern=|cmd`); see `operand_miss`.
        gadgets: &[
            g("--write", Changes),
            g("-w", Changes),
            g("--load", Changes),
            g("-p", Changes),
            g("-f", Changes),
            g("--system", Changes),
        ],
        exact_ok: &[],
        families: &[],
        subcommands: &[],
    },
    Program {
        names: &["zic"],
        style: Style::Gnu,
        gadgets: &[
            g("-y", Runs),
            g("-d", Writes),
            g("-l", Writes),
            g("-p", Writes),
        ],
        exact_ok: &[],
        families: &[],
        subcommands: &[],
    },
    Program {
        names: &["iconv"],
        style: Style::Gnu,
        gadgets: &[g("--output", Writes), g("-o", Writes)],
        exact_ok: &[],
        families: &[],
        subcommands: &[],
    },
    Program {
        names: &["update-alternatives"],
        style: Style::Gnu,
        gadgets: &[
            g("--install", Writes),
            g("--set", Writes),
            g("--remove", Writes),
            g("--remove-all", Writes),
            g("--auto", Writes),
            g("--all", Writes),
            g("--config", Writes),
            g("--set-selections", Writes),
            g("--altdir", Configures),
            g("--admindir", Configures),
            g("--log", Writes),
        ],
        exact_ok: &[],
        families: &[],
        subcommands: &[],
    },
];

/// The gadget `args` (without `argv[0]`) use, for the table entry of `name`.
pub(crate) fn program(name: &str) -> Option<&'static Program> {
    PROGRAMS.iter().find(|p| p.names.contains(&name))
}

/// The first gadget among `args` under `style`.
pub(crate) fn find<'t>(
    style: Style,
    gadgets: &'t [Gadget],
    exact_ok: &[&str],
    args: &[String],
) -> Option<(&'t Gadget, String)> {
    for (index, arg) in args.iter().enumerate() {
        // For getopt `--` ends the options; `find` reads it only as the end of its leading
        // `-H/-L/-P` and parses `-exec` after it all the same, so single-dash programs scan on.
        if arg == "--" && style != Style::SingleDash {
            return None;
        }
        let hit = match style {
            Style::SingleDash => single_dash(gadgets, arg),
            Style::Gnu | Style::GnuOldTar => {
                if index == 0 && style == Style::GnuOldTar && !arg.starts_with('-') {
                    cluster(gadgets, arg)
                } else if let Some(body) = arg.strip_prefix("--") {
                    long(gadgets, exact_ok, body)
                } else if arg.len() > 1 && arg.starts_with('-') {
                    cluster(gadgets, &arg[1..])
                } else {
                    None
                }
            }
        };
        if let Some(gadget) = hit {
            return Some((gadget, arg.clone()));
        }
    }
    None
}

/// `--name` or `--name=value`: every prefix of a long gadget matches, but for the program's
/// own harmless options written out in full.
fn long<'t>(gadgets: &'t [Gadget], exact_ok: &[&str], body: &str) -> Option<&'t Gadget> {
    let name = body.split_once('=').map_or(body, |(name, _)| name);
    if name.is_empty() || exact_ok.contains(&name) {
        return None;
    }
    gadgets.iter().find(|gadget| {
        gadget
            .option
            .strip_prefix("--")
            .is_some_and(|full| full.starts_with(name))
    })
}

/// A cluster of short options (`xvIf`): any gadget letter in it matches.
fn cluster<'t>(gadgets: &'t [Gadget], letters: &str) -> Option<&'t Gadget> {
    letters.chars().find_map(|c| {
        gadgets.iter().find(|gadget| {
            let mut chars = gadget.option.chars();
            chars.next() == Some('-') && chars.next() == Some(c) && chars.next().is_none()
        })
    })
}

/// A single-dash word: `-exec`, also `--exec` and `-out=x` forms some programs accept.
fn single_dash<'t>(gadgets: &'t [Gadget], arg: &str) -> Option<&'t Gadget> {
    let body = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-'))?;
    let name = body.split_once('=').map_or(body, |(name, _)| name);
    gadgets
        .iter()
        .find(|gadget| gadget.option.strip_prefix('-') == Some(name))
}

/// The first option among `args` whose name contains one of `families`' words.
fn family<'t>(families: &'t [Gadget], args: &[String]) -> Option<(&'t Gadget, String)> {
    args.iter().filter(|a| a.starts_with('-')).find_map(|arg| {
        let lower = arg.to_ascii_lowercase();
        families
            .iter()
            .find(|g| lower.contains(g.option))
            .map(|g| (g, crate::output::escape_display(arg)))
    })
}

/// Operands that write: `uniq IN OUT` writes OUT; `sysctl NAME=VALUE` sets NAME.
fn operand_miss(name: &str, args: &[String]) -> Option<String> {
    if name != "uniq" && name != "sysctl" {
        return None;
    }
    let mut operands = Vec::new();
    let mut options_done = false;
    for arg in args {
        if !options_done && arg == "--" {
            options_done = true;
            continue;
        }
        if !options_done && arg.len() > 1 && arg.starts_with('-') {
            continue;
        }
        operands.push(arg);
    }
    match name {
        "uniq" => (operands.len() > 1)
            .then(|| "uniq writes its second operand (an output file)".to_owned()),
        _ => operands.iter().find(|o| o.contains('=')).map(|o| {
            format!(
                "sysctl {} changes the system (a NAME=VALUE operand writes)",
                crate::output::escape_display(o)
            )
        }),
    }
}

/// Why `inner` (a command and its arguments, `resolved` its path) is a miss for a gadget it
/// uses, if it is one. Both the typed name and the resolved name are looked up, so a symlink
/// does not hide `tar`.
pub(crate) fn miss(inner: &[String], resolved: &str) -> Option<String> {
    let args = inner.get(1..).unwrap_or_default();
    let mut names = vec![basename(resolved)];
    if let Some(word) = inner.first() {
        if basename(word) != names[0] {
            names.push(basename(word));
        }
    }
    for name in names {
        if let Some(reason) = operand_miss(name, args) {
            return Some(reason);
        }
        let Some(program) = program(name) else {
            continue;
        };
        if let Some((gadget, typed)) = find(program.style, program.gadgets, program.exact_ok, args)
        {
            return Some(describe(name, gadget, &typed));
        }
        if let Some((gadget, typed)) = family(program.families, args) {
            return Some(format!(
                "{name} {typed} names the {} option family, which {}",
                gadget.option,
                gadget.power.phrase()
            ));
        }
        let first = args.iter().find(|a| !a.starts_with('-'));
        if let Some(gadget) = first.and_then(|w| program.subcommands.iter().find(|g| g.option == w))
        {
            return Some(format!(
                "{name} {} {}",
                gadget.option,
                gadget.power.phrase()
            ));
        }
    }
    None
}

/// `tar --checkpoint-act=exec=sh` → `tar --checkpoint-action runs a program (as --checkpoint-act=exec=sh)`.
pub(crate) fn describe(program: &str, gadget: &Gadget, typed: &str) -> String {
    let typed = crate::output::escape_display(typed);
    if typed == gadget.option {
        format!("{program} {} {}", gadget.option, gadget.power.phrase())
    } else {
        format!(
            "{program} {} {} (as {typed})",
            gadget.option,
            gadget.power.phrase()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(line: &str) -> Option<String> {
        let argv: Vec<String> = line.split(' ').map(str::to_owned).collect();
        let path = format!("/usr/bin/{}", argv[0]);
        miss(&argv, &path)
    }

    #[test]
    fn gadgets_are_misses_however_spelled() {
        let rows: &[(&str, &str)] = &[
            (
                "tar -cf /dev/null x --checkpoint=1 --checkpoint-action=exec=sh",
                "tar --checkpoint-action runs a program",
            ),
            (
                "tar -cf /dev/null x --checkpoint-act=exec=sh",
                "--checkpoint-action runs a program (as --checkpoint-act=exec=sh)",
            ),
            ("tar --to-com=sh -xf a.tar", "tar --to-command"),
            ("tar -xIf sh a.tar", "tar -I runs a program"),
            ("tar xIf sh a.tar", "tar -I runs a program"),
            ("tar -I sh -xf a.tar", "tar -I"),
            ("tar --use-compress=sh -xf a", "--use-compress-program"),
            ("tar -xf a -F ./next", "tar -F runs a program"),
            ("tar -cf a --rsh-command=/bin/sh h:x", "--rsh-command"),
            (
                "split --filter=sh /etc/hosts",
                "split --filter runs a program",
            ),
            ("split --fil=sh x", "split --filter"),
            ("sort --compress-program=sh x", "sort --compress-program"),
            ("sort -o out x", "sort -o writes a file"),
            ("sort -ro out x", "sort -o writes a file"),
            ("rg --pre ./p x", "rg --pre runs a program"),
            ("rg -z x", "rg -z runs a program"),
            ("rg -iz x", "rg -z"),
            ("rg --search-zip x", "rg --search-zip"),
            ("curl --engine x https://h", "curl --engine loads a library"),
            ("curl -sSLo out https://h", "curl -o writes a file"),
            ("curl -K cfg https://h", "curl -K reads a configuration"),
            (
                "openssl version -engine ./e.so",
                "openssl -engine loads a library",
            ),
            ("openssl req --engine ./e.so", "openssl -engine"),
            ("openssl enc -in a -out b", "openssl -out writes a file"),
            ("find . -exec sh ;", "find -exec runs a program"),
            ("find . -delete", "find -delete writes a file"),
            ("find . -fprintf f x", "find -fprintf"),
            (
                "dpkg --pre-invoke=sh -l",
                "dpkg --pre-invoke runs a program",
            ),
            (
                "apt-get -o APT::Update::Pre-Invoke::=sh update",
                "apt-get -o",
            ),
            ("uniq in out", "uniq writes its second operand"),
            ("find -- . -exec sh ;", "find -exec runs a program"),
            ("find -- -exec touch x ;", "find -exec runs a program"),
            ("tar -c -M -L 10 -f v.tar x", "tar -M runs a program"),
            ("tar --multi-volume -cf v.tar x", "tar --multi-volume"),
            (
                "openssl engine /w/evil.so",
                "openssl engine loads a library",
            ),
            (
                "openssl engine dynamic -pre SO_PATH:/w/e.so",
                "openssl engine loads",
            ),
            (
                "openssl s_client -ssl_client_engine /w/e.so -connect h:1",
                "openssl -ssl_client_engine names the engine option family",
            ),
            ("openssl req -PROVIDER x", "provider option family"),
            ("uniq -c in out", "uniq writes its second operand"),
            (
                "sysctl kernel.core_pattern=|/tmp/x",
                "sysctl kernel.core_pattern",
            ),
            ("sysctl -w a", "sysctl -w changes the system"),
            ("iconv -f a -t b -o out", "iconv -o writes a file"),
            ("zic -y ./cmd f", "zic -y runs a program"),
            (
                "update-alternatives --force --install /x x /y 0",
                "--install writes",
            ),
            ("date -s 2020-01-01", "date -s changes the system"),
        ];
        for (line, want) in rows {
            let got = run(line);
            assert!(
                got.as_deref().is_some_and(|g| g.contains(want)),
                "{line:?}: got {got:?}, want {want:?}"
            );
        }
    }

    #[test]
    fn ordinary_uses_pass() {
        for line in [
            "tar -czf out.tgz dir",
            "tar xzf a.tgz",
            "tar -tvf a.tar",
            "tar --checkpoint=1 -cf a.tar x",
            "tar -xf a.tar --to-stdout",
            "tar -xf a.tar -- --checkpoint-action=exec=sh",
            "split -l 10 x",
            "sort -rn -k2 x",
            "rg -n foo src",
            "rg --pre-glob '*.gz' foo",
            "curl -fsSL https://h",
            "curl -H X-A:b https://h",
            "openssl version",
            "openssl x509 -in c.pem -noout -text",
            "find . -name x -print",
            "dpkg -l",
            "apt-cache policy x",
            "uniq -c",
            "uniq in",
            "date +%s",
            "ls -la",
            "sysctl -a",
            "sysctl kernel.hostname",
            "update-alternatives --display editor",
        ] {
            assert_eq!(run(line), None, "{line:?}");
        }
    }

    #[test]
    fn a_symlink_does_not_hide_the_program() {
        let argv: Vec<String> = ["t", "--checkpoint-action=exec=sh"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        assert!(miss(&argv, "/usr/bin/tar").is_some());
        let argv: Vec<String> = ["/usr/bin/tar", "--to-command=sh"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        assert!(miss(&argv, "/opt/bin/x").is_some());
    }
}
