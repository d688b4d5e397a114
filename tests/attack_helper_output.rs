//! moat's own short commands in a sandbox (name resolution, kill, health checks) run a login
//! shell, whose profile a sandbox with a writable home can fill with output. moat reads at most
//! 1 MiB of such output and refuses the rest instead of holding it in memory.

mod common;

use moat::config::Config;
use moat::tools::ExecRequest;

/// The process's peak resident memory, from /proc.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test]
async fn a_login_profile_cannot_flood_moat_through_name_resolution() {
    let mut config = Config::default();
    config.sandbox.read_only_root = false;
    let Some(m) = common::moat("t-atk-helper", config).await else {
        return;
    };
    // The attacker's move: a profile that prints 64 MiB, read by every `sh -lc`.
    let r = m
        .exec(
            "a",
            r#"printf 'head -c 67108864 /dev/zero | tr "\\0" x\n' > "$HOME/.profile" && echo planted"#,
        )
        .await;
    assert!(r.text().contains("planted"), "{}", r.text());
    let before = peak_rss_kib();
    // Tightening to allowlist makes moat resolve `ls` inside the sandbox with a login shell.
    let req = ExecRequest {
        command: "ls".into(),
        security: Some("allowlist".into()),
        ..Default::default()
    };
    let err = m
        .app
        .exec
        .run(&m.key("a"), &req, true)
        .await
        .expect_err("the flooded resolution is refused");
    assert!(err.to_string().contains("1048576 bytes"), "{err}");
    let grew = peak_rss_kib().saturating_sub(before);
    assert!(grew < 32 * 1024, "moat's peak memory grew by {grew} KiB");
}
