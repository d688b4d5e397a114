//! Inline-eval detection for `strict_inline_eval`.
//!
//! An interpreter that gets its program from an argument (`python -c`, `sh -c`, `awk '…'`) or
//! from stdin runs code the allowlist never saw. In strict mode such a segment needs an operator
//! even when the interpreter itself is allowlisted.

use super::paths::basename;

/// Where an interpreter's program comes from when no option says otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Program {
    /// The first operand is a script file; with no operand the program is read from stdin.
    ScriptOrStdin,
    /// The first operand is the program text itself (awk, sed), unless a file option gave one.
    InlineOperand,
    /// The first operand is a subcommand; only options and listed subcommands matter.
    Subcommand,
}

/// How one family of interpreters takes inline code.
#[derive(Debug, Clone, Copy)]
struct Family {
    /// Base names after stripping a version suffix (`python3.11` → `python`).
    names: &'static [&'static str],
    /// Short option letters whose value is program text.
    eval_short: &'static str,
    /// Long options (without dashes) whose value is program text.
    eval_long: &'static [&'static str],
    /// Short option letters that take a value (so the value is not mistaken for an operand).
    value_short: &'static str,
    /// Long options that take a separate value.
    value_long: &'static [&'static str],
    /// Short option letters whose value is a program file.
    file_short: &'static str,
    /// Long options whose value is a program file.
    file_long: &'static [&'static str],
    /// Subcommands that evaluate text (`deno eval`).
    eval_subcommands: &'static [&'static str],
    /// Where the program comes from otherwise.
    program: Program,
    /// Whether options may follow operands (GNU permutation) and must all be scanned.
    permute: bool,
    /// Short options that only print a version or help, so nothing is read from stdin.
    info_short: &'static str,
}

const FAMILIES: &[Family] = &[
    Family {
        names: &["python", "pypy"],
        eval_short: "c",
        eval_long: &[],
        value_short: "WXm",
        value_long: &["check-hash-based-pycs"],
        file_short: "m",
        file_long: &[],
        eval_subcommands: &[],
        program: Program::ScriptOrStdin,
        permute: false,
        info_short: "Vh",
    },
    Family {
        names: &["node", "nodejs", "bun"],
        eval_short: "ep",
        eval_long: &["eval", "print"],
        value_short: "rC",
        value_long: &[
            "require",
            "import",
            "loader",
            "experimental-loader",
            "conditions",
            "input-type",
            "title",
            "env-file",
            "redirect-warnings",
        ],
        file_short: "",
        file_long: &[],
        eval_subcommands: &["eval"],
        program: Program::ScriptOrStdin,
        permute: false,
        info_short: "vh",
    },
    Family {
        names: &["deno"],
        eval_short: "",
        eval_long: &["eval"],
        value_short: "",
        value_long: &[],
        file_short: "",
        file_long: &[],
        eval_subcommands: &["eval", "repl"],
        program: Program::Subcommand,
        permute: false,
        info_short: "",
    },
    Family {
        names: &["ruby"],
        eval_short: "e",
        eval_long: &[],
        value_short: "IrCE",
        value_long: &[],
        file_short: "",
        file_long: &[],
        eval_subcommands: &[],
        program: Program::ScriptOrStdin,
        permute: false,
        info_short: "h",
    },
    Family {
        names: &["perl"],
        eval_short: "eE",
        eval_long: &[],
        value_short: "IMm",
        value_long: &[],
        file_short: "",
        file_long: &[],
        eval_subcommands: &[],
        program: Program::ScriptOrStdin,
        permute: false,
        info_short: "vh",
    },
    Family {
        names: &["php"],
        eval_short: "rRBE",
        eval_long: &["run", "process-code", "process-begin", "process-end"],
        value_short: "cdz",
        value_long: &[],
        file_short: "fF",
        file_long: &["file", "process-file"],
        eval_subcommands: &[],
        program: Program::ScriptOrStdin,
        permute: false,
        info_short: "vh",
    },
    Family {
        names: &["lua", "luajit"],
        eval_short: "e",
        eval_long: &[],
        value_short: "l",
        value_long: &[],
        file_short: "",
        file_long: &[],
        eval_subcommands: &[],
        program: Program::ScriptOrStdin,
        permute: false,
        info_short: "v",
    },
    Family {
        names: &["osascript"],
        eval_short: "e",
        eval_long: &[],
        value_short: "ls",
        value_long: &[],
        file_short: "",
        file_long: &[],
        eval_subcommands: &[],
        program: Program::ScriptOrStdin,
        permute: false,
        info_short: "",
    },
    Family {
        names: &["rscript"],
        eval_short: "e",
        eval_long: &[],
        value_short: "",
        value_long: &[],
        file_short: "",
        file_long: &[],
        eval_subcommands: &[],
        program: Program::ScriptOrStdin,
        permute: false,
        info_short: "",
    },
    Family {
        names: &["julia"],
        eval_short: "eE",
        eval_long: &["eval", "print"],
        value_short: "CJLtp",
        value_long: &["project", "sysimage", "load", "threads", "procs"],
        file_short: "",
        file_long: &[],
        eval_subcommands: &[],
        program: Program::ScriptOrStdin,
        permute: false,
        info_short: "vh",
    },
    Family {
        names: &[
            "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "rbash",
        ],
        eval_short: "csi",
        eval_long: &["command", "init-command"],
        value_short: "oO",
        value_long: &["rcfile", "init-file"],
        file_short: "",
        file_long: &[],
        eval_subcommands: &[],
        program: Program::ScriptOrStdin,
        permute: false,
        info_short: "",
    },
    Family {
        names: &["awk", "gawk", "mawk", "nawk"],
        eval_short: "e",
        eval_long: &["source"],
        value_short: "Fvil",
        value_long: &["field-separator", "assign", "include", "load"],
        file_short: "f",
        file_long: &["file"],
        eval_subcommands: &[],
        program: Program::InlineOperand,
        permute: true,
        info_short: "",
    },
    Family {
        names: &["sed", "gsed"],
        eval_short: "e",
        eval_long: &["expression"],
        value_short: "l",
        value_long: &["line-length"],
        file_short: "f",
        file_long: &["file"],
        eval_subcommands: &[],
        program: Program::InlineOperand,
        permute: true,
        info_short: "",
    },
    Family {
        names: &["git"],
        eval_short: "c",
        eval_long: &["config-env", "exec-path"],
        value_short: "C",
        value_long: &[
            "git-dir",
            "work-tree",
            "namespace",
            "super-prefix",
            "list-cmds",
        ],
        file_short: "",
        file_long: &[],
        eval_subcommands: &[],
        program: Program::Subcommand,
        permute: false,
        info_short: "",
    },
    Family {
        names: &["make", "gmake"],
        eval_short: "E",
        eval_long: &["eval"],
        value_short: "CfIjloW",
        value_long: &[
            "directory",
            "file",
            "makefile",
            "include-dir",
            "jobs",
            "load-average",
            "old-file",
            "assume-old",
            "what-if",
            "new-file",
            "assume-new",
        ],
        file_short: "",
        file_long: &[],
        eval_subcommands: &[],
        program: Program::Subcommand,
        permute: true,
        info_short: "",
    },
];

