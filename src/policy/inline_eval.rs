//! Inline-eval detection for `strict_inline_eval`, by what the interpreter will execute.
//!
//! An interpreter runs code the allowlist never saw when its program comes from an argument
//! (`python -c`, `sh -c`, `awk '…'`), from stdin (no script operand, `-`, `sh -s`), from a
//! device or descriptor (`/dev/stdin`, `/proc/self/fd/0`), from a REPL or debugger
//! (`python -i`, `python -m code`, `perl -d`, `node --inspect`), or through a code-loading option
//! (`perl -M…`, `ruby -r`, `node -r`, `php -d`). Rather than list those, each family lists the
//! invocations known to be safe: options that only tune the run, and a script operand that is a
//! plain file path. Anything else (an unknown option included) counts as inline eval. See
//! docs/policy.md ("Inline eval").

use super::paths::basename;

/// Where an interpreter's program comes from when no option says otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Program {
    /// The first operand is a script file; with no operand the program is read from stdin.
    ScriptOrStdin,
    /// The first operand is the program text itself (awk, sed), unless a file option gave one.
    InlineOperand,
    /// The first operand is a subcommand (`deno run`); no subcommand starts a REPL.
    Subcommand,
}

/// How one family of interpreters is invoked safely.
#[derive(Debug, Clone, Copy)]
struct Family {
    /// Base names after stripping a version suffix (`python3.11` → `python`).
    names: &'static [&'static str],
    /// Short options whose value is program text.
    eval_short: &'static str,
    /// Long options (without dashes) whose value is program text.
    eval_long: &'static [&'static str],
    /// Short options that load code, start a REPL or a debugger.
    load_short: &'static str,
    /// Long options (or prefixes ending in `*`) that load code, start a REPL or a debugger.
    load_long: &'static [&'static str],
    /// Short options without a value that only tune the run.
    safe_short: &'static str,
    /// Short options with a separate or attached value that only tune the run.
    value_short: &'static str,
    /// Short options whose value may only be attached (`perl -l0`, `-i.bak`): the rest of the
    /// word is theirs.
    attached_short: &'static str,
    /// Short options followed by an optional attached number (`perl -l`, `-0777`); bundled
    /// options may follow the number.
    digits_short: &'static str,
    /// Long options that only tune the run; a value may be attached with `=`.
    safe_long: &'static [&'static str],
    /// Long options that take a separate value and only tune the run.
    value_long: &'static [&'static str],
    /// Short options whose value is a program file.
    file_short: &'static str,
    /// Long options whose value is a program file.
    file_long: &'static [&'static str],
    /// Short options that print something and exit without running a program.
    info_short: &'static str,
    /// Where the program comes from otherwise.
    program: Program,
    /// Whether options may follow operands (GNU permutation) and must all be scanned.
    permute: bool,
}

/// The defaults every family spells out the differences from.
const NONE: Family = Family {
    names: &[],
    eval_short: "",
    eval_long: &[],
    load_short: "",
    load_long: &[],
    safe_short: "",
    value_short: "",
    attached_short: "",
    digits_short: "",
    safe_long: &[],
    value_long: &[],
    file_short: "",
    file_long: &[],
    info_short: "",
    program: Program::ScriptOrStdin,
    permute: false,
};

/// Python modules run with `-m` that are tools over files, not prompts or evaluators.
const SAFE_PYTHON_MODULES: &[&str] = &[
    "pytest",
    "unittest",
    "venv",
    "pip",
    "ensurepip",
    "json.tool",
    "http.server",
    "py_compile",
    "compileall",
    "mypy",
    "black",
    "ruff",
    "isort",
    "flake8",
    "pylint",
    "pyflakes",
    "build",
    "twine",
    "tox",
    "coverage",
];

