//! Commands that run other commands.
//!
//! Transparent wrappers (`env`, `nice`, `nohup`, `timeout`, `stdbuf`, `time`, `command`) are
//! peeled off so the inner command is what gets checked. Privilege wrappers never pass in
//! allowlist mode. Dispatchers whose inner command cannot be pinned down from argv (`xargs`,
//! `find -exec`, `setsid`, …) and shell builtins that run code or change shell state are misses.

use super::options::{deny, flag, scan, value, Arg, Opt, OptionSpec};
use super::paths::basename;

/// How many wrappers may be stacked before the segment is a miss.
pub(crate) const MAX_WRAPPERS: usize = 4;

/// Wrappers that change who runs the command; they never pass in allowlist mode.
pub(crate) const PRIVILEGE_WRAPPERS: &[&str] = &[
    "sudo", "sudoedit", "doas", "su", "pkexec", "runuser", "run0", "chroot", "setpriv",
];

/// Programs that run a command the argv does not pin down, or run it in a changed context the
/// engine does not model; they are misses even when allowlisted.
const DISPATCHERS: &[&str] = &[
    "xargs",
    "parallel",
    "setsid",
    "unshare",
    "nsenter",
    "busybox",
    "toybox",
    "watch",
    "strace",
    "ltrace",
    "script",
    "sg",
    "newgrp",
    "systemd-run",
    // Runs every executable in a directory, or the ones a pattern picks.
    "run-parts",
    // Starts whatever `--exec`/`--startas` name, with its own user and chroot options.
    "start-stop-daemon",
    // Runs its operand under limits its options set in several syntaxes.
    "prlimit",
    // Pagers, editors and documentation readers run a shell from what is typed at them
    // (`!sh`), and a PTY command takes its keys from the agent.
    "more",
    "less",
    "pg",
    "most",
    "vi",
    "vim",
    "view",
    "ex",
    "ed",
    "red",
    "nano",
    "rnano",
    "pico",
    "emacs",
    "man",
    "info",
    // Imports the module it is named after: code from the working directory.
    "pydoc",
    "pydoc3",
    // Debuggers and interactive tools that run a shell from their input.
    "pdb",
    "pdb3",
    "debugfs",
    "perlbug",
    "perlthanks",
    "perldoc",
    // The dynamic loader runs the program it is given; ldd may run it too.
    "ld.so",
    "ld-linux-x86-64.so.2",
    "ld-linux-aarch64.so.1",
    "ld-linux.so.2",
    "ldd",
    // Runs its command operand with output saved to a file.
    "logsave",
    // Runs an init script named by its operand (`service ../../bin/sh`).
    "service",
    // Runs the `pipe` commands of its configuration file, which lives in a home the
    // sandbox writes.
    "top",
];

/// Shell builtins that run code, define code, or change the state later segments run in.
/// Their names never reach a binary in a rebuilt plan, so they are refused outright.
const CODE_BUILTINS: &[&str] = &[
    ".",
    "alias",
    "bg",
    "bind",
    "break",
    "builtin",
    "caller",
    "cd",
    "compgen",
    "complete",
    "compopt",
    "continue",
    "coproc",
    "declare",
    "dirs",
    "disown",
    "enable",
    "eval",
    "exec",
    "exit",
    "export",
    "fc",
    "fg",
    "getopts",
    "hash",
    "history",
    "jobs",
    "let",
    "local",
    "logout",
    "mapfile",
    "popd",
    "pushd",
    "read",
    "readarray",
    "readonly",
    "return",
    "select",
    "set",
    "shift",
    "shopt",
    "source",
    "suspend",
    "times",
    "trap",
    "typeset",
    "ulimit",
    "umask",
    "unalias",
    "unset",
    "wait",
];

/// A wrapper peeled off a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WrapperUse {
    /// The wrapper's name (`nice`, `env`, …).
    pub name: &'static str,
    /// The wrapper's own words: `argv[0]` as typed and its options.
    pub argv: Vec<String>,
    /// Whether the rebuilt plan keeps it; the `command` builtin is dropped because the plan
    /// runs absolute paths, which never hit functions or aliases anyway.
    pub in_plan: bool,
}

/// A segment's argv split into wrappers and the command they run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unwrapped {
    /// Wrappers from the outside in.
    pub wrappers: Vec<WrapperUse>,
    /// The command that finally runs, with its arguments.
    pub inner: Vec<String>,
}

