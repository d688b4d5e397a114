//! Property tests that span the parser, the plan and the evaluator.

use proptest::prelude::*;

use super::*;

/// Words that make up shell-looking noise.
const VOCABULARY: &[&str] = &[
    "ls",
    "rm",
    "-rf",
    "/",
    "git",
    "status",
    "grep",
    "wc",
    "-l",
    "sort",
    "--comp",
    "sudo",
    "sh",
    "-c",
    "python3",
    "env",
    "-S",
    "nice",
    "xargs",
    "find",
    "-exec",
    "eval",
    "'",
    "\"",
    "$(",
    ")",
    "(",
    "`",
    "|",
    "||",
    "&&",
    "&",
    ";",
    "\n",
    "\r",
    "\\",
    "\\\n",
    "<<EOF\n",
    "<<'EOF'\n",
    "EOF\n",
    "<(",
    ">(",
    "{",
    "}",
    "{a,b}",
    "*",
    "?",
    "[",
    "]",
    "~",
    "$HOME",
    "${x}",
    "$'",
    "$\"",
    "2>&1",
    ">/dev/null",
    ">",
    "<",
    "<<<",
    "#",
    "!",
    "=",
    "FOO=1",
    "\u{a0}",
    "\u{200b}",
    "\u{202e}",
    "\u{0455}",
    " ",
    "  ",
    "\t",
    "/approve",
    "time",
    "-p",
    "command",
    "-v",
    "if",
    "then",
    "fi",
    "do",
    "done",
    "case",
    "esac",
    "((",
    "))",
    "[[",
    "]]",
    "function",
    "coproc",
    "\0",
];

fn vocabulary_line() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(VOCABULARY), 0..24).prop_map(|words| {
        let mut line = String::new();
        for (i, word) in words.iter().enumerate() {
            if i > 0 && i % 3 == 0 {
                line.push(' ');
            }
            line.push_str(word);
        }
        line
    })
}

fn any_command() -> impl Strategy<Value = String> {
    prop_oneof![
        vocabulary_line(),
        "[a-z0-9 \\t\\n\\r'\"$`|&;<>(){}\\[\\]*?~!#=\\\\/.,:@%+-]{0,60}",
        any::<String>(),
        "\\PC{0,40}",
    ]
}

fn resolver() -> MapResolver {
    [
        "ls", "rm", "git", "grep", "wc", "sort", "sh", "python3", "env", "nice", "xargs", "find",
        "sudo", "time", "cat", "head", "tail", "uniq", "cut", "tr", "a", "b", "x",
    ]
    .iter()
    .map(|name| (name.to_string(), format!("/usr/bin/{name}")))
    .collect()
}

fn resolver_all() -> MapResolver {
    [
        "ls", "cat", "echo", "printf", "touch", "cp", "mkdir", "true", "stat", "date",
    ]
    .iter()
    .map(|name| (name.to_string(), format!("/usr/bin/{name}")))
    .collect()
}

fn policies() -> Vec<Policy> {
    let allowlist = Policy {
        security: Security::Allowlist,
        ask: Ask::OnMiss,
        allowlist: vec!["/usr/bin/ls".into(), "git".into(), "/usr/bin/*".into()],
        ..Policy::default()
    };
    let full = Policy {
        deny_patterns: vec!["sudo *".into()],
        ask_patterns: vec!["git push *".into()],
        allowed_workdirs: vec!["/workspace".into()],
        ..Policy::default()
    };
    vec![allowlist, full]
}

/// A plan word: anything a literal argument can hold (no NUL).
fn plan_word() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9_./=,:@%+-]{0,12}",
        "[ -~]{0,12}",
        "[ -~\\n\\r\\t]{0,12}",
        "\\PC{0,8}",
        any::<String>().prop_map(|s| s.replace('\0', "")),
    ]
}