const FAMILIES: &[Family] = &[
    Family {
        names: &["python", "pypy"],
        eval_short: "c",
        load_short: "i",
        safe_short: "bBdEIOPqsSuvx",
        value_short: "WX",
        safe_long: &["check-hash-based-pycs", "version", "help"],
        value_long: &["check-hash-based-pycs"],
        file_short: "m",
        info_short: "Vh",
        ..NONE
    },
    Family {
        names: &["node", "nodejs", "bun"],
        eval_short: "ep",
        eval_long: &["eval", "print"],
        load_short: "ri",
        load_long: &[
            "require",
            "import",
            "loader",
            "experimental-loader",
            "interactive",
            "inspect*",
            "env-file*",
            "experimental-policy",
            "experimental-default-config-file",
            "snapshot-blob",
            "build-snapshot",
        ],
        safe_long: &[
            "no-warnings",
            "enable-source-maps",
            "trace-warnings",
            "trace-deprecation",
            "throw-deprecation",
            "pending-deprecation",
            "no-deprecation",
            "trace-uncaught",
            "max-old-space-size",
            "stack-size",
            "test",
            "experimental-vm-modules",
            "input-type",
            "unhandled-rejections",
            "version",
            "help",
        ],
        info_short: "vh",
        ..NONE
    },
    Family {
        names: &["deno"],
        safe_long: &[
            "allow-*",
            "deny-*",
            "no-prompt",
            "quiet",
            "unstable*",
            "watch",
            "check",
            "no-check",
            "reload",
            "cached-only",
            "no-remote",
            "version",
            "help",
        ],
        info_short: "Vh",
        program: Program::Subcommand,
        ..NONE
    },
    Family {
        names: &["ruby"],
        eval_short: "e",
        load_short: "rC",
        safe_short: "acdlnpswy",
        value_short: "IE",
        attached_short: "FK",
        digits_short: "0TW",
        safe_long: &[
            "enable", "disable", "jit", "yjit", "verbose", "version", "help",
        ],
        info_short: "h",
        ..NONE
    },
    Family {
        names: &["perl"],
        eval_short: "eE",
        load_short: "Mmdx",
        safe_short: "acnpsStTuUwWX",
        value_short: "I",
        attached_short: "FiCD",
        digits_short: "0l",
        info_short: "vVh",
        ..NONE
    },
    Family {
        names: &["php"],
        eval_short: "rRBE",
        eval_long: &["run", "process-code", "process-begin", "process-end"],
        load_short: "adcz",
        load_long: &["interactive", "define", "php-ini", "zend-extension"],
        safe_short: "nqHCls",
        file_short: "fF",
        file_long: &["file", "process-file"],
        info_short: "vhim",
        ..NONE
    },
    Family {
        names: &["lua", "luajit"],
        eval_short: "e",
        load_short: "li",
        safe_short: "EW",
        info_short: "v",
        ..NONE
    },
    Family {
        names: &["osascript"],
        eval_short: "e",
        load_short: "i",
        value_short: "ls",
        ..NONE
    },
    Family {
        names: &["rscript"],
        eval_short: "e",
        safe_long: &[
            "vanilla",
            "verbose",
            "no-environ",
            "no-site-file",
            "no-init-file",
            "no-restore",
            "no-save",
            "version",
            "help",
        ],
        ..NONE
    },
    Family {
        names: &["julia"],
        eval_short: "eE",
        eval_long: &["eval", "print"],
        load_short: "iLJ",
        load_long: &["load", "sysimage"],
        safe_short: "q",
        value_short: "Ctp",
        safe_long: &[
            "project",
            "threads",
            "procs",
            "quiet",
            "startup-file",
            "version",
            "help",
        ],
        info_short: "vh",
        ..NONE
    },
    Family {
        names: &[
            "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "rbash",
        ],
        eval_short: "cs",
        eval_long: &["command", "init-command"],
        load_short: "i",
        load_long: &["rcfile", "init-file", "debugger", "interactive"],
        safe_short: "abefhklmnprtuvxBCEHPT",
        value_short: "oO",
        safe_long: &[
            "norc",
            "noprofile",
            "posix",
            "login",
            "restricted",
            "verbose",
            "noediting",
            "version",
            "help",
        ],
        ..NONE
    },
    Family {
        names: &["awk", "gawk", "mawk", "nawk"],
        eval_short: "e",
        eval_long: &["source"],
        load_short: "lW",
        load_long: &["load"],
        safe_short: "bcCgMNOPrsStV",
        value_short: "Fv",
        safe_long: &[
            "posix",
            "traditional",
            "sandbox",
            "characters-as-bytes",
            "bignum",
            "use-lc-numeric",
            "re-interval",
            "non-decimal-data",
            "optimize",
            "version",
            "help",
        ],
        value_long: &["field-separator", "assign"],
        file_short: "fEi",
        file_long: &["file", "exec", "include"],
        program: Program::InlineOperand,
        permute: true,
        ..NONE
    },
    Family {
        names: &["sed", "gsed"],
        eval_short: "e",
        eval_long: &["expression"],
        safe_short: "nErsuzb",
        value_short: "l",
        attached_short: "i",
        safe_long: &[
            "quiet",
            "silent",
            "regexp-extended",
            "separate",
            "unbuffered",
            "null-data",
            "posix",
            "debug",
            "sandbox",
            "binary",
            "follow-symlinks",
            "in-place",
            "line-length",
            "version",
            "help",
        ],
        value_long: &["line-length"],
        file_short: "f",
        file_long: &["file"],
        program: Program::InlineOperand,
        permute: true,
        ..NONE
    },
    Family {
        names: &["make", "gmake"],
        eval_short: "E",
        eval_long: &["eval"],
        safe_short: "bBdeiknpqrRsStvw",
        value_short: "CIjloW",
        // A makefile is make's program: its recipes run. Judged like a script operand.
        file_short: "f",
        file_long: &["file", "makefile"],
        safe_long: &[
            "always-make",
            "environment-overrides",
            "ignore-errors",
            "keep-going",
            "dry-run",
            "just-print",
            "recon",
            "print-data-base",
            "question",
            "no-builtin-rules",
            "no-builtin-variables",
            "silent",
            "quiet",
            "no-silent",
            "stop",
            "touch",
            "trace",
            "version",
            "print-directory",
            "no-print-directory",
            "warn-undefined-variables",
            "check-symlink-times",
            "debug",
            "output-sync",
            "jobs",
            "load-average",
            "directory",
            "include-dir",
            "old-file",
            "assume-old",
            "what-if",
            "new-file",
            "assume-new",
            "help",
        ],
        value_long: &[
            "directory",
            "include-dir",
            "jobs",
            "load-average",
            "old-file",
            "assume-old",
            "what-if",
            "new-file",
            "assume-new",
        ],
        program: Program::Subcommand,
        permute: true,
        ..NONE
    },
];

