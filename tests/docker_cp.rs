//! `moat cp` (docs/security.md, "moat cp") against the real engine: both ways into `/tmp` of
//! a container whose root is read-only, and what comes out of the sandbox treated as hostile
//! (a symlink to /etc is not made on the host, a name with control characters refuses the
//! archive). Crafted archives (`..`, absolute names, a link then a file through it) are
//! unit-tested in src/files/unpack.rs.

mod common;

use common::cli_home::{text, TestHome};

#[tokio::test]
async fn both_ways_into_tmp_of_a_read_only_root() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-cpx");
    let key = home.key("s");
    let exec = |cmd: &str| home.run(&["exec", "--session", &key, "--", cmd]);
    // The root is read-only: the engine's archive upload would refuse this container.
    let o = exec("touch /probe");
    assert!(!o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("Read-only file system"));
    // Host → container.
    let src = tempfile::tempdir().unwrap();
    let tree = src.path().join("tree");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    std::fs::write(tree.join("a.txt"), "alpha\n").unwrap();
    std::fs::write(tree.join("sub/b.txt"), "beta\n").unwrap();
    let o = home.run(&["cp", &tree.display().to_string(), &format!("{key}:/tmp/in")]);
    assert!(o.status.success(), "{}", text(&o));
    let o = exec("cat /tmp/in/tree/a.txt /tmp/in/tree/sub/b.txt; stat -c %U /tmp/in/tree/a.txt");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "alpha\nbeta\nsandbox\n",
        "{}",
        text(&o)
    );
    // A single file too.
    let o = home.run(&[
        "cp",
        &tree.join("a.txt").display().to_string(),
        &format!("{key}:/tmp/one"),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        String::from_utf8_lossy(&exec("cat /tmp/one/a.txt").stdout),
        "alpha\n"
    );
    // Container → host, with a symlink to /etc among what the sandbox made.
    let o = exec("mkdir -p /tmp/out/d && echo made-inside > /tmp/out/d/f && ln -s /etc /tmp/out/etc-link && ln -s /etc/passwd /tmp/out/d/pw");
    assert!(o.status.success(), "{}", text(&o));
    let dst = tempfile::tempdir().unwrap();
    let o = home.run(&[
        "cp",
        &format!("{key}:/tmp/out"),
        &dst.path().display().to_string(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        std::fs::read_to_string(dst.path().join("out/d/f")).unwrap(),
        "made-inside\n"
    );
    for link in ["out/etc-link", "out/d/pw"] {
        assert!(
            std::fs::symlink_metadata(dst.path().join(link)).is_err(),
            "{link} was made"
        );
    }
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("etc-link (a symbolic link)"), "{err}");
    // Nothing of the copies is left in the run directory.
    let run = home.path().join("run");
    let left: Vec<_> = std::fs::read_dir(&run)
        .unwrap()
        .flatten()
        .flat_map(|d| std::fs::read_dir(d.path()).unwrap().flatten())
        .filter(|e| e.file_name().to_string_lossy().starts_with("cp-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test]
async fn a_hostile_name_refuses_the_archive_and_a_missing_container_is_named() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-cp-hostile");
    let key = home.key("s");
    let o = home.run(&["cp", &format!("{key}:/tmp/x"), "/tmp"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no running container"),
        "{}",
        text(&o)
    );
    let o = home.run(&[
        "exec",
        "--session",
        &key,
        "--",
        r#"mkdir -p /tmp/h && echo x > /tmp/h/ok && echo y > "/tmp/h/$(printf 'evil\033[2Jname')""#,
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let dst = tempfile::tempdir().unwrap();
    let o = home.run(&[
        "cp",
        &format!("{key}:/tmp/h"),
        &dst.path().display().to_string(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("control characters"), "{err}");
    assert!(
        !err.contains('\u{1b}'),
        "the name reaches the terminal escaped: {err:?}"
    );
    // Refused whole: nothing was written.
    assert_eq!(std::fs::read_dir(dst.path()).unwrap().count(), 0);
}
