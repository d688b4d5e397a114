//! The host's built-in argv profiles: read-only uses of common tools that may run unasked
//! once the operator allowlisted the program (docs/policy.md, "Argv profiles").
//!
//! On the host an allowlist entry trusts an executable, and an executable is only as safe as
//! its most dangerous option (`tar --checkpoint-action=exec=…`, `date -s`, `journalctl
//! --vacuum-time`). So an unasked host run needs every segment's argv to fit a profile: one of
//! these, one the operator wrote (`[policy.host.argv_profiles.NAME]`), or an exact command the
//! operator approved for good. A profile lists what the program may be given — never what it
//! may not — so an option nobody listed is a miss.
//!
//! Each profile lists only options that read and print: nothing that executes a program,
//! loads a library, writes or deletes a file, changes the system, or reads a configuration file
//! naming any of those. Long options must be written out in full (the tools would accept a
//! prefix, and a prefix the profile resolved differently from the tool would be a hole); short
//! flags may be clustered (`-la`) as getopt reads them; an option's separate value may not
//! start with `-`, so a value-optional option (`journalctl -n`) can never swallow an option the
//! profile does not list. The filters moat already knows option by option (`sort`, `grep`,
//! `head`, …) use their safe-bin tables (safe_bins.rs) with file operands allowed.

use super::safe_bins;

/// What the operands of a profile may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operands {
    /// Files or names to read, at most this many.
    Read(usize),
    /// Words that are neither options nor paths (`ps aux`, `ps -o pid,cmd` values), at most
    /// this many.
    Words(usize),
    /// `date`'s `+FORMAT` only: any other operand sets the clock.
    Format,
}

/// One built-in profile.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Known {
    /// The program's basename.
    pub name: &'static str,
    /// Options without a value (`-l`, `--all`), or written with their value (`--color=never`).
    pub flags: &'static [&'static str],
    /// Options with one value (`-n 5`, `-n5`, `--lines 5`, `--lines=5`).
    pub values: &'static [&'static str],
    /// When non-empty, the first operand must be one of these.
    pub subcommands: &'static [&'static str],
    /// The other operands.
    pub operands: Operands,
}

/// Most files one read-only use may name unasked.
pub(crate) const MAX_READ: usize = 16;

const LS: Known = Known {
    name: "ls",
    flags: &[
        "-a",
        "-A",
        "-l",
        "-h",
        "-d",
        "-1",
        "-R",
        "-t",
        "-r",
        "-S",
        "-i",
        "-n",
        "-F",
        "-p",
        "-L",
        "-c",
        "-u",
        "-g",
        "-o",
        "-s",
        "-X",
        "-v",
        "-G",
        "-U",
        "-k",
        "-H",
        "-N",
        "-q",
        "-Q",
        "--all",
        "--almost-all",
        "--human-readable",
        "--directory",
        "--recursive",
        "--reverse",
        "--inode",
        "--numeric-uid-gid",
        "--classify",
        "--dereference",
        "--si",
        "--full-time",
        "--no-group",
        "--color=never",
        "--color=auto",
        "--color=always",
        "--size",
        "--literal",
        "--quote-name",
    ],
    values: &[
        "--sort",
        "--time",
        "--time-style",
        "--block-size",
        "-w",
        "--width",
    ],
    subcommands: &[],
    operands: Operands::Read(MAX_READ),
};

