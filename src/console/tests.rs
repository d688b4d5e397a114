//! The approval view rendered from hostile rows, without a browser: the HTML that reaches the
//! operator holds no markup an agent wrote, no raw control or bidi character, a mark for each
//! one, the whole command however long, and no secret.

use std::sync::Arc;

use askama::Template;

use super::approvals::{approval_view, ApprovalView};
use crate::approvals::{Approvals, Binding, PersistEntry};
use crate::contract::ApprovalTarget;
use crate::store::{ApprovalRow, ApprovalStatus, Store};

/// The approval as the approvals page and the allow-always page show it.
#[derive(Template)]
#[template(path = "console/approval.html")]
struct One {
    a: ApprovalView,
}

fn row(command: &str, argv: Vec<Vec<String>>, env: Vec<String>) -> ApprovalRow {
    let binding = Binding {
        target: ApprovalTarget::Host,
        plan: command.into(),
        argv,
        resolved: vec![Some("/usr/bin/echo".into())],
        cwd: "/srv/\u{202E}kcab".into(),
        env_hash: "ab".repeat(32),
        env,
        files: vec![],
    };
    ApprovalRow {
        id: "0a1b2c3d-0000-4000-8000-123456789abc".into(),
        session: "s1".into(),
        requester: "slack:<b>U1</b>".into(),
        agent: Some("a1\u{200B}".into()),
        target: ApprovalTarget::Host,
        command: command.into(),
        plan: command.into(),
        binding: serde_json::to_string(&binding).unwrap(),
        request: "{}".into(),
        reason: "allowlist miss: <i>echo</i>".into(),
        allowed: "allow-once,allow-always,deny".into(),
        persist: serde_json::to_string(&vec![PersistEntry::path("/usr/bin/echo")]).unwrap(),
        covered: false,
        created_at_ms: 1_000,
        expires_at_ms: 61_000,
        status: ApprovalStatus::Pending,
        decision: None,
        decided_by: None,
        decided_at_ms: None,
        used_at_ms: None,
        process_id: None,
    }
}

fn render(approvals: &Approvals, r: &ApprovalRow) -> String {
    One {
        a: approval_view(approvals, r, 2_000),
    }
    .render()
    .unwrap()
}

#[test]
fn hostile_approvals_render_inert_whole_and_redacted() {
    let store = Arc::new(Store::in_memory().unwrap());
    let secret = "hunter2-very-secret";
    let approvals = Approvals::new(store, vec![("API_KEY".into(), secret.into())]);
    let long = "x".repeat(20_000);
    let rows: Vec<(String, Vec<&str>)> = vec![
        (
            "echo '<script>alert(1)</script><img src=x onerror=alert(2)>'".into(),
            vec!["&#60;script&#62;", "&#60;img src=x onerror=alert(2)&#62;"],
        ),
        (
            "echo \u{1b}[31mred\u{1b}[0m \u{202E}gpj.exe".into(),
            vec![">U+001B</span>[31mred", ">U+202E</span>gpj.exe"],
        ),
        (
            "rm\u{200B} -rf\u{2066}/\u{2069} \u{FEFF}\u{200D}\u{061C}\u{200E}".into(),
            vec![
                ">U+200B<", ">U+2066<", ">U+2069<", ">U+FEFF<", ">U+200D<", ">U+061C<", ">U+200E<",
            ],
        ),
        (
            "echo one\necho two".into(),
            vec![">U+000A</span>\necho two"],
        ),
        (format!("echo {long} end-of-long"), vec!["end-of-long"]),
        (
            format!("curl -H 'key: {secret}'"),
            vec!["[REDACTED:API_KEY]"],
        ),
    ];
    for (command, wants) in rows {
        let argv = vec![command.split(' ').map(str::to_string).collect()];
        let env = vec![format!("API_KEY={secret}"), "LANG=C\u{202E}".into()];
        let html = render(&approvals, &row(&command, argv, env));
        for want in wants {
            assert!(html.contains(want), "{want:?} missing from:\n{html}");
        }
        for raw in ["<script", "<img", "<b>", "<i>", "onerror=alert(2)>"] {
            assert!(!html.contains(raw), "{raw} made it into the page:\n{html}");
        }
        for c in html.chars() {
            assert!(
                c == '\n' || !crate::output::is_deceptive(c),
                "a raw U+{:04X} made it into the page",
                c as u32
            );
        }
        assert!(!html.contains(secret), "a secret made it into the page");
        // The requester, agent, cwd and env are agent-made too.
        for want in [
            "slack:&#60;b&#62;U1&#60;/b&#62;",
            "a1<span",
            "/srv/<span",
            "LANG=C<span",
        ] {
            assert!(html.contains(want), "{want:?} missing");
        }
    }
}
