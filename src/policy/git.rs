//! `git` stays git: an allowlisted `git` must not become another program through
//! configuration.
//!
//! A subcommand that is not one of git's own is resolved from configuration (an alias, which
//! may start with `!` and run a shell command) or from a `git-*` program on PATH; either way it
//! is a different program than the one the operator allowed. Likewise `-c`, `--config-env` and
//! `git config` can name programs (`core.pager`, `core.sshCommand`, `core.fsmonitor`,
//! `credential.helper`, `diff.external`, `alias.*`, …), so only keys known to be inert pass.
//! See docs/policy.md ("Config-defined commands").

use super::paths::basename;

/// Git's own commands (builtins and the `git-*` programs of its exec path, git 2.47), minus
/// the ones whose job is to run other programs or serve the repository
/// (`difftool`, `mergetool`, `filter-branch`, `remote-ext`, `hook`, `web--browse`, …).
const SUBCOMMANDS: &[&str] = &[
    "add",
    "am",
    "annotate",
    "apply",
    "archive",
    "bisect",
    "blame",
    "branch",
    "bugreport",
    "bundle",
    "cat-file",
    "check-attr",
    "check-ignore",
    "check-mailmap",
    "check-ref-format",
    "checkout",
    "checkout-index",
    "cherry",
    "cherry-pick",
    "clean",
    "clone",
    "column",
    "commit",
    "commit-graph",
    "commit-tree",
    "config",
    "count-objects",
    "describe",
    "diagnose",
    "diff",
    "diff-files",
    "diff-index",
    "diff-tree",
    "fast-export",
    "fast-import",
    "fetch",
    "fetch-pack",
    "fmt-merge-msg",
    "for-each-ref",
    "format-patch",
    "fsck",
    "fsck-objects",
    "gc",
    "get-tar-commit-id",
    "grep",
    "hash-object",
    "help",
    "index-pack",
    "init",
    "init-db",
    "interpret-trailers",
    "log",
    "ls-files",
    "ls-remote",
    "ls-tree",
    "mailinfo",
    "mailsplit",
    "maintenance",
    "merge",
    "merge-base",
    "merge-file",
    "merge-tree",
    "mktag",
    "mktree",
    "multi-pack-index",
    "mv",
    "name-rev",
    "notes",
    "pack-objects",
    "pack-redundant",
    "pack-refs",
    "patch-id",
    "prune",
    "prune-packed",
    "pull",
    "push",
    "range-diff",
    "read-tree",
    "rebase",
    "reflog",
    "refs",
    "remote",
    "repack",
    "replace",
    "replay",
    "request-pull",
    "rerere",
    "reset",
    "restore",
    "rev-list",
    "rev-parse",
    "revert",
    "rm",
    "send-pack",
    "shortlog",
    "show",
    "show-branch",
    "show-index",
    "show-ref",
    "sparse-checkout",
    "stage",
    "stash",
    "status",
    "stripspace",
    "submodule",
    "switch",
    "symbolic-ref",
    "tag",
    "unpack-file",
    "unpack-objects",
    "update-index",
    "update-ref",
    "update-server-info",
    "var",
    "verify-commit",
    "verify-pack",
    "verify-tag",
    "version",
    "whatchanged",
    "worktree",
    "write-tree",
];

/// Configuration keys (lowercase) that never name a program or a file of code. Everything else
/// set through `-c`, `--config-env` or `git config` is a miss.
const INERT_KEYS: &[&str] = &[
    "user.name",
    "user.email",
    "author.name",
    "author.email",
    "committer.name",
    "committer.email",
    "color.ui",
    "core.quotepath",
    "core.autocrlf",
    "core.safecrlf",
    "core.abbrev",
    "core.filemode",
    "core.ignorecase",
    "init.defaultbranch",
    "commit.gpgsign",
    "tag.gpgsign",
    "log.showsignature",
    "pull.rebase",
    "pull.ff",
    "merge.ff",
    "push.default",
    "column.ui",
    "diff.renames",
    "diff.noprefix",
    "status.short",
    "advice.detachedhead",
];

/// Options before the subcommand that take a separate value.
const VALUE_OPTIONS: &[&str] = &["-C", "--git-dir", "--work-tree", "--namespace"];

/// Options before the subcommand that take no value and change nothing about what runs.
const FLAG_OPTIONS: &[&str] = &[
    "--no-pager",
    "-P",
    "--bare",
    "--no-replace-objects",
    "--literal-pathspecs",
    "--glob-pathspecs",
    "--noglob-pathspecs",
    "--icase-pathspecs",
    "--no-optional-locks",
    "--no-advice",
    "--version",
    "-v",
    "--help",
    "-h",
    "--html-path",
    "--man-path",
    "--info-path",
];