/// The table, by name; the GNU filters are in [`check`].
const KNOWN: &[Known] = &[
    LS,
    Known {
        name: "cat",
        flags: &[
            "-A",
            "-b",
            "-e",
            "-E",
            "-n",
            "-s",
            "-t",
            "-T",
            "-v",
            "--show-all",
            "--number",
            "--number-nonblank",
            "--squeeze-blank",
            "--show-ends",
            "--show-tabs",
            "--show-nonprinting",
        ],
        values: &[],
        subcommands: &[],
        operands: Operands::Read(MAX_READ),
    },
    Known {
        name: "stat",
        flags: &[
            "-L",
            "-f",
            "-t",
            "--dereference",
            "--file-system",
            "--terse",
        ],
        values: &["-c", "--format", "--printf"],
        subcommands: &[],
        operands: Operands::Read(MAX_READ),
    },
    Known {
        name: "df",
        flags: &[
            "-a",
            "-h",
            "-H",
            "-i",
            "-k",
            "-l",
            "-P",
            "-T",
            "--all",
            "--human-readable",
            "--si",
            "--inodes",
            "--local",
            "--portability",
            "--print-type",
            "--total",
        ],
        values: &["-t", "-x", "--type", "--exclude-type", "-B", "--block-size"],
        subcommands: &[],
        operands: Operands::Read(MAX_READ),
    },
    Known {
        name: "du",
        flags: &[
            "-a",
            "-b",
            "-c",
            "-h",
            "-k",
            "-m",
            "-s",
            "-x",
            "-L",
            "-P",
            "--all",
            "--bytes",
            "--total",
            "--human-readable",
            "--summarize",
            "--one-file-system",
            "--apparent-size",
            "--si",
        ],
        values: &[
            "-d",
            "--max-depth",
            "-B",
            "--block-size",
            "-t",
            "--threshold",
        ],
        subcommands: &[],
        operands: Operands::Read(MAX_READ),
    },
    Known {
        name: "ps",
        flags: &[
            "-e",
            "-A",
            "-a",
            "-d",
            "-f",
            "-F",
            "-l",
            "-j",
            "-H",
            "-w",
            "-x",
            "-y",
            "-L",
            "-T",
            "-M",
            "--forest",
            "--no-headers",
            "--headers",
        ],
        values: &[
            "-o",
            "-O",
            "-p",
            "-u",
            "-U",
            "-g",
            "-G",
            "-C",
            "-q",
            "-s",
            "-t",
            "--sort",
            "--pid",
            "--ppid",
            "--user",
            "--group",
            "--cols",
            "--columns",
            "--format",
        ],
        subcommands: &[],
        operands: Operands::Words(4),
    },
    Known {
        name: "id",
        flags: &[
            "-u", "-g", "-G", "-n", "-r", "-z", "--user", "--group", "--groups", "--name",
        ],
        values: &[],
        subcommands: &[],
        operands: Operands::Words(1),
    },
    Known {
        name: "whoami",
        flags: &[],
        values: &[],
        subcommands: &[],
        operands: Operands::Words(0),
    },
    Known {
        name: "uname",
        flags: &[
            "-a",
            "-s",
            "-n",
            "-r",
            "-v",
            "-m",
            "-p",
            "-i",
            "-o",
            "--all",
            "--kernel-name",
            "--nodename",
            "--kernel-release",
            "--kernel-version",
            "--machine",
            "--operating-system",
        ],
        values: &[],
        subcommands: &[],
        operands: Operands::Words(0),
    },
    // An operand would set the host name.
    Known {
        name: "hostname",
        flags: &[
            "-f",
            "-s",
            "-i",
            "-I",
            "-d",
            "-A",
            "--fqdn",
            "--short",
            "--ip-address",
        ],
        values: &[],
        subcommands: &[],
        operands: Operands::Words(0),
    },
    Known {
        name: "uptime",
        flags: &["-p", "-s", "--pretty", "--since"],
        values: &[],
        subcommands: &[],
        operands: Operands::Words(0),
    },
    Known {
        name: "free",
        flags: &[
            "-b", "-k", "-m", "-g", "-h", "-w", "-t", "--bytes", "--kibi", "--mebi", "--gibi",
            "--human", "--wide", "--total",
        ],
        values: &[],
        subcommands: &[],
        operands: Operands::Words(0),
    },
    Known {
        name: "date",
        flags: &[
            "-u",
            "-R",
            "--utc",
            "--universal",
            "--rfc-email",
            "-I",
            "--iso-8601",
        ],
        values: &["-d", "--date", "--rfc-3339", "-r", "--reference"],
        subcommands: &[],
        operands: Operands::Format,
    },
    Known {
        name: "pwd",
        flags: &["-L", "-P"],
        values: &[],
        subcommands: &[],
        operands: Operands::Words(0),
    },
    Known {
        name: "nproc",
        flags: &["--all"],
        values: &["--ignore"],
        subcommands: &[],
        operands: Operands::Words(0),
    },
    Known {
        name: "realpath",
        flags: &[
            "-e",
            "-m",
            "-s",
            "-q",
            "-z",
            "--canonicalize-existing",
            "--no-symlinks",
        ],
        values: &[],
        subcommands: &[],
        operands: Operands::Read(MAX_READ),
    },
    Known {
        name: "readlink",
        flags: &[
            "-f",
            "-e",
            "-m",
            "-n",
            "-q",
            "-s",
            "-v",
            "-z",
            "--canonicalize",
        ],
        values: &[],
        subcommands: &[],
        operands: Operands::Read(MAX_READ),
    },
    Known {
        name: "sha256sum",
        flags: &["-b", "-t", "-z", "--tag", "--binary", "--text"],
        values: &[],
        subcommands: &[],
        operands: Operands::Read(MAX_READ),
    },
    Known {
        name: "md5sum",
        flags: &["-b", "-t", "-z", "--tag", "--binary", "--text"],
        values: &[],
        subcommands: &[],
        operands: Operands::Read(MAX_READ),
    },
    Known {
        name: "lsblk",
        flags: &[
            "-a", "-b", "-f", "-l", "-m", "-n", "-p", "-J", "-S", "-t", "--all", "--json",
        ],
        values: &["-o", "--output"],
        subcommands: &[],
        operands: Operands::Read(MAX_READ),
    },
    Known {
        name: "findmnt",
        flags: &[
            "-l", "-n", "-J", "-D", "-A", "--list", "--json", "--df", "--all",
        ],
        values: &["-o", "--output", "-t", "--types", "-T", "--target"],
        subcommands: &[],
        operands: Operands::Read(2),
    },
    // Host commands get `SYSTEMD_PAGER=cat` and `SYSTEMD_PAGERSECURE=1` (host/env.rs), so
    // no pager takes keys from a PTY command.
    Known {
        name: "systemctl",
        flags: &[
            "--no-pager",
            "-l",
            "--full",
            "-a",
            "--all",
            "--no-legend",
            "--plain",
            "-q",
            "--quiet",
            "--failed",
            "--user",
            "--system",
        ],
        values: &[
            "-t",
            "--type",
            "--state",
            "-p",
            "--property",
            "-n",
            "--lines",
            "-o",
            "--output",
        ],
        subcommands: &[
            "status",
            "is-active",
            "is-enabled",
            "is-failed",
            "list-units",
            "list-unit-files",
            "list-timers",
            "list-sockets",
            "show",
            "cat",
            "list-dependencies",
        ],
        operands: Operands::Words(MAX_READ),
    },
    Known {
        name: "journalctl",
        flags: &[
            "--no-pager",
            "-b",
            "-k",
            "-r",
            "-x",
            "-q",
            "-a",
            "-e",
            "--reverse",
            "--utc",
            "--quiet",
            "--all",
            "--no-hostname",
            "--dmesg",
            "--catalog",
            "--list-boots",
            "--no-full",
            "--merge",
            "-m",
        ],
        values: &[
            "-u",
            "--unit",
            "-n",
            "--lines",
            "-p",
            "--priority",
            "-S",
            "--since",
            "-U",
            "--until",
            "-o",
            "--output",
            "-g",
            "--grep",
            "-t",
            "--identifier",
            "--user-unit",
            "--boot",
        ],
        subcommands: &[],
        operands: Operands::Words(4),
    },
];

