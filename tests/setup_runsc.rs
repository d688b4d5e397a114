//! scripts/setup-runsc merges its runtime into the engine's configuration without clobbering
//! anything else, and leaves a file it cannot read alone (docs/security.md, "runc or
//! runsc"). `DOCKER_DAEMON_JSON` points it at a scratch file: only the merge runs.

use std::process::Command;

fn jq() -> bool {
    if Command::new("jq").arg("--version").output().is_ok() {
        return true;
    }
    assert!(
        !std::env::var("CI").is_ok_and(|v| v == "true"),
        "jq is missing under CI=true (apt-get install jq)"
    );
    eprintln!("skipping: no jq");
    false
}

fn merge(file: &std::path::Path) -> std::process::Output {
    Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/setup-runsc"))
        .env("DOCKER_DAEMON_JSON", file)
        .output()
        .unwrap()
}

#[test]
fn the_merge_keeps_every_other_setting_and_is_idempotent() {
    if !jq() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("daemon.json");
    std::fs::write(
        &file,
        r#"{"storage-driver": "overlay2", "runtimes": {"other": {"path": "/x"}, "runsc": {"path": "/old"}}}"#,
    )
    .unwrap();
    let out = merge(&file);
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(v["storage-driver"], "overlay2");
    assert_eq!(v["runtimes"]["other"]["path"], "/x");
    assert_eq!(
        v["runtimes"]["runsc"]["runtimeArgs"],
        serde_json::json!(["--network=host", "--host-fifo=open", "--host-uds=create"])
    );
    let before = std::fs::read(&file).unwrap();
    let meta = std::fs::metadata(&file).unwrap().modified().unwrap();
    assert!(merge(&file).status.success());
    assert_eq!(std::fs::read(&file).unwrap(), before);
    assert_eq!(std::fs::metadata(&file).unwrap().modified().unwrap(), meta);

    // No file yet: one is written with only the runtime.
    let fresh = dir.path().join("fresh.json");
    assert!(merge(&fresh).status.success());
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&fresh).unwrap()).unwrap();
    assert_eq!(v.as_object().unwrap().len(), 1, "{v}");

    // A file jq cannot read is left as it was, and the script fails.
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, "{not json").unwrap();
    assert!(!merge(&broken).status.success());
    assert_eq!(std::fs::read_to_string(&broken).unwrap(), "{not json");
}
