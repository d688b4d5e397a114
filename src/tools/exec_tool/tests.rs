//! The exec tool over the fake engine (no Docker), from request to result: the policy's
//! composition (configuration, the operator's session override, the request), then allow →
//! the command runs, deny → nothing reaches the engine, ask → an approval that runs the
//! command once when approved, and a timeout that ends the command. The fake plays moat's
//! wrapper (`runtime::fake_wrapper`).

use std::sync::Arc;
use std::time::Duration;

use super::request::ExecRequest;
use crate::app::App;
use crate::approvals::{ApprovalDecision, Decider};
use crate::config::{Config, ConfigSource};
use crate::contract::ToolResult;
use crate::home::Home;
use crate::process::EventKind;
use crate::runtime::fake::{Call, FakeRuntime};
use crate::runtime::fake_wrapper::{Play, Wrapper};
use crate::store::{ApprovalStatus, SessionPolicy};

const SESSION: &str = "main";

/// An app on a fresh home whose engine plays `make …` as printing `built` and exiting with
/// the number after `exit`, and `sleep …` as running until it is killed.
struct Moat {
    _dir: tempfile::TempDir,
    app: App,
    fake: FakeRuntime,
    wrapper: Arc<Wrapper>,
}

impl Moat {
    fn new(config: Config) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        home.ensure_root().unwrap();
        let wrapper = Wrapper::new(dir.path().join("run"), |command: &str| {
            if command.starts_with("sleep") {
                return Play::UntilKilled {
                    out: String::new(),
                    ignores_term: false,
                };
            }
            let code = command
                .rsplit_once("exit ")
                .and_then(|(_, c)| c.trim().parse().ok())
                .unwrap_or(0);
            Play::Exit {
                out: "built\n".into(),
                code,
            }
        });
        let fake = wrapper.engine();
        let source = ConfigSource {
            file: None,
            overrides: vec![],
        };
        let app = App::with_engine(home, config, source, Arc::new(fake.clone())).unwrap();
        Self {
            _dir: dir,
            app,
            fake,
            wrapper,
        }
    }

    async fn exec(&self, req: &ExecRequest) -> ToolResult {
        self.app.exec.run(SESSION, req, true).await.unwrap()
    }

    /// How many commands reached the engine (helper captures aside).
    fn execs(&self) -> usize {
        self.fake
            .calls()
            .iter()
            .filter(|c| matches!(c, Call::Exec { .. }))
            .count()
    }
}