/// The GNU filters whose every option moat knows (safe_bins.rs); on the host they may read
/// the files they name.
const FILTERS: &[&str] = &["sort", "grep", "head", "tail", "wc", "cut", "uniq", "tr"];

/// Whether `name` has a built-in host profile.
pub(crate) fn has_profile(name: &str) -> bool {
    FILTERS.contains(&name) || KNOWN.iter().any(|k| k.name == name)
}

/// Why the wrapper `name`, used as `argv` (its own words), cannot run unasked on the host.
///
/// A wrapper is part of the argv like any program, and some change the machine on their own,
/// as moat's user, whatever they run: `flock` creates its lock file, `nohup` writes
/// `nohup.out` into the working directory, `chrt`, `ionice`, `choom` and a negative `nice`
/// change scheduling and OOM priority for everyone, `setarch` changes the personality. Only
/// the wrappers that change nothing but the command they run pass: `env` and `command` (plain,
/// as the wrapper rules accept them), `timeout`, `time`, `stdbuf`, `taskset`, and `nice` with
/// a non-negative adjustment.
pub(crate) fn wrapper_miss(name: &str, argv: &[String]) -> Option<String> {
    let refused = || {
        Some(format!(
            "the wrapper {name} changes this machine on its own (a file, scheduling or OOM \
             priority), so on the host it needs an operator"
        ))
    };
    match name {
        "env" | "command" | "time" | "timeout" | "stdbuf" | "taskset" => None,
        "nice" if nice_is_gentle(argv.get(1..).unwrap_or_default()) => None,
        "nice" => Some(
            "nice with a negative or unusual adjustment raises priority on the whole machine, \
             so on the host it needs an operator"
                .to_owned(),
        ),
        _ => refused(),
    }
}

