//! One table of interpreters and how their argv names their program (docs/policy.md, "Inline
//! eval"; docs/approvals.md, "Files a plan runs").
//!
//! Two readers ask the same question of an argv — where does this interpreter's program come
//! from? The policy's inline-eval check (`inline_eval.rs`) asks every time unless it is a file
//! someone can review; the binding of the files a plan runs (`host::bound`, for host and
//! sandbox plans) hashes and copies that file. When each kept its own list they drifted: an
//! interpreter one knew and the other did not, an option one read as taking a value and the
//! other as a flag, so the file approved was not the file run. Both now walk an argv with
//! [`walk`] over [`FAMILIES`]; `host::bound`'s tests check, family by family, that they agree.
//!
//! Each family lists its options by what they do: take program text (eval), load code or
//! start a prompt (load), name the program file, or only tune the run. An option not listed is
//! inline eval to the policy, and to the binding an option that may take a value.

use super::paths::basename;

/// Where an interpreter's program comes from when no option says otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Program {
    /// The first operand is a script file; with no operand the program is read from stdin.
    ScriptOrStdin,
    /// The first operand is the program text itself (awk, sed), unless a file option gave one.
    InlineOperand,
    /// The first operand is a subcommand (`deno run`); no subcommand starts a REPL.
    Subcommand,
}

/// How one family of interpreters reads its options.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Family {
    /// Base names after stripping a version suffix (`python3.11` → `python`).
    pub names: &'static [&'static str],
    /// Short options whose value is program text.
    eval_short: &'static str,
    /// Long options (without dashes) whose value is program text.
    eval_long: &'static [&'static str],
    /// Short options without a value that load code, start a REPL or a debugger.
    load_short: &'static str,
    /// Short options that load code, with a value attached or nothing (`perl -MPOSIX`,
    /// `perl -d:Trace`): the rest of the word is theirs.
    load_attached_short: &'static str,
    /// Short options that load code named by a value, attached or the next word (`node -r`).
    load_value_short: &'static str,
    /// Long options (or prefixes ending in `*`) without a separate value that load code,
    /// start a REPL or a debugger.
    load_long: &'static [&'static str],
    /// Long options that load code named by a value (`--require mod`).
    load_value_long: &'static [&'static str],
    /// Long options whose value is a file run as code besides the program (`--rcfile`): the
    /// policy asks, and the binding binds the file as it binds a program file.
    load_file_long: &'static [&'static str],
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
    /// Short options whose value is a module run as the program (`python -m`).
    module_short: &'static str,
    /// Short options that print something and exit without running a program.
    info_short: &'static str,
    /// Where the program comes from otherwise.
    pub program: Program,
    /// Whether options may follow operands (GNU permutation) and must all be scanned.
    permute: bool,
    /// Subcommands whose next operand is the program file (`deno run FILE`).
    run_subcommands: &'static [&'static str],
    /// Whether long options take one dash (`pwsh -Command`, `tclsh -encoding`), compared
    /// case-insensitively.
    single_dash_long: bool,
}