/// Why a segment's wrappers cannot be peeled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum UnwrapError {
    /// A wrapper use the model does not cover.
    Miss(String),
    /// A privilege wrapper.
    Privileged(String),
}

const HELP: Opt = flag(None, Some("help"));
const VERSION: Opt = flag(None, Some("version"));

const NICE: OptionSpec = OptionSpec {
    opts: &[value(Some('n'), Some("adjustment")), HELP, VERSION],
    numeric: true,
    permute: false,
};

const NOHUP: OptionSpec = OptionSpec {
    opts: &[HELP, VERSION],
    numeric: false,
    permute: false,
};

const TIMEOUT: OptionSpec = OptionSpec {
    opts: &[
        flag(None, Some("foreground")),
        value(Some('k'), Some("kill-after")),
        flag(None, Some("preserve-status")),
        value(Some('s'), Some("signal")),
        flag(Some('v'), Some("verbose")),
        HELP,
        VERSION,
    ],
    numeric: false,
    permute: false,
};

const STDBUF: OptionSpec = OptionSpec {
    opts: &[
        value(Some('i'), Some("input")),
        value(Some('o'), Some("output")),
        value(Some('e'), Some("error")),
        HELP,
        VERSION,
    ],
    numeric: false,
    permute: false,
};

const TIME: OptionSpec = OptionSpec {
    opts: &[
        flag(Some('p'), Some("portability")),
        value(Some('f'), Some("format")),
        deny(Some('o'), Some("output"), Arg::Required),
        deny(Some('a'), Some("append"), Arg::None),
        flag(Some('v'), Some("verbose")),
        flag(Some('q'), Some("quiet")),
        HELP,
        VERSION,
    ],
    numeric: false,
    permute: false,
};

const SETARCH: OptionSpec = OptionSpec {
    opts: &[
        flag(Some('v'), Some("verbose")),
        flag(Some('3'), Some("3gb")),
        flag(None, Some("4gb")),
        flag(None, Some("uname-2.6")),
        flag(Some('B'), Some("32bit")),
        flag(Some('F'), Some("fdpic-funcptrs")),
        flag(Some('I'), Some("short-inode")),
        flag(Some('L'), Some("addr-compat-layout")),
        flag(Some('R'), Some("addr-no-randomize")),
        flag(Some('S'), Some("whole-seconds")),
        flag(Some('T'), Some("sticky-timeouts")),
        flag(Some('X'), Some("read-implies-exec")),
        flag(Some('Z'), Some("mmap-page-zero")),
        flag(None, Some("list")),
        HELP,
        VERSION,
    ],
    numeric: false,
    permute: false,
};

/// The names util-linux installs `setarch` under; each but `setarch` implies the architecture.
const SETARCH_NAMES: &[&str] = &["setarch", "linux32", "linux64", "i386", "x86_64", "uname26"];

const CHOOM: OptionSpec = OptionSpec {
    opts: &[
        value(Some('n'), Some("adjust")),
        // `-p PID` adjusts another process and runs nothing.
        value(Some('p'), Some("pid")),
        HELP,
        VERSION,
    ],
    numeric: false,
    permute: false,
};

const TASKSET: OptionSpec = OptionSpec {
    opts: &[
        flag(Some('a'), Some("all-tasks")),
        flag(Some('c'), Some("cpu-list")),
        flag(Some('p'), Some("pid")),
        HELP,
        VERSION,
    ],
    numeric: false,
    permute: false,
};

const CHRT: OptionSpec = OptionSpec {
    opts: &[
        flag(Some('a'), Some("all-tasks")),
        flag(Some('b'), Some("batch")),
        flag(Some('d'), Some("deadline")),
        flag(Some('f'), Some("fifo")),
        flag(Some('i'), Some("idle")),
        flag(Some('o'), Some("other")),
        flag(Some('r'), Some("rr")),
        flag(Some('R'), Some("reset-on-fork")),
        flag(Some('m'), Some("max")),
        flag(Some('p'), Some("pid")),
        value(Some('T'), Some("sched-runtime")),
        value(Some('P'), Some("sched-period")),
        value(Some('D'), Some("sched-deadline")),
        flag(Some('v'), Some("verbose")),
        HELP,
        VERSION,
    ],
    numeric: false,
    permute: false,
};