/// `nice`'s options give only a non-negative adjustment: `-n N`, `-nN`, `-N`,
/// `--adjustment[=]N` with N all digits.
fn nice_is_gentle(args: &[String]) -> bool {
    let digits = |v: &str| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit());
    let mut index = 0;
    while index < args.len() {
        let arg = args[index].as_str();
        index += 1;
        let ok = match arg {
            "-n" | "--adjustment" => {
                index += 1;
                args.get(index - 1).is_some_and(|v| digits(v))
            }
            _ => arg
                .strip_prefix("--adjustment=")
                .or_else(|| arg.strip_prefix("-n"))
                .or_else(|| arg.strip_prefix('-'))
                .is_some_and(digits),
        };
        if !ok {
            return false;
        }
    }
    true
}

/// Checks `args` (without `argv[0]`) against the built-in profile of `name`: `None` when
/// there is none, otherwise whether the use fits and, if not, why.
pub(crate) fn check(name: &str, args: &[String]) -> Option<Result<(), String>> {
    if FILTERS.contains(&name) {
        let profile = safe_bins::profile(name)?;
        return Some(safe_bins::check_reading(profile, args, MAX_READ));
    }
    let known = KNOWN.iter().find(|k| k.name == name)?;
    Some(check_known(known, args))
}

fn check_known(known: &Known, args: &[String]) -> Result<(), String> {
    let mut operands: Vec<&String> = Vec::new();
    let mut options_done = false;
    let mut index = 0;
    while index < args.len() {
        let arg = &args[index];
        index += 1;
        if options_done || arg == "-" || !arg.starts_with('-') {
            operands.push(arg);
            continue;
        }
        if arg == "--" {
            options_done = true;
            continue;
        }
        if arg.starts_with("--") {
            if known.flags.contains(&arg.as_str()) {
                continue;
            }
            let name = arg.split_once('=').map_or(arg.as_str(), |(name, _)| name);
            if known.values.contains(&name) {
                if name.len() == arg.len() {
                    take_value(args, &mut index, name)?;
                }
                continue;
            }
            return Err(format!("option {} is not in the profile", shown(arg)));
        }
        // A cluster of short options, read as getopt reads it.
        let letters: Vec<char> = arg[1..].chars().collect();
        for (at, letter) in letters.iter().enumerate() {
            let short = format!("-{letter}");
            if known.flags.contains(&short.as_str()) {
                continue;
            }
            if known.values.contains(&short.as_str()) {
                if at + 1 == letters.len() {
                    take_value(args, &mut index, &short)?;
                }
                break;
            }
            return Err(format!("option {short} is not in the profile"));
        }
    }
    let mut operands = operands.into_iter();
    if !known.subcommands.is_empty() {
        match operands.next() {
            Some(sub) if known.subcommands.contains(&sub.as_str()) => {}
            Some(sub) => {
                return Err(format!(
                    "{} {} is not one of the profile's subcommands ({})",
                    known.name,
                    shown(sub),
                    known.subcommands.join(", ")
                ))
            }
            None => return Err(format!("{} needs a subcommand", known.name)),
        }
    }
    let rest: Vec<&String> = operands.collect();
    match known.operands {
        Operands::Read(max) | Operands::Words(max) if rest.len() > max => Err(format!(
            "{} operands, the profile takes at most {max}",
            rest.len()
        )),
        Operands::Words(_) => match rest.iter().find(|w| w.contains('/')) {
            Some(word) => Err(format!("operand {} is a path", shown(word))),
            None => Ok(()),
        },
        Operands::Read(_) => Ok(()),
        Operands::Format => match rest.iter().find(|w| !w.starts_with('+')) {
            Some(word) => Err(format!(
                "operand {} is not a +FORMAT (it would set the clock)",
                shown(word)
            )),
            None if rest.len() > 1 => Err("more than one +FORMAT".to_owned()),
            None => Ok(()),
        },
    }
}