/// The interpreter base name: lowercased, version suffix removed (`python3.11` → `python`).
fn family_name(path_or_word: &str) -> String {
    let name = basename(path_or_word).to_ascii_lowercase();
    name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.' || c == '-')
        .to_owned()
}

/// Finds the family of a command by any of the names it goes by (typed word, resolved path,
/// symlink target).
fn family<'n>(names: &[&'n str]) -> Option<(&'static Family, &'n str)> {
    names.iter().find_map(|candidate| {
        let name = family_name(candidate);
        FAMILIES
            .iter()
            .find(|f| f.names.contains(&name.as_str()))
            .map(|f| (f, basename(candidate)))
    })
}

/// Whether a program path names a source nobody reviewed: stdin (`-`), a device, a descriptor
/// or a kernel file (`/dev/*`, `/proc/*`, `/sys/*`), compared after resolving `.` and `..`
/// against the working directory.
pub(crate) fn unreviewed_source(path: &str, cwd: &str) -> bool {
    if path == "-" {
        return true;
    }
    let full = if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("{cwd}/{path}")
    };
    let mut parts: Vec<&str> = Vec::new();
    for component in full.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    matches!(parts.first(), Some(&("dev" | "proc" | "sys")))
}

/// What the option scan found.
#[derive(Debug, Default)]
struct Scan<'a> {
    /// A program file given by an option (`-f FILE`, `-m MODULE`).
    program_file: Option<&'a str>,
    /// Whether an option only prints something and exits.
    info_only: bool,
    /// The operands, in order.
    operands: Vec<&'a str>,
}