/// The defaults every family spells out the differences from.
const NONE: Family = Family {
    names: &[],
    eval_short: "",
    eval_long: &[],
    load_short: "",
    load_attached_short: "",
    load_value_short: "",
    load_long: &[],
    load_value_long: &[],
    load_file_long: &[],
    safe_short: "",
    value_short: "",
    attached_short: "",
    digits_short: "",
    safe_long: &[],
    value_long: &[],
    file_short: "",
    file_long: &[],
    module_short: "",
    info_short: "",
    program: Program::ScriptOrStdin,
    permute: false,
    run_subcommands: &[],
    single_dash_long: false,
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

/// Every interpreter either reader knows: the union of what the policy's and the binding's
/// tables held before they shared this one.
pub(crate) const FAMILIES: &[Family] = &[
    Family {
        names: &["python", "pypy"],
        eval_short: "c",
        load_short: "i",
        safe_short: "bBdEIOPqsSuvx",
        value_short: "WX",
        safe_long: &["check-hash-based-pycs", "version", "help"],
        value_long: &["check-hash-based-pycs"],
        module_short: "m",
        info_short: "Vh",
        ..NONE
    },
    Family {
        names: &["node", "nodejs", "bun"],
        eval_short: "ep",
        eval_long: &["eval", "print"],
        load_short: "i",
        load_value_short: "r",
        load_long: &[
            "interactive",
            "inspect*",
            "experimental-default-config-file",
            "build-snapshot",
        ],
        load_value_long: &[
            "require",
            "import",
            "loader",
            "experimental-loader",
            "env-file*",
            "experimental-policy",
            "snapshot-blob",
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
        run_subcommands: &["run"],
        ..NONE
    },
    Family {
        names: &["ruby"],
        eval_short: "e",
        load_value_short: "rC",
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
        load_attached_short: "Mmdx",
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
        load_short: "a",
        load_value_short: "dcz",
        load_long: &["interactive"],
        load_value_long: &["define", "php-ini", "zend-extension"],
        safe_short: "nqHCls",
        file_short: "fF",
        file_long: &["file", "process-file"],
        info_short: "vhim",
        ..NONE
    },
    Family {
        names: &["lua", "luajit"],
        eval_short: "e",
        load_short: "i",
        load_value_short: "l",
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
        load_short: "i",
        load_value_short: "LJ",
        load_value_long: &["load", "sysimage"],
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
        names: &["tclsh", "wish"],
        value_long: &[
            "encoding", "display", "geometry", "name", "visual", "colormap", "use", "class",
        ],
        safe_long: &["sync"],
        single_dash_long: true,
        ..NONE
    },
    Family {
        names: &["expect"],
        eval_short: "c",
        load_short: "i",
        load_value_short: "D",
        safe_short: "dnN",
        file_short: "fb",
        info_short: "v",
        ..NONE
    },
    Family {
        names: &["pwsh", "powershell"],
        eval_long: &[
            "command",
            "c",
            "encodedcommand",
            "e",
            "ec",
            "commandwithargs",
            "cwa",
        ],
        load_long: &["noexit", "interactive"],
        file_long: &["file", "f"],
        safe_long: &[
            "noprofile",
            "nop",
            "noninteractive",
            "nologo",
            "version",
            "help",
        ],
        value_long: &["executionpolicy", "ep", "outputformat", "of", "inputformat"],
        single_dash_long: true,
        ..NONE
    },
    // fish reads `-C` as code to run first; the other shells read it as noclobber.
    Family {
        names: &["fish"],
        eval_short: "cC",
        eval_long: &["command", "init-command"],
        load_short: "i",
        safe_short: "lNnP",
        safe_long: &[
            "login",
            "no-config",
            "no-execute",
            "private",
            "version",
            "help",
        ],
        info_short: "vh",
        ..NONE
    },
    Family {
        names: &[
            "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "csh", "tcsh", "rbash",
        ],
        eval_short: "cs",
        eval_long: &["command"],
        load_short: "i",
        load_long: &["debugger", "interactive"],
        load_file_long: &["rcfile", "init-file"],
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
        load_value_short: "lW",
        load_value_long: &["load"],
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
        // A makefile is make's program: its recipes run. Judged like a script operand, and
        // bound like one.
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
pub(crate) fn family_name(path_or_word: &str) -> String {
    let name = basename(path_or_word).to_ascii_lowercase();
    name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.' || c == '-')
        .to_owned()
}

/// Finds the family of a command by any of the names it goes by (typed word, resolved path,
/// symlink target), with the name it is shown by.
pub(crate) fn family_of<'n>(names: &[&'n str]) -> Option<(&'static Family, &'n str)> {
    names.iter().find_map(|candidate| {
        let name = family_name(candidate);
        FAMILIES
            .iter()
            .find(|f| f.names.contains(&name.as_str()))
            .map(|f| (f, basename(candidate)))
    })
}

/// A program file an option names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProgramFile<'a> {
    /// The argv index of the word holding the path (the option's own word when attached).
    pub index: usize,
    /// The path as written.
    pub path: &'a str,
    /// Whether the path is attached to its option (`-fFILE`, `--file=FILE`).
    pub attached: bool,
    /// Whether it is code loaded besides the program (`--rcfile FILE`), not the program.
    pub loaded: bool,
}

/// What a walk over an interpreter's argv found.
#[derive(Debug, Default)]
pub(crate) struct Walk<'a> {
    /// The first reason the program is not just a file to review: the policy's inline-eval
    /// label (`python3 -c`, `node -r (loads code or starts a prompt)`, an unknown option).
    pub flag: Option<String>,
    /// Whether an option gave program text.
    pub evaluates: bool,
    /// Whether `-m` named a module as the program.
    pub module: bool,
    /// Whether an option only prints something and exits.
    pub info_only: bool,
    /// Program files named by options, in order.
    pub files: Vec<ProgramFile<'a>>,
    /// The argv indices of the operands, in order.
    pub operands: Vec<usize>,
    /// The argv index of the word after the first option the table does not know, when that
    /// option could take it as its value.
    pub unknown_may_take: Option<usize>,
}