const IONICE: OptionSpec = OptionSpec {
    opts: &[
        value(Some('c'), Some("class")),
        value(Some('n'), Some("classdata")),
        flag(Some('p'), Some("pid")),
        flag(Some('P'), Some("pgid")),
        flag(Some('t'), Some("ignore")),
        flag(Some('u'), Some("uid")),
        HELP,
        VERSION,
    ],
    numeric: false,
    permute: false,
};

const FLOCK: OptionSpec = OptionSpec {
    opts: &[
        flag(Some('s'), Some("shared")),
        flag(Some('x'), Some("exclusive")),
        flag(Some('e'), None),
        flag(Some('u'), Some("unlock")),
        flag(Some('n'), Some("nonblock")),
        flag(None, Some("nb")),
        value(Some('w'), Some("timeout")),
        value(Some('E'), Some("conflict-exit-code")),
        flag(Some('o'), Some("close")),
        // `-c CMD` hands CMD to a shell: code the argv does not pin down.
        deny(Some('c'), Some("command"), Arg::Required),
        flag(Some('F'), Some("no-fork")),
        flag(None, Some("verbose")),
        HELP,
        VERSION,
    ],
    numeric: false,
    permute: false,
};

/// Peels transparent wrappers off `argv`.
pub(crate) fn unwrap(argv: &[String]) -> Result<Unwrapped, UnwrapError> {
    let mut wrappers = Vec::new();
    let mut current: &[String] = argv;
    loop {
        let Some(first) = current.first() else {
            return Err(UnwrapError::Miss("wrapper without a command".to_owned()));
        };
        let name = basename(first);
        if let Some(privileged) = PRIVILEGE_WRAPPERS.iter().find(|p| **p == name) {
            return Err(UnwrapError::Privileged((*privileged).to_owned()));
        }
        let Some(step) = peel(current)? else {
            return Ok(Unwrapped {
                wrappers,
                inner: current.to_vec(),
            });
        };
        if wrappers.len() == MAX_WRAPPERS {
            return Err(UnwrapError::Miss(format!(
                "more than {MAX_WRAPPERS} nested wrappers"
            )));
        }
        let (wrapper, inner_at) = step;
        wrappers.push(WrapperUse {
            name: wrapper,
            argv: current[..inner_at].to_vec(),
            in_plan: wrapper != "command",
        });
        current = &current[inner_at..];
    }
}

/// One wrapper step: the wrapper's name and where its command starts, or `None` if `argv`
/// does not start with a wrapper use (including a wrapper given no command, which then runs as
/// an ordinary program).
fn peel(argv: &[String]) -> Result<Option<(&'static str, usize)>, UnwrapError> {
    let name = basename(&argv[0]);
    let args = &argv[1..];
    let miss = |reason: String| UnwrapError::Miss(reason);
    let (wrapper, inner_at) = match name {
        "env" => {
            let Some(first) = args.first() else {
                return Ok(None);
            };
            // `--` only ends env's options: `env -- ls` runs `ls` with nothing changed.
            if first == "--" {
                let Some(next) = args.get(1) else {
                    return Ok(None);
                };
                // Assignments may still follow `--`.
                if next.contains('=') {
                    return Err(miss(format!("env with assignments ({next})")));
                }
                ("env", Some(1))
            } else if first.starts_with('-') || first.contains('=') {
                return Err(miss(format!("env with options or assignments ({first})")));
            } else {
                ("env", Some(0))
            }
        }
        "command" => {
            let Some(first) = args.first() else {
                return Ok(None);
            };
            if first.starts_with('-') {
                return Err(miss(format!("command with option {first}")));
            }
            ("command", Some(0))
        }
        "nice" => ("nice", scan_wrapper("nice", &NICE, args)?),
        "nohup" => ("nohup", scan_wrapper("nohup", &NOHUP, args)?),
        "stdbuf" => ("stdbuf", scan_wrapper("stdbuf", &STDBUF, args)?),
        "time" => ("time", scan_wrapper("time", &TIME, args)?),
        name if SETARCH_NAMES.contains(&name) => ("setarch", setarch_inner(name, args)?),
        "choom" => ("choom", choom_inner(args)?),
        "taskset" => (
            "taskset",
            positional_then_command("taskset", &TASKSET, args, is_cpu_mask)?,
        ),
        "chrt" => (
            "chrt",
            positional_then_command("chrt", &CHRT, args, is_priority)?,
        ),
        "ionice" => {
            let scanned = scan(&IONICE, args)
                .map_err(|reason| UnwrapError::Miss(format!("ionice: {reason}")))?;
            // With -p, -P or -u the operands are ids, and nothing runs.
            if ["--pid", "--pgid", "--uid"]
                .iter()
                .any(|o| scanned.seen.iter().any(|s| s == o))
            {
                return Ok(None);
            }
            ("ionice", scanned.rest_at.filter(|at| *at < args.len()))
        }
        "flock" => ("flock", flock_inner(args)?),
        "timeout" => {
            let Some(at) = scan_wrapper("timeout", &TIMEOUT, args)? else {
                return Ok(None);
            };
            let duration = &args[at];
            if !is_duration(duration) {
                return Err(miss(format!("timeout with unusual duration {duration:?}")));
            }
            ("timeout", Some(at + 1))
        }
        _ => return Ok(None),
    };
    // `inner_at` counts from `args`; without a command the wrapper runs as a plain program.
    match inner_at {
        Some(at) if at < args.len() => Ok(Some((wrapper, at + 1))),
        Some(_) | None => Ok(None),
    }
}