/// Two program files (`make -f a.mk -f b.mk`): both run, but only one would be judged and
/// bound, so such a call counts as inline eval.
fn more_than_one(shown: &str) -> String {
    format!("{shown} with more than one program file")
}

/// Whether a long option name is listed, with `*` entries matching as prefixes.
fn long_listed(list: &[&str], name: &str) -> bool {
    list.iter().any(|entry| match entry.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => *entry == name,
    })
}

/// A label such as `python3 -c` when the segment evaluates code no file vouches for, else
/// `None`. `names` are the names the command goes by (typed word first, then the resolved path
/// and its symlink target); `cwd` resolves relative program paths.
pub(crate) fn detect(
    argv: &[String],
    names: &[&str],
    cwd: &str,
    real: &dyn Fn(&str) -> Option<String>,
) -> Option<String> {
    let (family, shown) = family(names)?;
    let scan = scan(family, shown, &argv[1..])?;
    let scan = match scan {
        Ok(scan) => scan,
        Err(label) => return Some(label),
    };
    // A program path is judged as written and, when the caller resolved it, by what it links
    // to: `x.py → /dev/stdin` reads stdin all the same.
    let unreviewed = |path: &str| -> Option<String> {
        if unreviewed_source(path, cwd) {
            return Some(if path == "-" {
                "stdin".to_owned()
            } else {
                path.to_owned()
            });
        }
        let target = real(&source_word(path))?;
        unreviewed_source(&target, "/").then(|| format!("{path} (a link to {target})"))
    };
    if let Some(file) = scan.program_file {
        return unreviewed(file).map(|from| format!("{shown} reading its program from {from}"));
    }
    match family.program {
        Program::ScriptOrStdin => match scan.operands.first() {
            None if scan.info_only => None,
            None => Some(format!("{shown} reading its program from stdin")),
            Some(first) => {
                unreviewed(first).map(|from| format!("{shown} reading its program from {from}"))
            }
        },
        Program::InlineOperand if !scan.operands.is_empty() => {
            Some(format!("{shown} inline program"))
        }
        Program::InlineOperand => None,
        Program::Subcommand if family.names.contains(&"deno") => deno(shown, &scan, cwd),
        Program::Subcommand => None,
    }
}

/// How a program path is asked about when resolving: as a path, never as a PATH lookup.
pub(crate) fn source_word(path: &str) -> String {
    if path.contains('/') {
        path.to_owned()
    } else {
        format!("./{path}")
    }
}

/// The program path an interpreter invocation would read, if it names one (a script operand
/// or a program-file option), as it should be resolved: see [`source_word`].
pub(crate) fn program_path(argv: &[String]) -> Option<String> {
    let typed = argv.first()?;
    let (family, shown) = family(&[typed.as_str()])?;
    let scan = scan(family, shown, &argv[1..])?.ok()?;
    let path = match (scan.program_file, family.program) {
        (Some(file), _) => file,
        (None, Program::ScriptOrStdin) => scan.operands.first()?,
        (None, _) => return None,
    };
    (path != "-").then(|| source_word(path))
}

/// `deno`: `eval`, `repl` and no subcommand evaluate text; `run` needs a reviewed file.
fn deno(shown: &str, scan: &Scan<'_>, cwd: &str) -> Option<String> {
    match scan.operands.first() {
        None if scan.info_only => None,
        None => Some(format!("{shown} repl")),
        Some(&sub @ ("eval" | "repl")) => Some(format!("{shown} {sub}")),
        Some(&"run") => match scan.operands.get(1) {
            Some(file) if !unreviewed_source(file, cwd) => None,
            Some(file) => Some(format!("{shown} run reading its program from {file}")),
            None => Some(format!("{shown} run reading its program from stdin")),
        },
        Some(_) => None,
    }
}