impl Walk<'_> {
    fn flag(&mut self, label: String) {
        self.flag.get_or_insert(label);
    }

    fn has_program_file(&self) -> bool {
        self.files.iter().any(|f| !f.loaded)
    }

    /// The argv index of the operand that is the program file, if one is.
    pub fn script(&self, family: &Family, argv: &[String]) -> Option<usize> {
        if self.evaluates || self.module || self.has_program_file() {
            return None;
        }
        match family.program {
            Program::ScriptOrStdin => self.operands.first().copied(),
            Program::Subcommand => {
                let sub = argv.get(*self.operands.first()?)?;
                family
                    .run_subcommands
                    .contains(&sub.as_str())
                    .then(|| self.operands.get(1).copied())
                    .flatten()
            }
            Program::InlineOperand => None,
        }
    }
}

/// Whether a long option name is listed, with `*` entries matching as prefixes.
fn long_listed(list: &[&str], name: &str) -> bool {
    list.iter().any(|entry| match entry.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => *entry == name,
    })
}

/// Two program files (`make -f a.mk -f b.mk`): the policy judges them as inline eval, so one
/// is never vouched for by the other.
fn more_than_one(shown: &str) -> String {
    format!("{shown} with more than one program file")
}

/// An option's value: attached (`-fFILE`, `--file=FILE`), the next word, or missing.
enum Value<'a> {
    Attached(&'a str),
    Word(usize, &'a str),
    Missing,
}

impl<'a> Value<'a> {
    /// The program file this value names, for the option in word `at`; `None` when the
    /// option has no value (the program then comes from stdin).
    fn program_file(self, at: usize) -> Option<ProgramFile<'a>> {
        match self {
            Value::Attached(path) => Some(ProgramFile {
                index: at,
                path,
                attached: true,
                loaded: false,
            }),
            Value::Word(index, path) => Some(ProgramFile {
                index,
                path,
                attached: false,
                loaded: false,
            }),
            Value::Missing => None,
        }
    }
}

/// The value of an option whose attached part is `attached`, taking the next word (and moving
/// `index` past it) when nothing is attached.
fn value<'a>(attached: Option<&'a str>, argv: &'a [String], index: &mut usize) -> Value<'a> {
    match attached {
        Some(v) => Value::Attached(v),
        None if *index < argv.len() => {
            *index += 1;
            Value::Word(*index - 1, &argv[*index - 1])
        }
        None => Value::Missing,
    }
}

