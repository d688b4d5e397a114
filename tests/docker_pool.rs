//! The warm pool (docs/pool.md) against the real engine, through the `moat` binary and its
//! daemon: a claimed container carries its session's workspace and no other's, the pool
//! refills, a killed daemon's pool is adopted or removed, a changed config drains the old
//! shape, neither an agent nor a second home reaches a warm container before its claim, and
//! `moat sessions list --pool` and `moat doctor` show what the pool holds and how its claims
//! went.

mod common;

use std::process::Command;
use std::time::Duration;

use common::cli_home::{text, wait_until, TestHome};

const POOL: &str = "[pool]\nsize = 1\n";

fn docker(args: &[&str]) -> String {
    let out = Command::new("docker").args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// What container `id` holds in /workspace, one path a line; the listing must succeed (GNU
/// `ls` fails on every path under Debian's runsc, docs/security.md "runc or runsc", so
/// `find`).
fn workspace_of(id: &str) -> String {
    let out = Command::new("docker")
        .args(["exec", id, "find", "/workspace", "-mindepth", "1"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The unclaimed warm containers of `home` (name, id), found by their label and their mounts
/// from the home.
fn warm(home: &TestHome) -> Vec<(String, String)> {
    let ids = docker(&["ps", "-aq", "--filter", "label=dev.moat.pool"]);
    let mut out = Vec::new();
    for id in ids.lines() {
        let line = docker(&[
            "inspect",
            "-f",
            "{{.Name}} {{.Id}} {{range .Mounts}}{{.Source}} {{end}}",
            id,
        ]);
        let mut parts = line.split(' ');
        let name = parts.next().unwrap_or_default().trim_start_matches('/');
        let full = parts.next().unwrap_or_default();
        let ours = line.contains(&format!("{}/", home.path().display()));
        if ours && name.starts_with("moat-pool-") {
            out.push((name.to_string(), full.to_string()));
        }
    }
    out
}

/// The one warm container of `home` once the pool counts it ready (made, and its first
/// command answered, through whichever transport the run uses), so the next new session
/// claims it.
fn ready(home: &TestHome) -> (String, String) {
    let mut found = None;
    wait_until("a warm container is ready", Duration::from_secs(90), || {
        let w = warm(home);
        let Some((name, id)) = w.first().cloned() else {
            return false;
        };
        let v = pool_json(home);
        let up = v["shapes"].as_array().is_some_and(|s| {
            s.iter()
                .any(|s| s["ready"] == serde_json::json!([name.clone()]))
        });
        if up && w.len() == 1 {
            found = Some((name, id));
        }
        up && found.is_some()
    });
    found.unwrap()
}

/// The container named for session `key` of this home (by name prefix) and its pool label.
fn container_of(key: &str) -> (String, String) {
    let id = docker(&["ps", "-aq", "--filter", &format!("name=moat-{key}-")]);
    let label = docker(&[
        "inspect",
        "-f",
        "{{index .Config.Labels \"dev.moat.pool\"}}",
        &id,
    ]);
    (id, label)
}

fn exec(home: &TestHome, key: &str, cmd: &str) -> String {
    let out = home.run(&["exec", "--session", key, "--", cmd]);
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn a_claimed_container_holds_its_sessions_workspace_and_no_other() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::configured("t-pool-own", POOL);
    // The first command starts the daemon, which starts filling.
    exec(&home, &home.key("first"), "true");
    let (w1, w1_id) = ready(&home);
    let a = home.key("a");
    exec(&home, &a, "echo secret-a > /workspace/a.txt");
    let (a_id, a_label) = container_of(&a);
    assert!(w1_id.starts_with(&a_id), "session a got the warm container");
    assert!(!a_label.is_empty());
    assert_eq!(exec(&home, &a, "cat /workspace/a.txt").trim(), "secret-a");
    // The pool refills; the new one is empty, and so is the next session's workspace.
    let (w2, w2_id) = ready(&home);
    assert_ne!(w2, w1);
    assert!(docker(&["ps", "-aq", "--filter", &format!("name={w1}")]).is_empty());
    assert_eq!(workspace_of(&w2_id), "");
    let b = home.key("b");
    assert_eq!(
        exec(&home, &b, "find /workspace -mindepth 1; echo end").trim(),
        "end"
    );
    assert!(
        w2_id.starts_with(&container_of(&b).0),
        "session b got the second"
    );
    // An agent cannot name a warm container: the slot's key is no session key, and its
    // readable name is another session's.
    let (w3, w3_id) = ready(&home);
    let slot_key = docker(&[
        "inspect",
        "-f",
        "{{index .Config.Labels \"dev.moat.session\"}}",
        &w3_id,
    ]);
    assert!(slot_key.starts_with("pool/"), "{slot_key}");
    let refused = home.run(&["exec", "--session", &slot_key, "--", "touch /workspace/x"]);
    assert!(!refused.status.success(), "{}", text(&refused));
    assert_eq!(workspace_of(&w3_id), "");
    assert_eq!(warm(&home).first().map(|w| w.0.clone()), Some(w3));
    // The daemon's stop leaves no warm container.
    home.stop_daemon();
    assert!(warm(&home).is_empty(), "{:?}", warm(&home));
}

#[tokio::test]
async fn a_killed_daemons_pool_is_adopted_and_a_changed_config_drains_it() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::configured("t-pool-kill", POOL);
    exec(&home, &home.key("first"), "true");
    let (_, w1_id) = ready(&home);
    let pid = home.daemon_pid().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    wait_until("the daemon is gone", Duration::from_secs(20), || {
        home.daemons() == 0
    });
    // The same config: the next daemon adopts it, and its first new session claims it.
    let second = home.key("second");
    exec(&home, &second, "true");
    assert!(
        w1_id.starts_with(&container_of(&second).0),
        "the adopted one was claimed"
    );
    let (w1, _) = ready(&home);
    // Killed again, and the sandbox changed: the old shape goes, the new one fills.
    let pid = home.daemon_pid().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    wait_until("the daemon is gone", Duration::from_secs(20), || {
        home.daemons() == 0
    });
    std::fs::write(
        home.path().join("moat.toml"),
        format!("{POOL}[sandbox]\nmemory = \"1g\"\n"),
    )
    .unwrap();
    exec(&home, &home.key("third"), "true");
    let (w2, w2_id) = ready(&home);
    assert_ne!(w2, w1);
    assert_eq!(
        docker(&["inspect", "-f", "{{.HostConfig.Memory}}", &w2_id]),
        (1u64 << 30).to_string()
    );
    home.stop_daemon();
    assert!(warm(&home).is_empty(), "{:?}", warm(&home));
}

#[tokio::test]
async fn a_second_home_does_not_claim_this_homes_pool() {
    if common::engine().await.is_none() {
        return;
    }
    let one = TestHome::configured("t-pool-one", POOL);
    exec(&one, &one.key("first"), "true");
    let (w1, w1_id) = ready(&one);
    // Another home on the same engine, with no pool of its own: its new session starts a
    // container, and this home's warm one is untouched.
    let two = TestHome::new("t-pool-two");
    let key = two.key("s");
    exec(&two, &key, "true");
    let (id, label) = container_of(&key);
    assert!(
        !w1_id.starts_with(&id),
        "the other home took this home's warm container"
    );
    assert!(label.is_empty(), "{label}");
    assert_eq!(warm(&one), vec![(w1, w1_id)]);
    // Nor does its removal of everything it has touch this home's pool.
    let out = two.run(&["sessions", "rm", &key]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(warm(&one).len(), 1);
}

/// `moat sessions list --pool --json`, parsed.
fn pool_json(home: &TestHome) -> serde_json::Value {
    let out = home.run(&["sessions", "list", "--pool", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test]
async fn sessions_list_and_doctor_show_the_pool_and_its_claims() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::configured("t-pool-show", POOL);
    // No daemon: nothing is warm, and asking starts none.
    let out = home.run(&["sessions", "list", "--pool"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("no daemon runs"), "{}", text(&out));
    assert_eq!(home.daemons(), 0, "asking for the pool started a daemon");
    // The first session finds the pool still filling: a miss of its shape.
    exec(&home, &home.key("first"), "true");
    let (w1, _) = ready(&home);
    let v = pool_json(&home);
    let shapes = v["shapes"].as_array().unwrap();
    assert_eq!(shapes.len(), 1, "{v}");
    let shape = &shapes[0];
    assert_eq!(shape["size"], 1, "{v}");
    assert_eq!(shape["ready"], serde_json::json!([w1]), "{v}");
    assert_eq!((&shape["hits"], &shape["misses"]), (&0.into(), &1.into()));
    assert_eq!(shape["configuredImage"], true);
    assert_eq!(v["unkeptMisses"], 0);
    // A new session claims it: a hit; one with another image fits no kept shape.
    exec(&home, &home.key("second"), "true");
    let image = shape["image"].as_str().unwrap().to_string();
    let other = home.key("other");
    let out = home.run(&[
        "sessions",
        "create",
        &other,
        "--image",
        &image,
        "--network",
        "bridge",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let (w2, _) = ready(&home);
    let v = pool_json(&home);
    let shape = &v["shapes"][0];
    assert_eq!(
        (&shape["hits"], &shape["misses"]),
        (&1.into(), &1.into()),
        "{v}"
    );
    assert_eq!(shape["ready"], serde_json::json!([w2]), "{v}");
    assert_eq!(v["unkeptMisses"], 1, "{v}");
    // The table and the doctor say the same.
    let out = home.run(&["sessions", "list", "--pool"]);
    let table = text(&out);
    assert!(out.status.success(), "{table}");
    let hash = shape["shape"].as_str().unwrap();
    let row = table
        .lines()
        .find(|l| l.starts_with(hash))
        .unwrap_or_else(|| panic!("no row for {hash}: {table}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells, [hash, &image, "1", "1", "1", "1"], "{table}");
    assert!(table.contains(&format!("ready {w2}")), "{table}");
    assert!(
        table.contains("1 new session(s) fit no kept shape"),
        "{table}"
    );
    let out = home.run(&["doctor"]);
    let report = text(&out);
    assert!(
        report.contains(&format!(
            "ok    pool: {image} (shape {hash}): 1 of 1 ready; claims: 1 hit(s), 1 miss(es)"
        )),
        "{report}"
    );
    home.stop_daemon();
    assert!(warm(&home).is_empty(), "{:?}", warm(&home));
}

/// The containers of any kind whose mounts come from `home`.
fn containers_of(home: &TestHome) -> Vec<String> {
    let ids = docker(&["ps", "-aq"]);
    ids.lines()
        .filter(|id| {
            docker(&["inspect", "-f", "{{range .Mounts}}{{.Source}} {{end}}", id])
                .contains(&format!("{}/", home.path().display()))
        })
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn bench_claims_every_new_session_from_the_pool_and_leaves_nothing() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-pool-bench");
    let out = home.run(&[
        "bench",
        "--runs",
        "2",
        "--cold-runs",
        "2",
        "--claims",
        "3",
        "--cli-runs",
        "2",
        "--flood-bytes",
        "1000",
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let n = &v["new_sessions"];
    // Every sample of the pool's row was a claim, and so was every client's new session.
    assert_eq!(
        (&n["pool_hits"], &n["pool_misses"]),
        (&2.into(), &0.into()),
        "{v}"
    );
    assert_eq!(n["claims_hits"], 3, "{v}");
    assert_eq!(n["claims_all_ok"], true, "{v}");
    for key in [
        "pool_p50_ms",
        "cold_p50_ms",
        "docker_run_p50_ms",
        "claims_per_s",
    ] {
        assert!(n[key].as_f64().unwrap() > 0.0, "{key}: {v}");
    }
    let cli = &v["cli"];
    assert!(cli["moat_cli_p50_ms"].as_f64().unwrap() > 0.0, "{v}");
    // The CLI's own call, sent on the socket of the daemon it started, was answered (the bench
    // fails otherwise) and timed.
    assert!(cli["socket_call_p50_ms"].as_f64().unwrap() > 0.0, "{v}");
    assert!(cli["docker_exec_p50_ms"].as_f64().unwrap() > 0.0, "{v}");
    // The bench's own homes, their daemon, sessions and pool are gone.
    let left: Vec<_> = std::fs::read_dir(home.path())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("bench-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert!(
        containers_of(&home).is_empty(),
        "{:?}",
        containers_of(&home)
    );
    let needle = format!("MOAT_HOME={}/bench-", home.path().display());
    let daemons = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| String::from_utf8_lossy(&env).contains(&needle))
        })
        .count();
    assert_eq!(daemons, 0, "the CLI row's daemon still runs");
}

#[tokio::test]
async fn a_bench_that_fails_half_way_leaves_no_session_behind() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-pool-halfway");
    // The baseline's `docker` CLI is not on PATH: the bench makes its warm session through the
    // engine's API, then fails at its first `docker exec`.
    let no_docker = home.path().join("no-docker-bin");
    std::fs::create_dir_all(&no_docker).unwrap();
    let out = home
        .moat()
        .env("PATH", &no_docker)
        .args([
            "bench",
            "--runs",
            "2",
            "--cold-runs",
            "1",
            "--cli-runs",
            "1",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("docker exec"), "{}", text(&out));
    assert!(
        containers_of(&home).is_empty(),
        "{:?}",
        containers_of(&home)
    );
    // A runtime the engine does not offer, after one it does: the first one's session is made,
    // then the second fails.
    let out = home.run(&[
        "bench",
        "--runtimes",
        "runc,no-such-runtime",
        "--runs",
        "1",
        "--cold-runs",
        "1",
    ]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        containers_of(&home).is_empty(),
        "{:?}",
        containers_of(&home)
    );
}