/// Scans the options. `Err(label)` when an option evaluates text, loads code, or is unknown;
/// `None` when the program is a module known to be safe.
fn scan<'a>(family: &Family, shown: &str, args: &'a [String]) -> Option<Result<Scan<'a>, String>> {
    let mut out = Scan::default();
    let mut index = 0;
    // Shells take `+o`, `+x` and the like as well; they only turn settings off.
    let plus_options = family.names.contains(&"sh");
    while index < args.len() {
        let arg = args[index].as_str();
        index += 1;
        if arg == "--" {
            out.operands
                .extend(args[index..].iter().map(String::as_str));
            break;
        }
        if let Some(body) = arg.strip_prefix("--").filter(|b| !b.is_empty()) {
            let (name, attached) = match body.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (body, None),
            };
            if long_listed(family.eval_long, name) {
                return Some(Err(format!("{shown} --{name}")));
            }
            if long_listed(family.load_long, name) {
                return Some(Err(format!(
                    "{shown} --{name} (loads code or starts a prompt)"
                )));
            }
            if name == "version" || name == "help" {
                out.info_only = true;
            }
            if long_listed(family.file_long, name) {
                let value = match attached {
                    Some(v) => Some(v),
                    None => {
                        index += 1;
                        args.get(index - 1).map(String::as_str)
                    }
                };
                if out.program_file.replace(value.unwrap_or("-")).is_some() {
                    return Some(Err(more_than_one(shown)));
                }
                if family.program == Program::ScriptOrStdin {
                    break;
                }
                continue;
            }
            if long_listed(family.value_long, name) {
                if attached.is_none() {
                    index += 1;
                }
                continue;
            }
            if long_listed(family.safe_long, name) {
                continue;
            }
            return Some(Err(format!("{shown} option --{name} not known to be safe")));
        }
        let is_option =
            arg.len() > 1 && (arg.starts_with('-') || (plus_options && arg.starts_with('+')));
        if !is_option {
            out.operands.push(arg);
            // A subcommand family (`deno run FILE`) is judged on its subcommand and the operand
            // after it; later words belong to the program.
            let wanted = if family.program == Program::Subcommand {
                2
            } else {
                1
            };
            if !family.permute && out.operands.len() >= wanted {
                break;
            }
            continue;
        }
        let letters = &arg[1..];
        let mut skip_to = 0;
        for (offset, c) in letters.char_indices() {
            if offset < skip_to {
                continue;
            }
            let rest = &letters[offset + c.len_utf8()..];
            if family.digits_short.contains(c) {
                // `perl -l0`, `-0777`, `-0x1ff`: a number, then more bundled options.
                let hex = c == '0' && rest.starts_with('x');
                let digits = rest
                    .char_indices()
                    .skip(usize::from(hex))
                    .find(|(_, d)| {
                        !(if hex {
                            d.is_ascii_hexdigit()
                        } else {
                            ('0'..='7').contains(d)
                        })
                    })
                    .map_or(rest.len(), |(at, _)| at);
                skip_to = offset + c.len_utf8() + digits;
                continue;
            }
            if family.eval_short.contains(c) {
                return Some(Err(format!("{shown} -{c}")));
            }
            if family.load_short.contains(c) {
                return Some(Err(format!("{shown} -{c} (loads code or starts a prompt)")));
            }
            if family.info_short.contains(c) {
                out.info_only = true;
                continue;
            }
            if family.attached_short.contains(c) {
                break;
            }
            if family.file_short.contains(c) {
                let value = if rest.is_empty() {
                    index += 1;
                    args.get(index - 1).map(String::as_str)
                } else {
                    Some(rest)
                };
                let value = value.unwrap_or("-");
                if c == 'm' && family.names.contains(&"python") {
                    if !SAFE_PYTHON_MODULES.contains(&value) {
                        return Some(Err(format!(
                            "{shown} -m {value} (a module not known to be safe)"
                        )));
                    }
                    out.program_file = Some("module");
                } else if out.program_file.replace(value).is_some() {
                    return Some(Err(more_than_one(shown)));
                }
                break;
            }
            if family.value_short.contains(c) {
                let value = if rest.is_empty() {
                    index += 1;
                    args.get(index - 1).map(String::as_str).unwrap_or("")
                } else {
                    rest
                };
                // `-W error::pkg.Category` imports `pkg` to find the category.
                if c == 'W' && family.names.contains(&"python") && value.contains('.') {
                    return Some(Err(format!(
                        "{shown} -W with a module-qualified category (imports a module)"
                    )));
                }
                break;
            }
            if family.safe_short.contains(c) {
                continue;
            }
            return Some(Err(format!("{shown} option -{c} not known to be safe")));
        }
        // A program file (`python -m mod`, `php -f file`) ends the interpreter's own options;
        // what follows belongs to the program.
        if out.program_file.is_some() && family.program == Program::ScriptOrStdin {
            break;
        }
    }
    // Python's `-m` names a module, not a path.
    if out.program_file == Some("module") {
        return None;
    }
    Some(Ok(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(argv: &str) -> Option<String> {
        let words: Vec<String> = argv.split(' ').map(str::to_owned).collect();
        let resolved = format!("/usr/bin/{}", basename(&words[0]));
        detect(
            &words,
            &[words[0].as_str(), &resolved],
            "/workspace",
            &|word| (word == "./link.py").then(|| "/dev/stdin".to_owned()),
        )
    }

    #[test]
    fn inline_eval_hits() {
        let rows: &[(&str, &str)] = &[
            ("python -c x", "python -c"),
            ("python3 -c x", "python3 -c"),
            ("python3.11 -c x", "python3.11 -c"),
            ("/usr/bin/python3 -c x", "python3 -c"),
            ("python3 -Bc x", "python3 -c"),
            ("python3 -W ignore -c x", "python3 -c"),
            ("python3", "python3 reading its program from stdin"),
            ("python3 -", "python3 reading its program from stdin"),
            ("python3 -u", "python3 reading its program from stdin"),
            (
                "python3 -W ignore",
                "python3 reading its program from stdin",
            ),
            // The issue's examples: stdin, descriptors and REPL modules.
            (
                "python3 /dev/stdin",
                "python3 reading its program from /dev/stdin",
            ),
            (
                "python3 /proc/self/fd/0",
                "python3 reading its program from /proc/self/fd/0",
            ),
            (
                "python3 /dev/fd/0",
                "python3 reading its program from /dev/fd/0",
            ),
            (
                "python3 ../../dev/stdin",
                "python3 reading its program from ../../dev/stdin",
            ),
            (
                "python3 /workspace/../proc/1/fd/0",
                "python3 reading its program from /workspace/../proc/1/fd/0",
            ),
            (
                "python3 -m code",
                "python3 -m code (a module not known to be safe)",
            ),
            (
                "python3 -m pdb x.py",
                "python3 -m pdb (a module not known to be safe)",
            ),
            (
                "python3 -mtimeit x",
                "python3 -m timeit (a module not known to be safe)",
            ),
            (
                "python3 -i /dev/null",
                "python3 -i (loads code or starts a prompt)",
            ),
            (
                "python3 -W error::antigravity.X x.py",
                "python3 -W with a module-qualified category (imports a module)",
            ),
            ("python3 -Z x.py", "python3 option -Z not known to be safe"),
            (
                "python3 --frobnicate x.py",
                "python3 option --frobnicate not known to be safe",
            ),
            ("pypy3 -c x", "pypy3 -c"),
            ("node -e x", "node -e"),
            ("node --eval x", "node --eval"),
            ("node --eval=x", "node --eval"),
            ("node -p x", "node -p"),
            ("node --print x", "node --print"),
            ("node -pe x", "node -p"),
            (
                "node -r mod app.js",
                "node -r (loads code or starts a prompt)",
            ),
            ("node -i", "node -i (loads code or starts a prompt)"),
            (
                "node --inspect app.js",
                "node --inspect (loads code or starts a prompt)",
            ),
            (
                "node --inspect-brk=0 app.js",
                "node --inspect-brk (loads code or starts a prompt)",
            ),
            ("node", "node reading its program from stdin"),
            (
                "node /dev/stdin",
                "node reading its program from /dev/stdin",
            ),
            ("nodejs -e x", "nodejs -e"),
            ("bun -e x", "bun -e"),
            ("deno eval x", "deno eval"),
            ("deno repl", "deno repl"),
            ("deno", "deno repl"),
            ("deno run -", "deno run reading its program from -"),
            ("ruby -e x", "ruby -e"),
            ("ruby -ne x", "ruby -e"),
            (
                "ruby -r socket x.rb",
                "ruby -r (loads code or starts a prompt)",
            ),
            (
                "ruby -rsocket x.rb",
                "ruby -r (loads code or starts a prompt)",
            ),
            (
                "ruby -C /dev stdin",
                "ruby -C (loads code or starts a prompt)",
            ),
            ("ruby", "ruby reading its program from stdin"),
            ("perl -e x", "perl -e"),
            ("perl -E x", "perl -E"),
            ("perl -lne x", "perl -e"),
            ("perl -l0ne x", "perl -e"),
            ("perl -0777ne x", "perl -e"),
            ("perl -pi -e x", "perl -e"),
            (
                "perl -MPOSIX;system(q(id)) /dev/null",
                "perl -M (loads code or starts a prompt)",
            ),
            ("perl -d x.pl", "perl -d (loads code or starts a prompt)"),
            (
                "perl -d:Trace x.pl",
                "perl -d (loads code or starts a prompt)",
            ),
            ("perl -x /dev x", "perl -x (loads code or starts a prompt)"),
            ("perl", "perl reading its program from stdin"),
            (
                "perl /dev/stdin",
                "perl reading its program from /dev/stdin",
            ),
            ("php -r x", "php -r"),
            ("php -R x", "php -R"),
            ("php -B x", "php -B"),
            ("php --run x", "php --run"),
            ("php -a", "php -a (loads code or starts a prompt)"),
            (
                "php -d auto_prepend_file=/tmp/x f.php",
                "php -d (loads code or starts a prompt)",
            ),
            (
                "php -f /dev/stdin",
                "php reading its program from /dev/stdin",
            ),
            ("lua -e x", "lua -e"),
            ("lua5.4 -e x", "lua5.4 -e"),
            ("luajit -e x", "luajit -e"),
            ("lua -l mod x.lua", "lua -l (loads code or starts a prompt)"),
            ("osascript -e x", "osascript -e"),
            ("Rscript -e x", "Rscript -e"),
            ("julia -e x", "julia -e"),
            ("sh -c x", "sh -c"),
            ("bash -c x", "bash -c"),
            ("bash -lc x", "bash -c"),
            ("bash -xec x", "bash -c"),
            ("dash -c x", "dash -c"),
            ("zsh -c x", "zsh -c"),
            ("ksh -c x", "ksh -c"),
            ("fish -c x", "fish -c"),
            ("fish --command x", "fish --command"),
            ("sh -s", "sh -s"),
            ("sh -s x", "sh -s"),
            ("bash -i", "bash -i (loads code or starts a prompt)"),
            (
                "bash --rcfile x",
                "bash --rcfile (loads code or starts a prompt)",
            ),
            ("sh", "sh reading its program from stdin"),
            ("sh /dev/stdin", "sh reading its program from /dev/stdin"),
            ("bash /dev/fd/3", "bash reading its program from /dev/fd/3"),
            (
                "dash -e /proc/self/fd/0",
                "dash reading its program from /proc/self/fd/0",
            ),
            ("sh -", "sh reading its program from stdin"),
            ("sh +x", "sh reading its program from stdin"),
            ("bash -o pipefail", "bash reading its program from stdin"),
            ("bash -D x.sh", "bash option -D not known to be safe"),
            ("awk {print}", "awk inline program"),
            ("awk -F, {print}", "awk inline program"),
            ("gawk -e x", "gawk -e"),
            ("gawk --source=x", "gawk --source"),
            ("mawk x", "mawk inline program"),
            (
                "awk -f /dev/stdin",
                "awk reading its program from /dev/stdin",
            ),
            ("awk -f - data", "awk reading its program from stdin"),
            (
                "gawk -l ext x.awk",
                "gawk -l (loads code or starts a prompt)",
            ),
            ("mawk -W exec x", "mawk -W (loads code or starts a prompt)"),
            ("sed s/a/b/", "sed inline program"),
            ("sed -n p", "sed inline program"),
            ("sed -e s/a/b/", "sed -e"),
            ("sed --expression=x", "sed --expression"),
            ("sed -ne p", "sed -e"),
            ("sed -i.bak s/a/b/ f", "sed inline program"),
            (
                "sed -f /dev/stdin",
                "sed reading its program from /dev/stdin",
            ),
            (
                "sed -f /proc/self/fd/0 x",
                "sed reading its program from /proc/self/fd/0",
            ),
            (
                "python3 link.py",
                "python3 reading its program from link.py (a link to /dev/stdin)",
            ),
            (
                "sh -e ./link.py",
                "sh reading its program from ./link.py (a link to /dev/stdin)",
            ),
            ("make --eval=x", "make --eval"),
            ("make test --eval x", "make --eval"),
            ("make -E x", "make -E"),
            (
                "make -f /dev/stdin",
                "make reading its program from /dev/stdin",
            ),
            ("make -f - all", "make reading its program from stdin"),
            (
                "make --file=/proc/self/fd/0",
                "make reading its program from /proc/self/fd/0",
            ),
            (
                "make --makefile /dev/fd/0 test",
                "make reading its program from /dev/fd/0",
            ),
            (
                "make -f ci.mk -f /dev/stdin",
                "make with more than one program file",
            ),
            (
                "awk -f a.awk -f /dev/stdin x",
                "awk with more than one program file",
            ),
        ];
        for (argv, want) in rows {
            assert_eq!(run(argv).as_deref(), Some(*want), "argv {argv:?}");
        }
    }

    #[test]
    fn safe_invocations_pass() {
        let rows = [
            "python3 script.py",
            "python3 -u script.py",
            "python3 -m pytest",
            "python3 -m pytest -c conf",
            "python3 -m json.tool data.json",
            "python3 -W ignore script.py",
            "python3 -X importtime script.py",
            "python3 --version",
            "python3 -V",
            "python3 script.py -c x",
            "python3 ./dev/stdin",
            "python3 /workspace/devtools.py",
            "node app.js",
            "node --version",
            "node -v",
            "node --no-warnings app.js",
            "deno run main.ts",
            "deno fmt",
            "ruby script.rb",
            "ruby -w -I lib script.rb",
            "perl script.pl",
            "perl -I lib script.pl",
            "perl -w -T script.pl",
            "perl -l0 script.pl",
            "perl -v",
            "php -f file.php",
            "php file.php",
            "lua script.lua",
            "sh script.sh",
            "bash -e script.sh",
            "sh -x -e ./run.sh",
            "bash script.sh -c",
            "bash --version",
            "bash --norc script.sh",
            "awk -f prog.awk",
            "awk -f prog.awk data",
            "awk -v x=1 -f prog.awk data",
            "sed -f script.sed",
            "sed -f script.sed data",
            "sed -n -f script.sed data",
            "make",
            "make test",
            "make -j4 test",
            "make -C dir test",
            "make -f ci.mk test",
            "make --file=ci.mk",
            "make -j4 -fci.mk",
            "ls -c",
            "grep -e foo",
            "cat",
            "git -c core.pager=sh log",
        ];
        for argv in rows {
            assert_eq!(run(argv), None, "argv {argv:?}");
        }
    }

    #[test]
    fn sources_nobody_reviewed() {
        for (path, cwd, want) in [
            ("-", "/w", true),
            ("/dev/stdin", "/w", true),
            ("/proc/self/fd/0", "/w", true),
            ("/sys/x", "/w", true),
            ("fd/0", "/dev", true),
            ("../dev/stdin", "/", true),
            ("x.py", "/workspace", false),
            ("/workspace/dev/stdin", "/", false),
            ("/devices", "/", false),
        ] {
            assert_eq!(unreviewed_source(path, cwd), want, "{path} in {cwd}");
        }
    }
}