/// Walks the options and operands of `argv` (an interpreter of `family`, shown as `shown`).
/// It goes on past what the policy flags, where it can still tell the options' values apart,
/// so the binding learns which files run.
pub(crate) fn walk<'a>(family: &Family, shown: &str, argv: &'a [String]) -> Walk<'a> {
    let mut out = Walk::default();
    let mut index = 1;
    // Shells take `+o`, `+x` and the like as well; they only turn settings off.
    let plus_options = family.names.contains(&"sh");
    let loads = |option: &str| format!("{shown} {option} (loads code or starts a prompt)");
    'words: while index < argv.len() {
        let at = index;
        let arg = argv[at].as_str();
        index += 1;
        if arg == "--" {
            out.operands.extend(index..argv.len());
            break;
        }
        let long = if family.single_dash_long {
            arg.strip_prefix("--").or_else(|| arg.strip_prefix('-'))
        } else {
            arg.strip_prefix("--")
        };
        if let Some(body) = long.filter(|b| !b.is_empty()) {
            let dashes = &arg[..arg.len() - body.len()];
            let (written, attached) = match body.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (body, None),
            };
            let lower;
            let name = if family.single_dash_long {
                lower = written.to_ascii_lowercase();
                lower.as_str()
            } else {
                written
            };
            let option = format!("{dashes}{written}");
            if long_listed(family.eval_long, name) {
                out.flag(format!("{shown} {option}"));
                out.evaluates = true;
                if !family.permute {
                    break;
                }
                value(attached, argv, &mut index);
                continue;
            }
            if long_listed(family.load_long, name) {
                out.flag(loads(&option));
                continue;
            }
            if long_listed(family.load_value_long, name) {
                out.flag(loads(&option));
                value(attached, argv, &mut index);
                continue;
            }
            if long_listed(family.load_file_long, name) {
                out.flag(loads(&option));
                match value(attached, argv, &mut index) {
                    Value::Attached(path) => out.files.push(ProgramFile {
                        index: at,
                        path,
                        attached: true,
                        loaded: true,
                    }),
                    Value::Word(i, path) => out.files.push(ProgramFile {
                        index: i,
                        path,
                        attached: false,
                        loaded: true,
                    }),
                    Value::Missing => {}
                }
                continue;
            }
            if name == "version" || name == "help" {
                out.info_only = true;
            }
            if long_listed(family.file_long, name) {
                let file = match value(attached, argv, &mut index).program_file(at) {
                    Some(file) => file,
                    None => {
                        out.flag(format!("{shown} reading its program from stdin"));
                        break;
                    }
                };
                if out.has_program_file() {
                    out.flag(more_than_one(shown));
                }
                out.files.push(file);
                if family.program == Program::ScriptOrStdin {
                    break;
                }
                continue;
            }
            if long_listed(family.value_long, name) {
                value(attached, argv, &mut index);
                continue;
            }
            if long_listed(family.safe_long, name) {
                continue;
            }
            out.flag(format!("{shown} option {option} not known to be safe"));
            if attached.is_none() && out.unknown_may_take.is_none() {
                out.unknown_may_take = Some(index);
            }
            continue;
        }
        let is_option =
            arg.len() > 1 && (arg.starts_with('-') || (plus_options && arg.starts_with('+')));
        if !is_option {
            out.operands.push(at);
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
            let attached = (!rest.is_empty()).then_some(rest);
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
                out.flag(format!("{shown} -{c}"));
                out.evaluates = true;
                if !family.permute {
                    break 'words;
                }
                value(attached, argv, &mut index);
                break;
            }
            if family.load_short.contains(c) {
                out.flag(loads(&format!("-{c}")));
                continue;
            }
            if family.load_attached_short.contains(c) {
                out.flag(loads(&format!("-{c}")));
                break;
            }
            if family.load_value_short.contains(c) {
                out.flag(loads(&format!("-{c}")));
                value(attached, argv, &mut index);
                break;
            }
            if family.info_short.contains(c) {
                out.info_only = true;
                continue;
            }
            if family.attached_short.contains(c) {
                break;
            }
            if family.module_short.contains(c) {
                let module = match value(attached, argv, &mut index) {
                    Value::Attached(m) | Value::Word(_, m) => m,
                    Value::Missing => "-",
                };
                if !SAFE_PYTHON_MODULES.contains(&module) {
                    out.flag(format!(
                        "{shown} -{c} {module} (a module not known to be safe)"
                    ));
                }
                out.module = true;
                break 'words;
            }
            if family.file_short.contains(c) {
                let file = match value(attached, argv, &mut index).program_file(at) {
                    Some(file) => file,
                    None => {
                        out.flag(format!("{shown} reading its program from stdin"));
                        break 'words;
                    }
                };
                if out.has_program_file() {
                    out.flag(more_than_one(shown));
                }
                out.files.push(file);
                break;
            }
            if family.value_short.contains(c) {
                let given = match value(attached, argv, &mut index) {
                    Value::Attached(v) | Value::Word(_, v) => v,
                    Value::Missing => "",
                };
                // `-W error::pkg.Category` imports `pkg` to find the category.
                if c == 'W' && family.names.contains(&"python") && given.contains('.') {
                    out.flag(format!(
                        "{shown} -W with a module-qualified category (imports a module)"
                    ));
                }
                break;
            }
            if family.safe_short.contains(c) {
                continue;
            }
            out.flag(format!("{shown} option -{c} not known to be safe"));
            if rest.is_empty() && out.unknown_may_take.is_none() {
                out.unknown_may_take = Some(index);
            }
            break;
        }
        // A program file (`php -f file`) ends the interpreter's own options; what follows
        // belongs to the program.
        if out.has_program_file() && family.program == Program::ScriptOrStdin {
            break;
        }
    }
    out
}