/// The interpreter base name: lowercased, version suffix removed (`python3.11` → `python`).
fn family_name(path_or_word: &str) -> String {
    let name = basename(path_or_word).to_ascii_lowercase();
    name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.' || c == '-')
        .to_owned()
}

/// Finds the family of a command by the typed word or the resolved path.
fn family(typed: &str, resolved: &str) -> Option<(&'static Family, String)> {
    [resolved, typed].iter().find_map(|candidate| {
        let name = family_name(candidate);
        FAMILIES
            .iter()
            .find(|f| f.names.contains(&name.as_str()))
            .map(|f| (f, basename(candidate).to_owned()))
    })
}

/// A label such as `python3 -c` when the segment evaluates inline code, else `None`.
pub(crate) fn detect(argv: &[String], resolved: &str) -> Option<String> {
    let typed = argv.first()?;
    let (family, shown) = family(typed, resolved)?;
    let args = &argv[1..];
    let mut program_file = false;
    let mut info_only = false;
    let mut operands: Vec<&str> = Vec::new();
    let mut index = 0;
    while index < args.len() {
        let arg = args[index].as_str();
        index += 1;
        if arg == "--" {
            operands.extend(args[index..].iter().map(String::as_str));
            break;
        }
        if let Some(body) = arg.strip_prefix("--") {
            let (name, attached) = match body.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (body, None),
            };
            if family.eval_long.contains(&name) {
                return Some(format!("{shown} --{name}"));
            }
            if name == "version" || name == "help" {
                info_only = true;
            }
            let takes_value = family.value_long.contains(&name) || family.file_long.contains(&name);
            if family.file_long.contains(&name) {
                program_file = true;
            }
            if takes_value && attached.is_none() {
                index += 1;
            }
            continue;
        }
        if arg.len() > 1 && arg.starts_with('-') {
            for (offset, c) in arg.char_indices().skip(1) {
                if family.eval_short.contains(c) {
                    return Some(format!("{shown} -{c}"));
                }
                if family.info_short.contains(c) {
                    info_only = true;
                }
                if family.file_short.contains(c) {
                    program_file = true;
                }
                if family.value_short.contains(c) || family.file_short.contains(c) {
                    if offset + c.len_utf8() == arg.len() {
                        index += 1;
                    }
                    break;
                }
            }
            // A program file (`python -m mod`, `php -f file`) ends the interpreter's own
            // options; what follows belongs to the program.
            if program_file && family.program == Program::ScriptOrStdin {
                break;
            }
            continue;
        }
        operands.push(arg);
        if !family.permute {
            break;
        }
    }
    if let Some(first) = operands.first() {
        if family.eval_subcommands.contains(first) {
            return Some(format!("{shown} {first}"));
        }
    }
    match family.program {
        Program::ScriptOrStdin
            if operands.first().is_none_or(|first| *first == "-")
                && !program_file
                && !info_only =>
        {
            Some(format!("{shown} reading its program from stdin"))
        }
        Program::InlineOperand if !program_file && !operands.is_empty() => {
            Some(format!("{shown} inline program"))
        }
        Program::ScriptOrStdin | Program::InlineOperand | Program::Subcommand => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(argv: &str) -> Option<String> {
        let words: Vec<String> = argv.split(' ').map(str::to_owned).collect();
        let resolved = format!("/usr/bin/{}", basename(&words[0]));
        detect(&words, &resolved)
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
            ("pypy3 -c x", "pypy3 -c"),
            ("node -e x", "node -e"),
            ("node --eval x", "node --eval"),
            ("node --eval=x", "node --eval"),
            ("node -p x", "node -p"),
            ("node --print x", "node --print"),
            ("node -pe x", "node -p"),
            ("node -r mod -e x", "node -e"),
            ("node", "node reading its program from stdin"),
            ("nodejs -e x", "nodejs -e"),
            ("bun -e x", "bun -e"),
            ("deno eval x", "deno eval"),
            ("deno repl", "deno repl"),
            ("ruby -e x", "ruby -e"),
            ("ruby -ne x", "ruby -e"),
            ("ruby", "ruby reading its program from stdin"),
            ("perl -e x", "perl -e"),
            ("perl -E x", "perl -E"),
            ("perl -lne x", "perl -e"),
            ("perl -pi -e x", "perl -e"),
            ("perl", "perl reading its program from stdin"),
            ("php -r x", "php -r"),
            ("php -R x", "php -R"),
            ("php -B x", "php -B"),
            ("php --run x", "php --run"),
            ("lua -e x", "lua -e"),
            ("lua5.4 -e x", "lua5.4 -e"),
            ("luajit -e x", "luajit -e"),
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
            ("bash -i", "bash -i"),
            ("sh", "sh reading its program from stdin"),
            ("bash -o pipefail", "bash reading its program from stdin"),
            ("awk {print}", "awk inline program"),
            ("awk -F, {print}", "awk inline program"),
            ("gawk -e x", "gawk -e"),
            ("gawk --source=x", "gawk --source"),
            ("mawk x", "mawk inline program"),
            ("sed s/a/b/", "sed inline program"),
            ("sed -n p", "sed inline program"),
            ("sed -e s/a/b/", "sed -e"),
            ("sed --expression=x", "sed --expression"),
            ("sed -ne p", "sed -e"),
            ("git -c alias.x=!sh x", "git -c"),
            ("git -C dir -c core.pager=sh log", "git -c"),
            ("git --config-env=a=b status", "git --config-env"),
            ("git --exec-path=/tmp status", "git --exec-path"),
            ("make --eval=x", "make --eval"),
            ("make test --eval x", "make --eval"),
            ("make -E x", "make -E"),
        ];
        for (argv, want) in rows {
            assert_eq!(run(argv).as_deref(), Some(*want), "argv {argv:?}");
        }
    }

    #[test]
    fn inline_eval_misses() {
        let rows = [
            "python3 script.py",
            "python3 -u script.py",
            "python3 -m pytest",
            "python3 -m pytest -c conf",
            "python3 -W ignore script.py",
            "python3 --version",
            "python3 -V",
            "python3 script.py -c x",
            "node app.js",
            "node --version",
            "node -v",
            "node -r dotenv/config app.js",
            "deno run main.ts",
            "ruby script.rb",
            "perl script.pl",
            "perl -I lib script.pl",
            "php -f file.php",
            "php file.php",
            "lua script.lua",
            "sh script.sh",
            "bash script.sh -c",
            "bash --version",
            "awk -f prog.awk",
            "awk -f prog.awk data",
            "sed -f script.sed",
            "sed -f script.sed data",
            "git status",
            "git commit -c HEAD",
            "git -C repo status",
            "git log --oneline",
            "make",
            "make test",
            "make -j4 test",
            "make -C dir test",
            "ls -c",
            "grep -e foo",
            "cat",
        ];
        for argv in rows {
            assert_eq!(run(argv), None, "argv {argv:?}");
        }
    }
}