/// Consumes the separate value of `option`; a word starting with `-` is never one.
fn take_value(args: &[String], index: &mut usize, option: &str) -> Result<(), String> {
    match args.get(*index) {
        Some(value) if !value.starts_with('-') => {
            *index += 1;
            Ok(())
        }
        Some(_) => Err(format!(
            "option {option} is followed by an option, not a value (attach a value that starts with - as {option}=VALUE)"
        )),
        None => Err(format!("option {option} needs a value")),
    }
}

fn shown(word: &str) -> String {
    crate::output::escape_display(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(line: &str) -> Option<Result<(), String>> {
        let mut words = line.split(' ').map(str::to_owned);
        let name = words.next().unwrap();
        let args: Vec<String> = words.collect();
        check(&name, &args)
    }

    #[test]
    fn ordinary_reads_fit() {
        for line in [
            "ls -la /etc",
            "ls --all --human-readable /var/log",
            "ls",
            "cat /etc/hostname",
            "cat -n a b",
            "df -h",
            "du -sh /var/log",
            "du --max-depth=1 /var",
            "ps aux",
            "ps -ef",
            "ps -eo pid,cmd",
            "ps -o pid,cmd -p 1",
            "id -u",
            "uname -a",
            "hostname -f",
            "date +%s",
            "date -u +%F",
            "date -d yesterday +%F",
            "systemctl status nginx",
            "systemctl --no-pager status nginx sshd",
            "systemctl is-active nginx",
            "journalctl -u nginx -n 50 --no-pager",
            "journalctl --since=-1h --no-pager",
            "sort -rn /etc/passwd",
            "grep -i root /etc/passwd /etc/group",
            "head -n 5 /etc/os-release",
            "tail -n 20 /var/log/syslog",
            "wc -l a b",
            "uniq -c a",
            "stat -c %s /etc/hostname",
            "sha256sum a b",
        ] {
            assert_eq!(run(line), Some(Ok(())), "{line:?}");
        }
    }

    #[test]
    fn options_that_run_write_or_change_miss() {
        let rows: &[(&str, &str)] = &[
            ("sort -o /etc/x a", "denied option -o"),
            (
                "sort --compress-program=sh a",
                "denied option --compress-program",
            ),
            ("uniq a b", "2 file operands, the profile takes at most 1"),
            ("date -s 2020-01-01", "option -s is not in the profile"),
            ("date 010100002020", "is not a +FORMAT"),
            ("hostname evil", "1 operands, the profile takes at most 0"),
            (
                "journalctl --vacuum-time=1s",
                "option --vacuum-time=1s is not",
            ),
            ("journalctl -n --vacuum-time=1s", "followed by an option"),
            ("journalctl --rotate", "option --rotate is not"),
            (
                "systemctl restart nginx",
                "not one of the profile's subcommands",
            ),
            (
                "systemctl stop nginx",
                "not one of the profile's subcommands",
            ),
            ("systemctl", "needs a subcommand"),
            ("ls --al", "option --al is not in the profile"),
            ("ls -lZ", "option -Z is not in the profile"),
            ("ps -o", "option -o needs a value"),
            ("ps x /tmp/a", "is a path"),
            ("tail -f /var/log/syslog", "denied option -f"),
            ("grep -r x /", "denied option -r"),
            ("cat --help=x", "is not in the profile"),
        ];
        for (line, want) in rows {
            let got = run(line);
            assert!(
                matches!(&got, Some(Err(e)) if e.contains(want)),
                "{line:?}: got {got:?}, want {want:?}"
            );
        }
        assert_eq!(run("tar -cf /dev/null x"), None);
    }

    #[test]
    fn host_wrappers_that_change_the_machine_miss() {
        let w = |line: &str| {
            let argv: Vec<String> = line.split(' ').map(str::to_owned).collect();
            wrapper_miss(&argv[0].clone(), &argv)
        };
        for line in [
            "flock /etc/x",
            "nohup",
            "chrt -f 99",
            "choom -n -1000 --",
            "ionice -c 1",
            "setarch x86_64",
            "nice -n -5",
            "nice -n-5",
            "nice --adjustment=-1",
            "nice --5",
        ] {
            assert!(w(line).is_some(), "{line}");
        }
        for line in [
            "env",
            "timeout 5",
            "time -p",
            "stdbuf -oL",
            "taskset 1",
            "nice",
            "nice -n 5",
            "nice -5",
            "nice --adjustment=3",
            "nice -n5",
        ] {
            assert_eq!(w(line), None, "{line}");
        }
        assert_eq!(run("make"), None);
    }
}