/// The argv indices of the files `argv` runs as an interpreter (its program file, and files
/// it loads as code such as `--rcfile`), its family found by `names` ([`names_of`]: the
/// typed word first); empty for a command that is
/// no interpreter, or whose program is inline or a module. `Err` names the word and says why
/// the file that runs cannot be told: a path attached to its option (no word to swap for a
/// copy), or an unknown option that may take the word the walk took for the script.
pub(crate) fn program_files(
    argv: &[String],
    names: &[&str],
) -> Result<Vec<usize>, (usize, String)> {
    let Some((family, shown)) = family_of(names) else {
        return Ok(Vec::new());
    };
    let walk = walk(family, shown, argv);
    let mut out = Vec::new();
    for file in &walk.files {
        if file.attached {
            return Err((
                file.index,
                format!(
                    "{shown} names the file `{}` attached to its option; give the path as a word of its own",
                    file.path
                ),
            ));
        }
        out.push(file.index);
    }
    if let Some(script) = walk.script(family, argv) {
        // `node --flag a.js b.js`: if `--flag` takes a value, `b.js` runs, unbound.
        if walk.unknown_may_take == Some(script) && script + 1 < argv.len() {
            return Err((
                script,
                format!(
                    "an option of {shown} before it is not in moat's table, so moat cannot tell whether it or `{}` is the file that runs",
                    argv[script + 1]
                ),
            ));
        }
        out.push(script);
    }
    Ok(out)
}

/// The names a command word goes by, in the order an interpreter's family is looked up: the
/// word as typed, the PATH hit of a bare name, and the file it finally points to through
/// symlinks, as `resolver` found them where the command runs. The inline-eval check and the
/// binding both look a family up by these.
pub(crate) fn names_of(word: &str, resolver: &dyn super::Resolver) -> Vec<String> {
    let mut names = vec![word.to_owned()];
    if !word.contains('/') {
        names.extend(resolver.resolve(word));
    }
    names.extend(resolver.real(word));
    names
}

/// Whether `name` (a path or word) is an interpreter of [`FAMILIES`].
pub(crate) fn is_interpreter(name: &str) -> bool {
    family_of(&[name]).is_some()
}

/// One argv built from the table, and what must come of it.
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct Sample {
    /// The argv.
    pub argv: Vec<String>,
    /// The argv indices of the files it runs (`Err` when the binding must refuse).
    pub runs: Result<Vec<usize>, ()>,
    /// Whether the policy must ask (inline eval).
    pub asks: bool,
}

