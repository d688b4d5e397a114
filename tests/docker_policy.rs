//! The policy against the real engine: what runs is the checked plan.

mod common;

use moat::config::Config;
use moat::contract::Status;
use moat::policy::Security;

#[tokio::test]
async fn profile_function_cannot_hijack_an_allowlisted_name() {
    let mut config = Config::default();
    config.policy.sandbox.security = Security::Allowlist;
    config.policy.sandbox.allowlist = vec!["/usr/bin/ls".into(), "/usr/bin/touch".into()];
    // The login shell reads $HOME/.profile; point HOME at the writable workspace so the
    // sandboxed agent itself can plant a profile, as a hostile one would.
    config
        .sandbox
        .env
        .insert("HOME".into(), "/workspace".into());
    let Some(m) = common::moat("t-hijack", config).await else {
        return;
    };
    // Plant the hijack where `sh -l` reads it: $HOME/.profile of the sandbox user.
    m.exec("a", "true").await;
    std::process::Command::new("docker")
        .args([
            "exec",
            &m.container("a"),
            "sh",
            "-c",
            "echo 'ls() { echo HIJACKED; }' > /workspace/.profile",
        ])
        .status()
        .unwrap();
    // Plain `sh -lc ls` would be hijacked…
    let direct = m.docker_exec("a", "cd /workspace && HOME=/workspace sh -lc ls");
    assert!(
        direct.contains("HIJACKED"),
        "the hijack is planted: {direct}"
    );
    // …but moat runs the plan by absolute path.
    m.docker_exec("a", "touch /workspace/visible-file");
    let r = m.exec("a", "ls").await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    assert!(r.text().contains("visible-file"), "{}", r.text());
    assert!(!r.text().contains("HIJACKED"));
    // And a name outside the allowlist is refused without running.
    let r = m.exec("a", "rm -rf /workspace/visible-file").await;
    assert_eq!(r.status(), Some(Status::Failed));
    assert!(r.text().starts_with("Exec denied"), "{}", r.text());
    assert!(m.docker_exec("a", "ls /workspace").contains("visible-file"));
}

#[tokio::test]
async fn operator_session_override_tightens_the_config() {
    let Some(m) = common::moat("t-override", Config::default()).await else {
        return;
    };
    assert_eq!(
        m.exec("a", "echo ok").await.status(),
        Some(Status::Completed)
    );
    let over = moat::store::SessionPolicy {
        security: Some("deny".into()),
        ask: None,
        loosen: false,
    };
    m.app.store.set_session_policy(&m.key("a"), &over).unwrap();
    let r = m.exec("a", "echo ok").await;
    assert!(r.text().starts_with("Exec denied"), "{}", r.text());
    // Another session is unaffected.
    assert_eq!(
        m.exec("b", "echo ok").await.status(),
        Some(Status::Completed)
    );
}

/// An operator's safe-bin profile (docs/policy.md, "Operator safe-bin profiles"): `jq` with a
/// profile passes under allowlist without an allowlist entry, and an argv outside the profile
/// (a filter read from a file, an unlisted flag, a file operand) misses and does not run.
#[tokio::test]
async fn configured_safe_bin_profile_lets_jq_filter_stdin_only() {
    let text = r#"
[policy.sandbox]
security = "allowlist"
allowlist = ["/usr/bin/printf"]
safe_bins = ["jq", "wc"]
[policy.sandbox.safe_bin_profiles.jq]
allowed_flags = ["-r", "-c"]
value_flags = ["--indent"]
min_positional = 1
max_positional = 1
"#;
    let config = moat::config::load_from_str(text, "test", &[], None).expect("config loads");
    let Some(m) = common::moat("t-jqprof", config).await else {
        return;
    };
    let r = m.exec("a", r#"printf '{"a":{"b":42}}' | jq -r .a.b"#).await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    assert!(r.text().starts_with("42"), "{}", r.text());
    // The goal of each attack: make jq read a file. A marker proves whether jq ran.
    m.docker_exec("a", "printf '\"SECRET-FILE\"' > /tmp/f.jq");
    for attack in [
        "printf '{}' | jq -f /tmp/f.jq",
        "printf '{}' | jq --from-file /tmp/f.jq",
        "printf '{}' | jq -rf /tmp/f.jq",
        "jq . /tmp/f.jq",
        "printf '{}' | jq --rawfile x /tmp/f.jq .",
        "printf '{}' | jq -L /tmp 'import \"f\" as f; f::x'",
    ] {
        let r = m.exec("a", attack).await;
        assert_eq!(r.status(), Some(Status::Failed), "{attack}: {}", r.text());
        assert!(
            r.text().starts_with("Exec denied"),
            "{attack}: {}",
            r.text()
        );
        assert!(!r.text().contains("SECRET-FILE"), "{attack}: {}", r.text());
    }
}