fn heredoc_body() -> impl Strategy<Value = Option<String>> {
    prop::option::of(prop::collection::vec(
        prop_oneof![
            "[ -~\\t\\r]{0,20}",
            Just("MOATEOF".to_owned()),
            Just("MOATEOF1".to_owned()),
            Just("EOF".to_owned()),
            "\\PC{0,10}".prop_map(|s| s.replace('\n', "")),
        ],
        0..4,
    ))
    .prop_map(|lines| lines.map(|lines| lines.iter().map(|l| format!("{l}\n")).collect()))
}

fn planned_segment() -> impl Strategy<Value = PlannedSegment> {
    (
        "[a-z][a-z0-9_+.-]{0,8}",
        prop::collection::vec(plan_word(), 0..5),
        prop::collection::vec(
            prop::sample::select(&["2>&1", ">/dev/null", "2>/dev/null"][..]),
            0..3,
        ),
        heredoc_body(),
        prop::sample::select(&["|", "&&", "||", ";"][..]),
    )
        .prop_map(|(name, args, redirects, heredoc, joiner)| PlannedSegment {
            argv: std::iter::once(format!("/usr/bin/{name}"))
                .chain(args)
                .collect(),
            redirects: redirects.iter().map(|r| (*r).to_owned()).collect(),
            heredoc,
            joiner: Some(joiner.to_owned()),
        })
}

fn redirect_text(redirect: &Redirect) -> Option<String> {
    redirect.as_operator().map(str::to_owned)
}

/// How a generated word is written in the command line.
#[derive(Debug, Clone, Copy)]
enum Style {
    Single,
    Double,
    Backslash,
    Spliced,
}

/// Writes `word` in shell syntax so that the shell's word is exactly `word`.
fn encode(word: &str, style: Style) -> String {
    let single = |w: &str| format!("'{}'", w.replace('\'', "'\\''"));
    let double = |w: &str| {
        let mut out = String::from("\"");
        for c in w.chars() {
            if matches!(c, '\\' | '"' | '$' | '`') {
                out.push('\\');
            }
            out.push(c);
        }
        out.push('"');
        out
    };
    match style {
        Style::Single => single(word),
        Style::Double => double(word),
        Style::Backslash if !word.is_empty() && word.chars().all(|c| c.is_ascii_graphic()) => {
            word.chars().map(|c| format!("\\{c}")).collect()
        }
        Style::Backslash => single(word),
        Style::Spliced => {
            let cut = word
                .char_indices()
                .nth(word.chars().count() / 2)
                .map_or(word.len(), |(i, _)| i);
            format!("{}{}", single(&word[..cut]), double(&word[cut..]))
        }
    }
}

fn style() -> impl Strategy<Value = Style> {
    prop::sample::select(
        &[
            Style::Single,
            Style::Double,
            Style::Backslash,
            Style::Spliced,
        ][..],
    )
}

/// One generated segment: command name, intended words with their styles, redirects, stdin.
type GeneratedSegment = (
    &'static str,
    Vec<(String, Style)>,
    Vec<&'static str>,
    Option<String>,
);