/// Scans a wrapper's options; returns the index in `args` of its first operand, if any.
fn scan_wrapper(
    name: &str,
    spec: &OptionSpec,
    args: &[String],
) -> Result<Option<usize>, UnwrapError> {
    let scanned =
        scan(spec, args).map_err(|reason| UnwrapError::Miss(format!("{name}: {reason}")))?;
    Ok(scanned.rest_at.filter(|at| *at < args.len()))
}

/// `setarch ARCH [options] [command]`, or `linux32 [options] [command]`: without a command it
/// starts a shell, which is a miss.
fn setarch_inner(name: &str, args: &[String]) -> Result<Option<usize>, UnwrapError> {
    let miss = |reason: String| UnwrapError::Miss(reason);
    let skip = usize::from(name == "setarch");
    if skip == 1 {
        match args.first() {
            None => return Ok(None),
            Some(first) if first.starts_with('-') => {
                // `setarch --list`, `--help`, `--version`: information, nothing runs.
                return match first.as_str() {
                    "--list" | "--help" | "--version" | "-h" | "-V" if args.len() == 1 => Ok(None),
                    _ => Err(miss(format!(
                        "setarch with option {first} before an architecture"
                    ))),
                };
            }
            Some(_) => {}
        }
    }
    let rest = &args[skip..];
    let scanned = scan(&SETARCH, rest).map_err(|reason| miss(format!("{name}: {reason}")))?;
    match scanned.rest_at.filter(|at| *at < rest.len()) {
        Some(at) => Ok(Some(skip + at)),
        None => Err(miss(format!("{name} without a command starts a shell"))),
    }
}

/// `choom -n N -- command …`; `choom -p PID` runs nothing. choom's getopt permutes: without
/// `--` it takes the command's own options as its own (`choom -n 0 ls -p 1` adjusts pid 1), so
/// a command with an option-like word and no `--` before it is a miss.
fn choom_inner(args: &[String]) -> Result<Option<usize>, UnwrapError> {
    let scanned =
        scan(&CHOOM, args).map_err(|reason| UnwrapError::Miss(format!("choom: {reason}")))?;
    if scanned.seen.iter().any(|s| s == "--pid") {
        return Ok(None);
    }
    let Some(at) = scanned.rest_at.filter(|at| *at < args.len()) else {
        return Ok(None);
    };
    let dashed = at > 0 && args[at - 1] == "--";
    if !dashed && args[at..].iter().any(|a| a.starts_with('-')) {
        return Err(UnwrapError::Miss(
            "choom reads options after its command: put -- before the command".to_owned(),
        ));
    }
    Ok(Some(at))
}

/// `taskset [options] MASK command …` and `chrt [options] PRIORITY command …`: one operand
/// before the command. With `--pid` the operands are ids and nothing runs. The operand must
/// look like what the program takes there, so a word it would not take as one (and might run,
/// in a version where the operand is optional) is never skipped as one.
fn positional_then_command(
    name: &str,
    spec: &OptionSpec,
    args: &[String],
    operand_ok: fn(&str) -> bool,
) -> Result<Option<usize>, UnwrapError> {
    let miss = |reason: String| UnwrapError::Miss(reason);
    let scanned = scan(spec, args).map_err(|reason| miss(format!("{name}: {reason}")))?;
    if scanned.seen.iter().any(|s| s == "--pid") {
        return Ok(None);
    }
    let Some(at) = scanned.rest_at.filter(|at| *at < args.len()) else {
        return Ok(None);
    };
    let operand = &args[at];
    if !operand_ok(operand) {
        return Err(miss(format!("{name} with unusual operand {operand:?}")));
    }
    Ok(Some(at + 1).filter(|at| *at < args.len()))
}