/// Whether a configuration key is known to be inert (`color.*` included).
fn inert_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    INERT_KEYS.contains(&key.as_str())
        || key
            .strip_prefix("color.")
            .is_some_and(|rest| !rest.is_empty())
}

/// Why `git` invoked with `argv` would run something other than git itself, if it would.
pub(crate) fn miss(argv: &[String], resolved: &str) -> Option<String> {
    if basename(resolved) != "git" && argv.first().is_none_or(|w| basename(w) != "git") {
        return None;
    }
    let args = &argv[1..];
    let mut index = 0;
    while index < args.len() {
        let arg = args[index].as_str();
        index += 1;
        if arg == "-c" || arg.starts_with("-c") && arg.len() > 2 {
            let setting = if arg == "-c" {
                index += 1;
                args.get(index - 1).map(String::as_str).unwrap_or("")
            } else {
                &arg[2..]
            };
            let key = setting.split_once('=').map_or(setting, |(k, _)| k);
            if !inert_key(key) {
                return Some(format!(
                    "git -c {key}: a configuration key that may name a program"
                ));
            }
            continue;
        }
        if arg == "--config-env" || arg.starts_with("--config-env=") {
            return Some("git --config-env: configuration from the environment".to_owned());
        }
        if arg == "--exec-path" || arg.starts_with("--exec-path=") {
            return Some("git --exec-path: git-* programs from another directory".to_owned());
        }
        if VALUE_OPTIONS.contains(&arg) {
            index += 1;
            continue;
        }
        if arg.starts_with("--")
            && VALUE_OPTIONS
                .iter()
                .any(|o| o.starts_with("--") && arg.starts_with(&format!("{o}=")))
        {
            continue;
        }
        if FLAG_OPTIONS.contains(&arg) {
            continue;
        }
        if arg.starts_with('-') {
            return Some(format!("git option {arg} the model does not know"));
        }
        if !SUBCOMMANDS.contains(&arg) {
            return Some(format!(
                "git {arg} is not one of git's own commands (an alias or a git-* program)"
            ));
        }
        return subcommand_miss(arg, &args[index..]);
    }
    None
}

use super::gadgets::{find as find_gadget, g, Gadget, Power, Style};

/// Options of git's own commands that run a program they name, write a file they name, or
/// start a program that takes keys (an editor, a browser, a pager). Git's option parser takes
/// unambiguous prefixes of long options, so these match every prefix (gadgets.rs).
const SUBCOMMAND_GADGETS: &[(&[&str], &[Gadget])] = &[
    (
        &["clone"],
        &[
            g("--upload-pack", Power::Runs),
            g("-u", Power::Runs),
            g("--template", Power::Runs),
            g("--config", Power::Runs),
            g("-c", Power::Runs),
            g("--separate-git-dir", Power::Writes),
        ],
    ),
    (
        &["init", "init-db"],
        &[
            g("--template", Power::Runs),
            g("--separate-git-dir", Power::Writes),
        ],
    ),
    (
        &["fetch", "pull", "ls-remote"],
        &[g("--upload-pack", Power::Runs), g("-u", Power::Runs)],
    ),
    (
        &["fetch-pack"],
        &[g("--upload-pack", Power::Runs), g("--exec", Power::Runs)],
    ),
    (
        &["push", "send-pack"],
        &[g("--receive-pack", Power::Runs), g("--exec", Power::Runs)],
    ),
    (
        &["archive"],
        &[
            g("--exec", Power::Runs),
            g("--remote", Power::Runs),
            g("--output", Power::Writes),
            g("-o", Power::Writes),
        ],
    ),
    (
        &[
            "diff",
            "diff-files",
            "diff-index",
            "diff-tree",
            "log",
            "show",
            "whatchanged",
            "range-diff",
            "format-patch",
            "stash",
        ],
        &[g("--output", Power::Writes), g("--ext-diff", Power::Runs)],
    ),
    (
        &["format-patch"],
        &[
            g("--output-directory", Power::Writes),
            g("-o", Power::Writes),
        ],
    ),
    (
        &["grep"],
        &[
            g("--open-files-in-pager", Power::Runs),
            g("-O", Power::Runs),
        ],
    ),
    (&["apply", "am"], &[g("--unsafe-paths", Power::Writes)]),
    (
        &["help"],
        &[
            g("--web", Power::Runs),
            g("-w", Power::Runs),
            g("--info", Power::Runs),
            g("-i", Power::Runs),
            g("--man", Power::Runs),
            g("-m", Power::Runs),
        ],
    ),
    (
        &["config"],
        &[g("--edit", Power::Runs), g("-e", Power::Runs)],
    ),
    (
        &["commit", "merge", "tag", "notes"],
        &[g("--edit", Power::Runs), g("-e", Power::Runs)],
    ),
    (
        &["bugreport", "diagnose"],
        &[
            g("--output-directory", Power::Writes),
            g("-o", Power::Writes),
        ],
    ),
    (
        &["fast-import"],
        &[
            g("--export-marks", Power::Writes),
            g("--export-pack-edges", Power::Writes),
        ],
    ),
];