fn generated_segment() -> impl Strategy<Value = GeneratedSegment> {
    (
        prop::sample::select(
            &[
                "ls", "cat", "echo", "printf", "touch", "cp", "mkdir", "true", "stat", "date",
            ][..],
        ),
        prop::collection::vec((plan_word(), style()), 0..5),
        prop::collection::vec(
            prop::sample::select(&["2>&1", ">/dev/null", "2>/dev/null"][..]),
            0..3,
        ),
        heredoc_body().prop_map(|body| body.map(|b| b.replace("END_OF_INPUT\n", "x\n"))),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// The rebuilt plan parses back to exactly the segments it was rendered from.
    #[test]
    fn plans_reparse_to_the_same_segments(mut segments in prop::collection::vec(planned_segment(), 1..5)) {
        if let Some(last) = segments.last_mut() {
            last.joiner = None;
        }
        let text = render(&segments);
        let script = parse_script(&text);
        prop_assert_eq!(script.first_miss(), None, "plan {:?}", text);
        prop_assert_eq!(script.segments.len(), segments.len(), "plan {:?}", text);
        for (parsed, planned) in script.segments.iter().zip(&segments) {
            prop_assert_eq!(&parsed.argv, &planned.argv, "plan {:?}", text);
            let redirects: Vec<String> = parsed.redirects.iter().filter_map(redirect_text).collect();
            prop_assert_eq!(&redirects, &planned.redirects, "plan {:?}", text);
            let heredoc = parsed.redirects.iter().find_map(|r| match r {
                Redirect::HereDoc { body } => Some(body.clone()),
                _ => None,
            });
            prop_assert_eq!(&heredoc, &planned.heredoc, "plan {:?}", text);
            prop_assert_eq!(parsed.joiner.map(|j| j.as_str().to_owned()), planned.joiner.clone());
        }
    }

    /// Evaluation never panics, and an allowed allowlist command runs exactly what was checked.
    #[test]
    fn evaluate_never_panics(command in any_command(), cwd in prop_oneof![Just("/workspace".to_owned()), any::<String>()]) {
        let names = command_names(&command);
        for name in &names {
            prop_assert!(!name.is_empty() && !name.contains('/'));
        }
        for policy in policies() {
            let eval = evaluate(&Request::new(&command, &cwd), &policy, &resolver());
            let _ = explain_text(&eval);
            let json = explain_json(&eval);
            prop_assert!(json["decision"].is_string());
            if eval.decision == Decision::Allow && policy.security == Security::Allowlist {
                let plan = eval.plan.clone().expect("an allow carries a plan");
                prop_assert!(plan.rebuilt);
                let script = parse_script(&plan.command);
                prop_assert_eq!(script.first_miss(), None);
                let argvs: Vec<Vec<String>> = script.segments.into_iter().map(|s| s.argv).collect();
                let planned: Vec<Vec<String>> = plan.segments.iter().map(|s| s.argv.clone()).collect();
                prop_assert_eq!(argvs, planned);
                for segment in &plan.segments {
                    prop_assert!(segment.argv[0].starts_with("/usr/bin/"));
                }
            }
            if matches!(eval.decision, Decision::Deny { .. }) {
                prop_assert!(eval.plan.is_none());
            }
        }
    }

    /// Whatever quoting spells a word, the plan runs exactly that word, once.
    #[test]
    fn quoted_words_reach_the_plan_unchanged(
        segments in prop::collection::vec(generated_segment(), 1..4),
        joiners in prop::collection::vec(prop::sample::select(&["|", "&&", "||", ";", "\n"][..]), 3),
    ) {
        let mut command = String::new();
        let mut bodies = String::new();
        for (position, (name, words, redirects, heredoc)) in segments.iter().enumerate() {
            command.push_str(name);
            for (word, style) in words {
                command.push(' ');
                command.push_str(&encode(word, *style));
            }
            for redirect in redirects {
                command.push(' ');
                command.push_str(redirect);
            }
            if let Some(body) = heredoc {
                command.push_str(" <<'END_OF_INPUT'");
                bodies.push_str(body);
                bodies.push_str("END_OF_INPUT\n");
            }
            if position + 1 < segments.len() {
                let joiner = joiners[position];
                if joiner == "\n" && !bodies.is_empty() {
                    command.push_str(" ;");
                } else {
                    command.push(' ');
                    command.push_str(joiner);
                    command.push(' ');
                }
            }
        }
        if !bodies.is_empty() {
            command.push('\n');
            command.push_str(&bodies);
        }
        prop_assume!(!command.to_ascii_lowercase().contains("/approve"));
        let policy = &policies()[0];
        let eval = evaluate(&Request::new(&command, "/workspace"), policy, &resolver_all());
        prop_assert_eq!(&eval.decision, &Decision::Allow, "command {:?}", command);
        let plan = eval.plan.expect("an allow carries a plan");
        prop_assert_eq!(plan.segments.len(), segments.len());
        for (planned, (name, words, redirects, heredoc)) in plan.segments.iter().zip(&segments) {
            let want: Vec<String> = std::iter::once(format!("/usr/bin/{name}"))
                .chain(words.iter().map(|(w, _)| w.clone()))
                .collect();
            prop_assert_eq!(&planned.argv, &want, "command {:?}", command);
            let want_redirects: Vec<String> = redirects
                .iter()
                .map(|r| (*r).to_owned())
                .collect();
            prop_assert_eq!(&planned.redirects, &want_redirects);
            prop_assert_eq!(&planned.heredoc, heredoc);
        }
        let reparsed = parse_script(&plan.command);
        prop_assert_eq!(reparsed.first_miss(), None);
        let argvs: Vec<&Vec<String>> = reparsed.segments.iter().map(|s| &s.argv).collect();
        let planned: Vec<&Vec<String>> = plan.segments.iter().map(|s| &s.argv).collect();
        prop_assert_eq!(argvs, planned);
    }

    /// Appending anything after a newline or `;` can never turn a miss into an allow.
    #[test]
    fn a_suffix_cannot_launder_a_miss(suffix in any_command()) {
        let policy = &policies()[0];
        for joiner in ["\n", ";", " && ", " | ", " || "] {
            let command = format!("rm -rf /tmp/x{joiner}{suffix}");
            let only_ls = Policy { allowlist: vec!["/usr/bin/ls".into()], ..policy.clone() };
            let eval = evaluate(&Request::new(&command, "/workspace"), &only_ls, &resolver());
            prop_assert_ne!(eval.decision, Decision::Allow, "command {:?}", command);
        }
    }
}

#[test]
fn known_tricky_inputs_do_not_panic() {
    let inputs = [
        "",
        "\0",
        "'",
        "\"",
        "\\",
        "$(",
        "`",
        "<<",
        "<<EOF",
        "cat <<EOF\n",
        "cat <<'EOF'\nx",
        "${",
        "${x",
        "$((",
        "((",
        "[[",
        "case",
        "for",
        "if",
        "function",
        "coproc",
        "{",
        "}",
        "((1",
        "a\\\n",
        "\u{feff}",
        "\u{a0}",
        "|",
        "&&",
        ";;",
        "ls |",
        "| ls",
        "!",
        "! !",
        "time",
        "time -p",
        "$'\\x00'",
        "echo ${x:-$(id)}",
        "echo $[1+1]",
        "echo $\"x\"",
        "x=(a b)",
        "a[0]=1 ls",
        "declare -A x=([a]=1)",
        "ls 2>&-",
        "ls <&0",
        "ls 0<&-",
        ">&",
        "ls >| x",
        "exec 3<>/dev/tcp/h/1",
    ];
    for input in inputs {
        for policy in policies() {
            let eval = evaluate(&Request::new(input, "/workspace"), &policy, &resolver());
            let _ = explain_text(&eval);
            let _ = explain_json(&eval);
        }
        let _ = command_names(input);
    }
}

// The attacks of the second security review (docs/policy.md), one table per class.

/// PATH lookups of the sandbox image, with the symlinks Debian really has.
fn image_resolver() -> MapResolver {
    let mut map: MapResolver = [
        "git", "python3", "perl", "sh", "bash", "dash", "awk", "sed", "ls", "cat", "id", "sudo",
        "env", "nice", "touch", "ln",
    ]
    .iter()
    .map(|name| (name.to_string(), format!("/usr/bin/{name}")))
    .collect();
    map = map
        .with_real("python3", "/usr/bin/python3.11")
        .with_real("sh", "/usr/bin/dash")
        .with_real("awk", "/usr/bin/mawk");
    map
}

/// Variables a request sets, as name-value pairs.
type Env<'a> = &'a [(&'a str, &'a str)];

fn judge(command: &str, policy: &Policy, env: Env<'_>) -> Evaluation {
    let env: std::collections::BTreeMap<String, String> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    evaluate(
        &Request {
            command,
            cwd: "/workspace",
            env: &env,
        },
        policy,
        &image_resolver(),
    )
}

fn allowlisted(ask: Ask) -> Policy {
    Policy {
        security: Security::Allowlist,
        ask,
        allowlist: [
            "git", "python3", "perl", "sh", "bash", "dash", "awk", "sed", "ls", "cat",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect(),
        ..Policy::default()
    }
}

fn assert_verdict(eval: &Evaluation, command: &str, want: &str, needle: &str) {
    let reason = eval.decision.reason().unwrap_or("");
    assert_eq!(
        eval.decision.as_str(),
        want,
        "{command:?}: {:?}",
        eval.decision
    );
    assert!(
        reason.contains(needle),
        "{command:?}: reason {reason:?} lacks {needle:?}"
    );
}

#[test]
fn attack_request_env_steers_allowlisted_programs() {
    let rows: &[(&str, Env, &str)] = &[
        (
            "git x",
            &[
                ("GIT_CONFIG_COUNT", "1"),
                ("GIT_CONFIG_KEY_0", "alias.x"),
                ("GIT_CONFIG_VALUE_0", "!id > /tmp/pwned"),
            ],
            "request env GIT_CONFIG_COUNT cannot be set under security allowlist",
        ),
        (
            "ls",
            &[("HOME", "/workspace")],
            "request env HOME cannot be set",
        ),
        (
            "python3 /dev/null",
            &[
                ("PYTHONWARNINGS", "all:0:antigravity.x:0:0"),
                ("BROWSER", "sh -c 'id > /tmp/pwned' #%s"),
            ],
            "request env BROWSER cannot be set",
        ),
        (
            "ls",
            &[("LD_PRELOAD", "/workspace/evil.so")],
            "request env LD_PRELOAD cannot be set",
        ),
        ("ls", &[("PATH", "/workspace/bin")], "PATH decides"),
        ("ls", &[("BASH_ENV", "/workspace/x")], "BASH_ENV"),
        ("ls", &[("ENV", "/workspace/x")], "request env ENV"),
    ];
    for ask in [Ask::Off, Ask::OnMiss, Ask::Always] {
        for (command, env, needle) in rows {
            // Refused outright: an approval cannot make these names safe.
            let eval = judge(command, &allowlisted(ask), env);
            assert_verdict(&eval, command, "deny", needle);
            assert!(eval.plan.is_none());
        }
    }
    // Any other unlisted name is a miss, with the name (and value) in the reason.
    let eval = judge("ls", &allowlisted(Ask::OnMiss), &[("FOO", "bar")]);
    assert_verdict(
        &eval,
        "ls",
        "ask",
        "request env FOO=bar is not on the env allowlist",
    );
    assert!(eval.plan.is_some_and(|p| !p.rebuilt));
    let eval = judge("ls", &allowlisted(Ask::Off), &[("FOO", "bar")]);
    assert_verdict(&eval, "ls", "deny", "request env FOO=bar");
    // The built-in presentation list and the operator's names pass.
    let eval = judge(
        "ls",
        &allowlisted(Ask::Off),
        &[
            ("LANG", "C.UTF-8"),
            ("LC_ALL", "C"),
            ("TERM", "dumb"),
            ("NO_COLOR", "1"),
        ],
    );
    assert_verdict(&eval, "ls", "allow", "");
    let extra = Policy {
        env_allow: vec!["FOO".into()],
        ..allowlisted(Ask::Off)
    };
    assert_verdict(&judge("ls", &extra, &[("FOO", "bar")]), "ls", "allow", "");
    // Full mode runs what it is given, env included.
    let full = Policy::default();
    assert_verdict(
        &judge("ls", &full, &[("LD_PRELOAD", "x")]),
        "ls",
        "allow",
        "",
    );
}

#[test]
fn attack_inline_eval_from_stdin_descriptors_and_repls() {
    let rows: &[(&str, &str)] = &[
        (
            "python3 /dev/stdin <<'EOF'\nimport os; os.system('id > /tmp/pwned')\nEOF",
            "inline-eval: python3 reading its program from /dev/stdin",
        ),
        (
            "python3 /proc/self/fd/0 <<'EOF'\nimport os\nEOF",
            "inline-eval: python3 reading its program from /proc/self/fd/0",
        ),
        (
            "python3 -m code <<'EOF'\nimport os\nEOF",
            "inline-eval: python3 -m code",
        ),
        (
            "python3 -i /dev/null <<'EOF'\nimport os\nEOF",
            "inline-eval: python3 -i",
        ),
        (
            "perl '-MPOSIX;system(q(id))' /dev/null",
            "inline-eval: perl -M",
        ),
        (
            "sh /dev/stdin",
            "inline-eval: sh reading its program from /dev/stdin",
        ),
        ("sh -s", "inline-eval: sh -s"),
        (
            "cat x | sh",
            "inline-eval: sh reading its program from stdin",
        ),
        (
            "awk -f /dev/stdin",
            "inline-eval: awk reading its program from /dev/stdin",
        ),
        (
            "sed -f /dev/stdin",
            "inline-eval: sed reading its program from /dev/stdin",
        ),
        ("perl -d x.pl", "inline-eval: perl -d"),
        ("env python3 -m pdb x.py", "inline-eval: python3 -m pdb"),
    ];
    for ask in [Ask::Off, Ask::OnMiss] {
        for (command, needle) in rows {
            let eval = judge(command, &allowlisted(ask), &[]);
            assert_verdict(&eval, command, "ask", needle);
            assert!(!eval.inline_eval.is_empty(), "{command:?}");
        }
    }
    // Not allowlisted: a miss, but still remembered as inline eval.
    let only_ls = Policy {
        allowlist: vec!["ls".into()],
        ..allowlisted(Ask::OnMiss)
    };
    let eval = judge("python3 /dev/stdin", &only_ls, &[]);
    assert_verdict(&eval, "python3 /dev/stdin", "ask", "not allowlisted");
    assert_eq!(
        eval.inline_eval,
        ["python3 reading its program from /dev/stdin"]
    );
    // Plain scripts in the workspace are what the allowlist can vouch for.
    for command in ["python3 tool.py", "sh ./build.sh", "awk -f prog.awk data"] {
        assert_verdict(
            &judge(command, &allowlisted(Ask::Off), &[]),
            command,
            "allow",
            "",
        );
    }
}

#[test]
fn attack_git_aliases_are_other_programs() {
    let rows: &[(&str, &str)] = &[
        ("git -C repo config alias.x '!id'", "git config alias.x"),
        ("git x", "git x is not one of git's own commands"),
        ("git -C repo x", "git x is not one of git's own commands"),
        ("git -c alias.x='!id' x", "git -c alias.x"),
        ("git -c core.pager='id' log", "git -c core.pager"),
        ("git -c core.sshCommand=id fetch", "git -c core.sshCommand"),
        ("git -c core.fsmonitor=id status", "git -c core.fsmonitor"),
        (
            "git -c credential.helper='!id' push",
            "git -c credential.helper",
        ),
        ("git -c diff.external=id diff", "git -c diff.external"),
        ("git -c core.editor=id commit", "git -c core.editor"),
    ];
    for (command, needle) in rows {
        let eval = judge(command, &allowlisted(Ask::Off), &[]);
        assert_verdict(&eval, command, "deny", needle);
        let eval = judge(command, &allowlisted(Ask::OnMiss), &[]);
        assert_verdict(&eval, command, "ask", "allowlist miss");
    }
    for command in [
        "git status",
        "git -c user.name=x commit -m y",
        "git log --oneline",
    ] {
        assert_verdict(
            &judge(command, &allowlisted(Ask::Off), &[]),
            command,
            "allow",
            "",
        );
    }
}

#[test]
fn attack_deny_patterns_in_full_mode() {
    let full = |ask| Policy {
        deny_patterns: vec!["sudo *".into()],
        ask,
        ..Policy::default()
    };
    // An alias renames sudo: a miss for the patterns.
    for command in [
        "alias x=sudo\nx id",
        "alias x=sudo; x id",
        "sh -c 'alias x=sudo\nx id'",
    ] {
        let eval = judge(command, &full(Ask::Off), &[]);
        assert_verdict(
            &eval,
            command,
            "deny",
            "argv patterns cannot see into this command",
        );
        let eval = judge(command, &full(Ask::OnMiss), &[]);
        assert_verdict(
            &eval,
            command,
            "ask",
            "argv patterns cannot see into this command",
        );
    }
    // So does a function that passes its arguments on.
    let exact = Policy {
        deny_patterns: vec!["sudo id".into()],
        ..Policy::default()
    };
    let command = "s() { sudo \"$@\"; }\ns id";
    let eval = judge(command, &exact, &[]);
    assert_verdict(
        &eval,
        command,
        "deny",
        "argv patterns cannot see into this command (function definition",
    );
    // A link created by the command itself, or found after a cd or a PATH change, cannot be
    // resolved before the run: also a miss.
    for (command, needle) in [
        (
            "ln -s /usr/bin/sudo s; ./s id",
            "command word ./s that could not be resolved before the run",
        ),
        (
            "cd /tmp && ./s id",
            "relative command word ./s after a directory change",
        ),
        ("PATH=/workspace/bin x id", "PATH assignment"),
        ("export PATH=/workspace/bin; x id", "PATH assignment"),
        ("hash -p /usr/bin/sudo x; x id", "hash -p definition"),
    ] {
        let linked = if command.starts_with("cd") {
            image_resolver().with_real("./s", "/usr/bin/ls")
        } else {
            image_resolver()
        };
        let eval = evaluate(
            &Request::new(command, "/workspace"),
            &full(Ask::Off),
            &linked,
        );
        assert_verdict(&eval, command, "deny", needle);
    }
    // Without patterns, full mode has nothing to protect and runs it.
    assert_verdict(
        &judge("alias x=ls\nx", &Policy::default(), &[]),
        "alias",
        "allow",
        "",
    );
    // A symlink to sudo is sudo, whatever its name and wherever it lives.
    let linked = image_resolver()
        .with_real("/workspace/s", "/usr/bin/sudo")
        .with("ok", "/usr/local/bin/ok")
        .with_real("ok", "/usr/bin/sudo");
    for command in ["/workspace/s id", "ok id", "nice ok id"] {
        let eval = evaluate(
            &Request::new(command, "/workspace"),
            &full(Ask::Off),
            &linked,
        );
        assert_verdict(&eval, command, "deny", "deny-pattern: sudo *");
    }
    // Under an allowlist the link is refused as the privilege wrapper it is.
    let everything = Policy {
        allowlist: vec!["/usr/local/bin/*".into()],
        ..allowlisted(Ask::OnMiss)
    };
    let eval = evaluate(&Request::new("ok id", "/workspace"), &everything, &linked);
    assert_verdict(
        &eval,
        "ok id",
        "deny",
        "privilege-wrapper: sudo (via symlink ok)",
    );
    // A trusted name that links out of the trusted directories is a miss.
    let out = image_resolver()
        .with("tool", "/usr/local/bin/tool")
        .with_real("tool", "/workspace/tool");
    let eval = evaluate(&Request::new("tool", "/workspace"), &everything, &out);
    assert_verdict(&eval, "tool", "ask", "tool is a symlink to");
    // Real Debian links keep working.
    let eval = judge("python3 tool.py", &allowlisted(Ask::Off), &[]);
    assert_verdict(&eval, "python3 tool.py", "allow", "");
}