/// A CPU mask (`3`, `0x3`) or list (`0-3,5`).
fn is_cpu_mask(word: &str) -> bool {
    !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_hexdigit() || ",-x".contains(c))
}

/// A scheduling priority: decimal digits.
fn is_priority(word: &str) -> bool {
    !word.is_empty() && word.chars().all(|c| c.is_ascii_digit())
}

/// `flock [options] FILE command …`; `flock FILE -c CMD` hands CMD to a shell (a miss), and
/// `flock FD` runs nothing.
fn flock_inner(args: &[String]) -> Result<Option<usize>, UnwrapError> {
    let miss = |reason: String| UnwrapError::Miss(reason);
    let scanned = scan(&FLOCK, args).map_err(|reason| miss(format!("flock: {reason}")))?;
    let Some(at) = scanned.rest_at.filter(|at| *at < args.len()) else {
        return Ok(None);
    };
    let Some(command) = args.get(at + 1) else {
        return Ok(None);
    };
    if command.starts_with('-') {
        return Err(miss(format!(
            "flock {command} hands a command to a shell or is an option after the lock file"
        )));
    }
    Ok(Some(at + 1))
}

/// Whether a timeout duration is a plain number with an optional unit.
fn is_duration(text: &str) -> bool {
    let number = text.strip_suffix(['s', 'm', 'h', 'd']).unwrap_or(text);
    let mut parts = number.splitn(2, '.');
    let whole = parts.next().unwrap_or("");
    let fraction = parts.next();
    !whole.is_empty()
        && whole.chars().all(|c| c.is_ascii_digit())
        && fraction.is_none_or(|f| !f.is_empty() && f.chars().all(|c| c.is_ascii_digit()))
}

/// Whether a bare command word names a shell builtin that runs code or changes shell state.
pub(crate) fn is_code_builtin(word: &str) -> bool {
    CODE_BUILTINS.contains(&word)
}

/// Why an inner command is a miss even when allowlisted: it runs programs its argv does not
/// pin down.
pub(crate) fn runs_other_programs(inner: &[String], resolved: &str) -> Option<String> {
    let names = [
        basename(resolved),
        inner.first().map_or("", |w| basename(w)),
    ];
    if let Some(dispatcher) = DISPATCHERS.iter().find(|d| names.contains(d)) {
        return Some(format!("{dispatcher} runs other programs"));
    }
    // Options that make a program run, load or write something else: one table for the
    // sandbox and the host (gadgets.rs).
    super::gadgets::miss(inner, resolved)
}

/// Best-effort argv layers for argv-pattern matching: the argv itself, then every command it
/// would run through wrappers, privilege wrappers, `xargs` or `find -exec`. Never fails.
pub fn pattern_layers(argv: &[String]) -> Vec<Vec<String>> {
    let mut layers = Vec::new();
    let mut current: Vec<String> = argv.to_vec();
    for _ in 0..=MAX_WRAPPERS * 2 {
        if current.is_empty() {
            break;
        }
        layers.push(current.clone());
        if basename(&current[0]) == "find" {
            layers.extend(find_exec_commands(&current));
            break;
        }
        match lenient_inner(&current) {
            Some(next) => current = next,
            None => break,
        }
    }
    layers
}

/// The commands `find -exec …;` would run.
fn find_exec_commands(argv: &[String]) -> Vec<Vec<String>> {
    let mut commands = Vec::new();
    let mut index = 1;
    while index < argv.len() {
        if matches!(
            argv[index].as_str(),
            "-exec" | "-execdir" | "-ok" | "-okdir"
        ) {
            let start = index + 1;
            let end = argv[start..]
                .iter()
                .position(|a| a == ";" || a == "+")
                .map_or(argv.len(), |p| start + p);
            if start < end {
                commands.push(argv[start..end].to_vec());
            }
            index = end;
        }
        index += 1;
    }
    commands
}