/// For every name of every family, and every option the table lists, an argv naming a program
/// file after the option, with the file that runs and whether the policy asks: what the
/// policy and the binding must both read off the table. Tests of the readers run these.
#[cfg(test)]
pub(crate) fn samples() -> Vec<Sample> {
    let mut out = Vec::new();
    for family in FAMILIES {
        for name in family.names {
            // The words that name the program after the options, and which of them it is.
            let (tail, program): (Vec<&str>, usize) = match family.program {
                Program::ScriptOrStdin => (vec!["prog.src"], 0),
                Program::Subcommand if !family.run_subcommands.is_empty() => {
                    (vec![family.run_subcommands[0], "prog.src"], 1)
                }
                _ => {
                    let f = family.file_short.chars().next().expect("a file option");
                    (vec![if f == 'f' { "-f" } else { "-E" }, "prog.src"], 1)
                }
            };
            let mut push = |options: &[String], runs: Result<Vec<usize>, ()>, asks: bool| {
                let mut argv = vec![(*name).to_owned()];
                argv.extend(options.iter().cloned());
                out.push(Sample { argv, runs, asks });
            };
            let with_tail = |options: &[&str]| -> Vec<String> {
                options
                    .iter()
                    .chain(&tail)
                    .map(|s| (*s).to_owned())
                    .collect()
            };
            // The program, after `n` words of options.
            let at = |n: usize| Ok(vec![1 + n + program]);
            let inline = family.program == Program::InlineOperand;
            match family.program {
                Program::ScriptOrStdin => push(&with_tail(&[]), at(0), false),
                Program::InlineOperand => push(&["prog".to_owned()], Ok(vec![]), true),
                Program::Subcommand => push(&with_tail(&[]), at(0), false),
            }
            let dash = if family.single_dash_long { "-" } else { "--" };
            let long = |entry: &str| format!("{dash}{}", entry.trim_end_matches('*'));
            for c in family.safe_short.chars().chain(family.info_short.chars()) {
                push(&with_tail(&[&format!("-{c}")]), at(1), false);
            }
            for c in family
                .attached_short
                .chars()
                .chain(family.digits_short.chars())
            {
                push(&with_tail(&[&format!("-{c}1")]), at(1), false);
            }
            for c in family.value_short.chars() {
                push(&with_tail(&[&format!("-{c}"), "v"]), at(2), false);
            }
            for c in family.eval_short.chars() {
                let runs = if family.permute { at(2) } else { Ok(vec![]) };
                push(&with_tail(&[&format!("-{c}"), "text"]), runs, true);
            }
            for c in family.load_short.chars() {
                push(&with_tail(&[&format!("-{c}")]), at(1), true);
            }
            for c in family.load_attached_short.chars() {
                push(&with_tail(&[&format!("-{c}x")]), at(1), true);
            }
            for c in family.load_value_short.chars() {
                push(&with_tail(&[&format!("-{c}"), "v"]), at(2), true);
            }
            for c in family.module_short.chars() {
                push(&[format!("-{c}"), "pytest".into()], Ok(vec![]), false);
                push(&[format!("-{c}"), "code".into()], Ok(vec![]), true);
            }
            for c in family.file_short.chars() {
                push(&[format!("-{c}"), "prog.src".into()], Ok(vec![2]), false);
                push(&[format!("-{c}prog.src")], Err(()), false);
            }
            for entry in family.safe_long {
                if !long_listed(family.value_long, entry.trim_end_matches('*')) {
                    push(&with_tail(&[&long(entry)]), at(1), false);
                }
            }
            for entry in family.value_long {
                push(&with_tail(&[&long(entry), "v"]), at(2), false);
            }
            for entry in family.eval_long {
                let runs = if family.permute { at(2) } else { Ok(vec![]) };
                push(&with_tail(&[&long(entry), "text"]), runs, true);
            }
            for entry in family.load_long {
                push(&with_tail(&[&long(entry)]), at(1), true);
            }
            for entry in family.load_value_long {
                push(&with_tail(&[&long(entry), "v"]), at(2), true);
            }
            for entry in family.load_file_long {
                let runs = at(2).map(|mut v| {
                    v.insert(0, 2);
                    v
                });
                push(&with_tail(&[&long(entry), "rc"]), runs, true);
            }
            for entry in family.file_long {
                push(&[long(entry), "prog.src".into()], Ok(vec![2]), false);
                push(&[format!("{}=prog.src", long(entry))], Err(()), false);
            }
            // An option the table does not know: asked; the binding refuses when the option
            // may have taken the word it would bind and another word follows.
            if !inline {
                push(&with_tail(&[&format!("{dash}zz-unknown")]), at(1), true);
            }
            if family.program == Program::ScriptOrStdin {
                let mut two = with_tail(&[&format!("{dash}zz-unknown")]);
                two.push("other.src".into());
                push(&two, Err(()), true);
            }
        }
    }
    out
}
