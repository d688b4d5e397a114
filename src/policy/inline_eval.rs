//! Inline-eval detection for `strict_inline_eval`, by what the interpreter will execute.
//!
//! An interpreter runs code the allowlist never saw when its program comes from an argument
//! (`python -c`, `sh -c`, `awk '…'`), from stdin (no script operand, `-`, `sh -s`), from a
//! device or descriptor (`/dev/stdin`, `/proc/self/fd/0`), from a REPL or debugger
//! (`python -i`, `python -m code`, `perl -d`, `node --inspect`), or through a code-loading option
//! (`perl -M…`, `ruby -r`, `node -r`, `php -d`). Rather than list those, each family lists the
//! invocations known to be safe: options that only tune the run, and a script operand that is a
//! plain file path. Anything else (an unknown option included) counts as inline eval. The
//! families are `interpreters.rs`, the table the binding of the files a plan runs reads too.
//! See docs/policy.md ("Inline eval").

use super::interpreters::{family_of, walk, Program, Walk};
#[cfg(test)]
use super::paths::basename;

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

/// A label such as `python3 -c` when the segment evaluates code no file vouches for, else
/// `None`. `names` are the names the command goes by (typed word first, then the resolved path
/// and its symlink target); `cwd` resolves relative program paths.
pub(crate) fn detect(
    argv: &[String],
    names: &[&str],
    cwd: &str,
    real: &dyn Fn(&str) -> Option<String>,
) -> Option<String> {
    let (family, shown) = family_of(names)?;
    let scan = walk(family, shown, argv);
    if let Some(label) = scan.flag {
        return Some(label);
    }
    // A module known to be safe (`python3 -m pytest`).
    if scan.module {
        return None;
    }
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
    if let Some(file) = scan.files.first() {
        return unreviewed(file.path)
            .map(|from| format!("{shown} reading its program from {from}"));
    }
    match family.program {
        Program::ScriptOrStdin => match scan.operands.first() {
            None if scan.info_only => None,
            None => Some(format!("{shown} reading its program from stdin")),
            Some(&first) => unreviewed(&argv[first])
                .map(|from| format!("{shown} reading its program from {from}")),
        },
        Program::InlineOperand if !scan.operands.is_empty() => {
            Some(format!("{shown} inline program"))
        }
        Program::InlineOperand => None,
        Program::Subcommand if family.names.contains(&"deno") => {
            deno(shown, &scan, argv).or_else(|| {
                let file = scan.script(family, argv)?;
                unreviewed(&argv[file])
                    .map(|from| format!("{shown} run reading its program from {from}"))
            })
        }
        Program::Subcommand => None,
    }
}

/// [`detect`] without resolving program paths: the label for `argv` known by `names`.
#[cfg(test)]
pub(crate) fn label(argv: &[String], names: &[&str], cwd: &str) -> Option<String> {
    detect(argv, names, cwd, &|_| None)
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
    let (family, shown) = family_of(&[typed.as_str()])?;
    let scan = walk(family, shown, argv);
    if scan.flag.is_some() || scan.module {
        return None;
    }
    let path = match scan.files.first() {
        Some(file) => file.path,
        None => &argv[scan.script(family, argv)?],
    };
    (path != "-").then(|| source_word(path))
}

/// `deno`: `eval`, `repl` and no subcommand evaluate text, as does `run` without a file;
/// `run FILE` is judged by its file, like a script operand.
fn deno(shown: &str, scan: &Walk<'_>, argv: &[String]) -> Option<String> {
    let operand = |n: usize| scan.operands.get(n).map(|&i| argv[i].as_str());
    match operand(0) {
        None if scan.info_only => None,
        None => Some(format!("{shown} repl")),
        Some(sub @ ("eval" | "repl")) => Some(format!("{shown} {sub}")),
        Some("run") if operand(1).is_none() => {
            Some(format!("{shown} run reading its program from stdin"))
        }
        Some(_) => None,
    }
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
            ("deno run -", "deno run reading its program from stdin"),
            (
                "deno run ./link.py",
                "deno run reading its program from ./link.py (a link to /dev/stdin)",
            ),
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