fn request(command: &str) -> ExecRequest {
    ExecRequest {
        command: command.into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn an_allowed_command_reports_its_output_and_exit_code() {
    let moat = Moat::new(Config::default());
    for (command, code, status) in [("make", 0, "completed"), ("make; exit 3", 3, "failed")] {
        let result = moat.exec(&request(command)).await;
        let d = &result.details.to_json();
        assert_eq!(d["status"], status, "{command}: {d}");
        assert_eq!(d["exitCode"], code, "{command}: {d}");
        assert_eq!(d["aggregated"], "built\n", "{command}: {d}");
        assert_eq!(d["timedOut"], false, "{command}: {d}");
        let text = &result.content[0].text;
        assert!(text.starts_with("built"), "{command}: {text}");
        assert_eq!(
            text.contains("Command exited with code 3"),
            code == 3,
            "{command}: {text}"
        );
    }
    assert_eq!(moat.wrapper.started(), ["make", "make; exit 3"]);
    assert_eq!(moat.execs(), 2);
}

/// Every way a policy refuses, each layer of the composition on its own: nothing reaches the
/// engine, and the result says denied. A request can only tighten the policy, never loosen it
/// (docs/policy.md, "Settings").
#[tokio::test]
async fn a_denied_command_never_reaches_the_engine() {
    let deny_pattern = || {
        let mut c = Config::default();
        c.policy.sandbox.deny_patterns = vec!["rm *".into()];
        c
    };
    let deny_config = || {
        let mut c = Config::default();
        c.policy.sandbox.security = crate::policy::Security::Deny;
        c
    };
    let cases = [
        ("deny pattern", deny_pattern(), None, None, "rm -rf /tmp/x"),
        (
            "request security=deny",
            Config::default(),
            Some("deny"),
            None,
            "make",
        ),
        (
            "session override security=deny",
            Config::default(),
            None,
            Some("deny"),
            "make",
        ),
        (
            "a request cannot loosen",
            deny_config(),
            Some("full"),
            None,
            "make",
        ),
    ];
    for (name, config, security, session_security, command) in cases {
        let moat = Moat::new(config);
        if let Some(s) = session_security {
            moat.app
                .store
                .set_session_policy(
                    SESSION,
                    &SessionPolicy {
                        security: Some(s.into()),
                        ask: None,
                        loosen: false,
                    },
                )
                .unwrap();
        }
        let req = ExecRequest {
            security: security.map(str::to_string),
            ..request(command)
        };
        let result = moat.exec(&req).await;
        let d = &result.details.to_json();
        assert_eq!(d["status"], "failed", "{name}: {d}");
        assert_eq!(d["denied"], true, "{name}: {d}");
        assert!(
            result.content[0].text.starts_with("Exec denied (sandbox"),
            "{name}: {}",
            result.content[0].text
        );
        assert_eq!(moat.execs(), 0, "{name}");
        assert!(moat.wrapper.started().is_empty(), "{name}");
    }
}

/// Ask → a pending approval, nothing runs; an operator approves through the approvals service
/// → the waiter runs the command exactly once and reports how it ended.
#[tokio::test]
async fn an_approved_command_runs_once() {
    let ask_pattern = || {
        let mut c = Config::default();
        c.policy.sandbox.ask_patterns = vec!["make *".into()];
        c
    };
    // Asked by the configured pattern, and by the request raising `ask`.
    let cases = [
        (
            "ask pattern",
            ask_pattern(),
            None,
            "make all; exit 2",
            Some(2),
        ),
        (
            "request ask=always",
            Config::default(),
            Some("always"),
            "make",
            Some(0),
        ),
    ];
    for (name, config, ask, command, code) in cases {
        let moat = Moat::new(config);
        let mut events = moat.app.registry.events().subscribe();
        let req = ExecRequest {
            ask: ask.map(str::to_string),
            ..request(command)
        };
        let pending = moat.exec(&req).await;
        assert_eq!(
            pending.status(),
            Some(crate::contract::Status::ApprovalPending),
            "{name}"
        );
        let id = pending.details.approval_id().unwrap().to_string();
        let row = moat.app.approvals.get(&id).unwrap();
        assert_eq!(row.status, ApprovalStatus::Pending, "{name}");
        assert_eq!(moat.execs(), 0, "{name}: ran before the approval");

        let operator = Decider::operator("alice", "cli");
        moat.app
            .approvals
            .decide(&id, ApprovalDecision::AllowOnce, &operator)
            .unwrap();
        let finished = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let e = events.recv().await.unwrap();
                if let Some(o) = e.outcome.filter(|o| o.kind == EventKind::Finished) {
                    return o;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{name}: the approved command never finished"));
        assert_eq!(finished.approval_id.as_deref(), Some(id.as_str()), "{name}");
        assert_eq!(finished.exit_code, code, "{name}");

        let row = moat.app.approvals.get(&id).unwrap();
        assert_eq!(row.status, ApprovalStatus::Used, "{name}");
        assert_eq!(row.process_id, finished.process_id, "{name}");
        assert!(
            moat.app
                .approvals
                .decide(&id, ApprovalDecision::AllowOnce, &operator)
                .is_err(),
            "{name}: decided twice"
        );
        // A restarted waiter finds nothing left to run.
        assert_eq!(moat.app.exec.recover_approvals(), 0, "{name}");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(moat.wrapper.started(), [command], "{name}");
        assert_eq!(moat.execs(), 1, "{name}");
    }
}

/// A command that never writes its exit status is ended at its timeout: the kill helper
/// reaches the engine, and the result says it timed out.
#[tokio::test]
async fn a_command_past_its_timeout_is_killed() {
    let moat = Moat::new(Config::default());
    let req = ExecRequest {
        timeout: Some(1.0),
        ..request("sleep 600")
    };
    let result = moat.exec(&req).await;
    let d = &result.details.to_json();
    assert_eq!(d["status"], "failed", "{d}");
    assert_eq!(d["timedOut"], true, "{d}");
    assert_eq!(d["exitSignal"], "SIGTERM", "{d}");
    assert!(
        result.content[0]
            .text
            .contains("Command timed out after 1 seconds"),
        "{}",
        result.content[0].text
    );
    let signalled = moat.wrapper.signalled();
    assert_eq!(signalled.len(), 1);
    let kill = crate::process::script::kill_group_argv(signalled[0], crate::process::KILL_GRACE_MS);
    assert!(
        moat.fake
            .calls()
            .iter()
            .any(|c| matches!(c, Call::Capture { argv, .. } if *argv == kill)),
        "the kill helper never reached the engine"
    );
    assert_eq!(moat.execs(), 1);
}

/// An exec parses its command once, whatever the policy decides: the evaluation, the name
/// resolution, the approval's cover and the plan all work from that one parse
/// (docs/ARCHITECTURE.md, "The data flow of one exec"). Each command here is unique, so the
/// count is this test's alone.
#[tokio::test]
async fn an_exec_parses_its_command_once() {
    use crate::policy::parse_count as counted;
    let mut ask = Config::default();
    ask.policy.sandbox.ask_patterns = vec!["make asked*".into()];
    let mut deny = Config::default();
    deny.policy.sandbox.deny_patterns = vec!["make denied*".into()];
    let mut allowlist = Config::default();
    allowlist.policy.sandbox.security = crate::policy::Security::Allowlist;
    let cases = [
        ("allowed", Config::default(), "make allowed-once; exit 0"),
        ("denied", deny, "make denied-once"),
        ("asked", ask, "make asked-once"),
        // Names resolved in the container, then judged against the allowlist.
        ("allowlist", allowlist, "make under-allowlist | wc -l"),
    ];
    for (name, config, command) in cases {
        let moat = Moat::new(config);
        counted::watch(command);
        moat.exec(&request(command)).await;
        assert_eq!(counted::of(command), 1, "{name}: {command}");
    }
}