/// The command a wrapper-like program runs, found by skipping options loosely.
fn lenient_inner(argv: &[String]) -> Option<Vec<String>> {
    let name = basename(&argv[0]);
    // Options that take a separate value, per program; everything else starting with `-` is
    // skipped as a flag.
    let (valued, skip_assignments, skip_duration): (&[&str], bool, bool) = match name {
        "env" => (
            &["-u", "--unset", "-C", "--chdir", "-S", "--split-string"],
            true,
            false,
        ),
        "sudo" => (
            &[
                "-u",
                "-g",
                "-C",
                "-D",
                "-h",
                "-p",
                "-r",
                "-t",
                "-U",
                "-T",
                "-R",
                "--user",
                "--group",
                "--chdir",
                "--host",
                "--prompt",
                "--role",
                "--type",
                "--other-user",
                "--close-from",
                "--command-timeout",
                "--chroot",
            ],
            true,
            false,
        ),
        "doas" => (&["-u", "-C"], false, false),
        "su" | "runuser" => (
            &["-u", "-g", "-G", "-s", "--shell", "--group", "--user"],
            false,
            false,
        ),
        "pkexec" => (&["--user"], false, false),
        "setpriv" => (&[], false, false),
        "chroot" => (&["--userspec", "--groups"], false, false),
        "nice" => (&["-n", "--adjustment"], false, false),
        "nohup" | "command" | "builtin" | "exec" | "setsid" => (&["-a"], false, false),
        "strace" | "ltrace" => (&["-o", "-e", "-p", "-a", "-s", "-S", "-u"], false, false),
        "timeout" => (&["-k", "-s", "--kill-after", "--signal"], false, true),
        "stdbuf" => (&["-i", "-o", "-e"], false, false),
        "time" => (&["-f", "-o", "--format", "--output"], false, false),
        "xargs" => (
            &[
                "-a",
                "-d",
                "-E",
                "-e",
                "-I",
                "-i",
                "-L",
                "-l",
                "-n",
                "-P",
                "-s",
                "--arg-file",
                "--delimiter",
                "--max-args",
                "--max-procs",
                "--max-chars",
                "--replace",
            ],
            false,
            false,
        ),
        "ionice" => (&["-c", "-n", "-p", "-P", "-u"], false, false),
        "choom" => (&["-n", "-p", "--adjust", "--pid"], false, false),
        "prlimit" => (&["-p", "-o", "--pid", "--output"], false, false),
        "setarch" | "linux32" | "linux64" | "i386" | "x86_64" | "uname26" => (&[], false, false),
        "taskset" | "chrt" | "flock" | "watch" | "unshare" | "nsenter" | "systemd-run" => (
            &["-n", "-p", "-c", "-w", "-E", "-t", "-S", "-u"],
            false,
            false,
        ),
        _ => return None,
    };
    let mut index = 1;
    if name == "setarch" && argv.get(1).is_some_and(|a| !a.starts_with('-')) {
        // setarch ARCH …: the architecture comes before the options.
        index += 1;
    }
    if name == "chroot" {
        // The first operand of chroot is the new root, not the command.
        while index < argv.len() && argv[index].starts_with('-') {
            index += 1;
        }
        index += 1;
    }
    while index < argv.len() {
        let arg = &argv[index];
        if arg == "--" {
            index += 1;
            break;
        }
        if valued.contains(&arg.as_str()) {
            index += 2;
            continue;
        }
        if arg.starts_with('-') || (skip_assignments && arg.contains('=')) {
            index += 1;
            continue;
        }
        break;
    }
    if skip_duration && index < argv.len() {
        index += 1;
    }
    if matches!(name, "taskset" | "chrt" | "flock") && index < argv.len() {
        // taskset MASK COMMAND, chrt PRIORITY COMMAND, flock FILE COMMAND.
        index += 1;
    }
    let inner = argv.get(index..)?.to_vec();
    (!inner.is_empty()).then_some(inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        text.split(' ')
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn unwrap_peels_transparent_wrappers() {
        let rows: &[(&str, &[&str], &str)] = &[
            ("ls -la", &[], "ls -la"),
            ("env ls", &["env"], "ls"),
            ("env -- ls -l", &["env --"], "ls -l"),
            ("env -- env -- ls", &["env --", "env --"], "ls"),
            ("/usr/bin/env ls -l", &["/usr/bin/env"], "ls -l"),
            ("nice ls", &["nice"], "ls"),
            ("nice -n 5 ls", &["nice -n 5"], "ls"),
            ("nice -n5 ls", &["nice -n5"], "ls"),
            ("nice -5 ls", &["nice -5"], "ls"),
            ("nice --adjustment=5 ls", &["nice --adjustment=5"], "ls"),
            ("nice --adj 5 ls", &["nice --adj 5"], "ls"),
            ("nice -- ls", &["nice --"], "ls"),
            ("nohup make", &["nohup"], "make"),
            ("timeout 10 make test", &["timeout 10"], "make test"),
            ("timeout 1.5m make", &["timeout 1.5m"], "make"),
            ("timeout -s KILL 10 make", &["timeout -s KILL 10"], "make"),
            (
                "timeout -k 5 --preserve-status 10s make",
                &["timeout -k 5 --preserve-status 10s"],
                "make",
            ),
            (
                "timeout --foreground 3 ls",
                &["timeout --foreground 3"],
                "ls",
            ),
            ("stdbuf -oL grep x", &["stdbuf -oL"], "grep x"),
            ("stdbuf -o L -e 0 grep x", &["stdbuf -o L -e 0"], "grep x"),
            ("time ls", &["time"], "ls"),
            ("time -p ls", &["time -p"], "ls"),
            ("time -f %e ls", &["time -f %e"], "ls"),
            ("command ls", &["command"], "ls"),
            (
                "env nice -n 1 timeout 5 ls",
                &["env", "nice -n 1", "timeout 5"],
                "ls",
            ),
            ("nice", &[], "nice"),
            ("env", &[], "env"),
            ("env --", &[], "env --"),
            ("nohup --version", &[], "nohup --version"),
            ("timeout 5", &[], "timeout 5"),
            ("command", &[], "command"),
        ];
        for (argv, want_wrappers, want_inner) in rows {
            let got = unwrap(&words(argv)).unwrap_or_else(|e| panic!("{argv:?}: {e:?}"));
            let wrappers: Vec<String> = got.wrappers.iter().map(|w| w.argv.join(" ")).collect();
            assert_eq!(wrappers, *want_wrappers, "argv {argv:?}");
            assert_eq!(got.inner.join(" "), *want_inner, "argv {argv:?}");
        }
        let command = unwrap(&words("command ls")).unwrap();
        assert!(!command.wrappers[0].in_plan);
        let nice = unwrap(&words("nice ls")).unwrap();
        assert!(nice.wrappers[0].in_plan);
    }

    #[test]
    fn unwrap_refusals() {
        let rows: &[(&str, UnwrapError)] = &[
            ("sudo ls", UnwrapError::Privileged("sudo".into())),
            (
                "/usr/bin/sudo -u root ls",
                UnwrapError::Privileged("sudo".into()),
            ),
            ("doas ls", UnwrapError::Privileged("doas".into())),
            ("su -c ls", UnwrapError::Privileged("su".into())),
            ("pkexec ls", UnwrapError::Privileged("pkexec".into())),
            ("runuser -u x ls", UnwrapError::Privileged("runuser".into())),
            ("chroot / ls", UnwrapError::Privileged("chroot".into())),
            (
                "setpriv --reuid=0 ls",
                UnwrapError::Privileged("setpriv".into()),
            ),
            ("nice sudo ls", UnwrapError::Privileged("sudo".into())),
            (
                "env timeout 5 doas ls",
                UnwrapError::Privileged("doas".into()),
            ),
            (
                "env -S ls",
                UnwrapError::Miss("env with options or assignments (-S)".into()),
            ),
            (
                "env -Sls",
                UnwrapError::Miss("env with options or assignments (-Sls)".into()),
            ),
            (
                "env -u HOME ls",
                UnwrapError::Miss("env with options or assignments (-u)".into()),
            ),
            (
                "env -i ls",
                UnwrapError::Miss("env with options or assignments (-i)".into()),
            ),
            (
                "env FOO=1 ls",
                UnwrapError::Miss("env with options or assignments (FOO=1)".into()),
            ),
            (
                "env LD_PRELOAD=/tmp/x.so ls",
                UnwrapError::Miss("env with options or assignments (LD_PRELOAD=/tmp/x.so)".into()),
            ),
            (
                "env -- LD_PRELOAD=/tmp/x.so ls",
                UnwrapError::Miss("env with assignments (LD_PRELOAD=/tmp/x.so)".into()),
            ),
            (
                "command -v ls",
                UnwrapError::Miss("command with option -v".into()),
            ),
            (
                "command -p ls",
                UnwrapError::Miss("command with option -p".into()),
            ),
            (
                "command -V ls",
                UnwrapError::Miss("command with option -V".into()),
            ),
            (
                "nice -x ls",
                UnwrapError::Miss("nice: unknown option -x".into()),
            ),
            (
                "nohup -x ls",
                UnwrapError::Miss("nohup: unknown option -x".into()),
            ),
            (
                "timeout abc ls",
                UnwrapError::Miss("timeout with unusual duration \"abc\"".into()),
            ),
            (
                "timeout 5x ls",
                UnwrapError::Miss("timeout with unusual duration \"5x\"".into()),
            ),
            (
                "timeout -z 5 ls",
                UnwrapError::Miss("timeout: unknown option -z".into()),
            ),
            (
                "stdbuf -x ls",
                UnwrapError::Miss("stdbuf: unknown option -x".into()),
            ),
            (
                "time -o out ls",
                UnwrapError::Miss("time: denied option -o (--output)".into()),
            ),
            (
                "time --output=out ls",
                UnwrapError::Miss("time: denied option --output".into()),
            ),
            (
                "time -a -o out ls",
                UnwrapError::Miss("time: denied option -a (--append)".into()),
            ),
            (
                "env env env env env ls",
                UnwrapError::Miss("more than 4 nested wrappers".into()),
            ),
        ];
        for (argv, want) in rows {
            assert_eq!(
                unwrap(&words(argv)).as_ref().err(),
                Some(want),
                "argv {argv:?}"
            );
        }
    }

    #[test]
    fn durations() {
        for ok in ["5", "10s", "1.5m", "2h", "1d", "0", "0.25"] {
            assert!(is_duration(ok), "{ok}");
        }
        for bad in ["", "s", "1.", ".5", "5x", "-5", "1e3", "5ss"] {
            assert!(!is_duration(bad), "{bad}");
        }
    }

    #[test]
    fn other_programs() {
        let rows: &[(&str, Option<&str>)] = &[
            ("xargs rm", Some("xargs runs other programs")),
            ("xargs", Some("xargs runs other programs")),
            ("find . -name x", None),
            ("find . -exec rm {} ;", Some("find -exec runs a program")),
            ("find . -execdir sh ;", Some("find -execdir runs a program")),
            ("find . -ok rm ;", Some("find -ok runs a program")),
            ("find . -okdir rm ;", Some("find -okdir runs a program")),
            ("find . -delete", Some("find -delete writes a file")),
            ("find . -fprint out", Some("find -fprint writes a file")),
            ("setsid ls", Some("setsid runs other programs")),
            ("busybox sh", Some("busybox runs other programs")),
            ("ls -la", None),
        ];
        for (argv, want) in rows {
            let argv = words(argv);
            let resolved = format!("/usr/bin/{}", argv[0]);
            assert_eq!(
                runs_other_programs(&argv, &resolved).as_deref(),
                *want,
                "{argv:?}"
            );
        }
    }

    #[test]
    fn pattern_layers_reach_inner_commands() {
        let rows: &[(&str, &[&str])] = &[
            ("ls -la", &["ls -la"]),
            ("sudo rm -rf /", &["sudo rm -rf /", "rm -rf /"]),
            ("sudo -u root -E rm x", &["sudo -u root -E rm x", "rm x"]),
            (
                "env FOO=1 -u X sudo ls",
                &["env FOO=1 -u X sudo ls", "sudo ls", "ls"],
            ),
            ("nice -n 5 git push", &["nice -n 5 git push", "git push"]),
            ("timeout -s 9 5 rm x", &["timeout -s 9 5 rm x", "rm x"]),
            ("xargs -n 1 rm", &["xargs -n 1 rm", "rm"]),
            (
                "find . -exec rm -rf {} ;",
                &["find . -exec rm -rf {} ;", "rm -rf {}"],
            ),
            ("chroot / sh", &["chroot / sh", "sh"]),
            ("taskset 1 rm x", &["taskset 1 rm x", "rm x"]),
            ("doas", &["doas"]),
        ];
        for (argv, want) in rows {
            let got: Vec<String> = pattern_layers(&words(argv))
                .iter()
                .map(|l| l.join(" "))
                .collect();
            assert_eq!(got, *want, "argv {argv:?}");
        }
    }

    #[test]
    fn code_builtins() {
        for name in [
            "eval", "trap", "alias", "let", "source", ".", "exec", "hash", "builtin", "declare",
            "typeset", "unset", "set", "shopt", "enable", "fc", "coproc", "export", "cd",
        ] {
            assert!(is_code_builtin(name), "{name}");
        }
        for name in ["ls", "echo", "printf", "test", "true", "kill", "command"] {
            assert!(!is_code_builtin(name), "{name}");
        }
    }
}