/// Git's own commands that still run programs their argv names.
fn subcommand_miss(subcommand: &str, rest: &[String]) -> Option<String> {
    for (names, gadgets) in SUBCOMMAND_GADGETS {
        if !names.contains(&subcommand) {
            continue;
        }
        if let Some((gadget, typed)) = find_gadget(Style::Gnu, gadgets, &[], rest) {
            let program = format!("git {subcommand}");
            return Some(super::gadgets::describe(&program, gadget, &typed));
        }
    }
    if subcommand == "maintenance"
        && rest
            .first()
            .is_some_and(|a| matches!(a.as_str(), "start" | "stop" | "register" | "unregister"))
    {
        return Some(
            "git maintenance start/stop/register schedules programs (cron or systemd)".to_owned(),
        );
    }
    let has = |flags: &[&str]| {
        rest.iter().find(|a| {
            flags
                .iter()
                .any(|f| a.as_str() == *f || a.starts_with(&format!("{f}=")))
        })
    };
    match subcommand {
        "rebase" => has(&["-x", "--exec"]).map(|f| format!("git rebase {f} runs commands")),
        "bisect" if rest.first().is_some_and(|a| a == "run") => {
            Some("git bisect run runs commands".to_owned())
        }
        "submodule" if rest.iter().any(|a| a == "foreach") => {
            Some("git submodule foreach runs commands".to_owned())
        }
        "config" => config_miss(rest),
        _ => None,
    }
}

/// `git config` writing a key that may name a program.
fn config_miss(rest: &[String]) -> Option<String> {
    let operands: Vec<&str> = rest
        .iter()
        .map(String::as_str)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let reads_only = rest.iter().any(|a| {
        matches!(
            a.as_str(),
            "--get" | "--get-all" | "--get-regexp" | "-l" | "--list" | "get" | "list"
        )
    });
    if reads_only {
        return None;
    }
    // `git config KEY VALUE` and `git config set KEY VALUE` write; `git config KEY` reads.
    let operands: Vec<&str> = match operands.first() {
        Some(&"set") => operands[1..].to_vec(),
        _ => operands,
    };
    match operands.as_slice() {
        [_] | [] => None,
        [key, ..] if inert_key(key) => None,
        [key, ..] => Some(format!(
            "git config {key}: a configuration key that may name a program"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(line: &str) -> Option<String> {
        let argv: Vec<String> = line.split(' ').map(str::to_owned).collect();
        miss(&argv, "/usr/bin/git")
    }

    #[test]
    fn aliases_and_program_keys_are_misses() {
        let rows: &[(&str, &str)] = &[
            ("git x", "git x is not one of git's own commands"),
            ("git -C repo x", "git x is not one of git's own commands"),
            ("git -c alias.x=!id x", "git -c alias.x"),
            ("git -c core.pager=id log", "git -c core.pager"),
            ("git -c core.editor=id commit", "git -c core.editor"),
            ("git -c core.sshCommand=id fetch", "git -c core.sshCommand"),
            ("git -c core.fsmonitor=id status", "git -c core.fsmonitor"),
            (
                "git -c credential.helper=!id push",
                "git -c credential.helper",
            ),
            ("git -c diff.external=id diff", "git -c diff.external"),
            ("git -ccore.pager=id log", "git -c core.pager"),
            ("git --config-env=core.pager=X log", "git --config-env"),
            ("git --exec-path=/tmp status", "git --exec-path"),
            ("git -C repo config alias.x !id", "git config alias.x"),
            ("git config --global core.pager id", "git config core.pager"),
            (
                "git config set core.hooksPath /tmp",
                "git config core.hooksPath",
            ),
            ("git rebase -x id main", "git rebase -x runs commands"),
            ("git rebase --exec=id main", "git rebase --exec=id runs"),
            ("git bisect run id", "git bisect run runs commands"),
            ("git submodule foreach id", "git submodule foreach"),
            ("git difftool", "git difftool is not one of git's own"),
            ("git remote-ext x y", "git remote-ext is not one"),
            ("git --weird status", "git option --weird"),
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
    fn git_itself_passes() {
        for line in [
            "git status",
            "git",
            "git --version",
            "git -C repo log --oneline",
            "git --git-dir=x status",
            "git --no-pager diff",
            "git -c user.name=x commit -m y",
            "git -c color.ui=never log",
            "git config user.email a@b",
            "git config core.pager",
            "git config --get core.pager",
            "git config --list",
            "git rebase main",
            "git bisect start",
            "git submodule update",
            "git commit -c HEAD",
        ] {
            assert_eq!(run(line), None, "{line:?}");
        }
        assert_eq!(miss(&["ls".into(), "x".into()], "/usr/bin/ls"), None);
    }
}
