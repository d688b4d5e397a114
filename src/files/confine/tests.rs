//! Tests of `confine`: paths and links that leave the workspace are refused by the kernel.

use super::*;

fn setup() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::create_dir_all(dir.path().join("outside")).unwrap();
    std::fs::write(dir.path().join("outside/secret"), "s").unwrap();
    std::fs::write(ws.join("src/a.txt"), "a").unwrap();
    std::os::unix::fs::symlink("/etc", ws.join("etc-link")).unwrap();
    std::os::unix::fs::symlink("../outside", ws.join("up-link")).unwrap();
    std::os::unix::fs::symlink("src/a.txt", ws.join("inner-link")).unwrap();
    nix::unistd::mkfifo(&ws.join("fifo"), Mode::from_bits_truncate(0o644)).unwrap();
    (dir, ws)
}

#[test]
fn reads_stay_beneath_the_root() {
    let (_dir, ws) = setup();
    let w = Workspace::open(&ws, (1000, 1000)).unwrap();
    let host = format!("{}/src/a.txt", ws.display());
    // (path, Ok(contents) or Err(words of the error))
    let rows: Vec<(&str, Result<&str, &str>)> = vec![
        ("src/a.txt", Ok("a")),
        ("/workspace/src/a.txt", Ok("a")),
        (&host, Ok("a")),
        ("src/../src/a.txt", Ok("a")),
        ("inner-link", Ok("a")),
        ("../outside/secret", Err("leaves the workspace")),
        ("/workspace/../outside/secret", Err("leaves the workspace")),
        ("/etc/passwd", Err("leaves the workspace")),
        ("/workspace-other/x", Err("leaves the workspace")),
        ("etc-link/passwd", Err("leaves the workspace")),
        ("etc-link", Err("leaves the workspace")),
        ("up-link/secret", Err("leaves the workspace")),
        ("/proc/self/root/etc/passwd", Err("leaves the workspace")),
        ("src", Err("is a directory")),
        ("fifo", Err("not a regular file")),
        ("nope", Err("no such file")),
        ("", Err("empty")),
        ("a\0b", Err("NUL")),
    ];
    for (path, want) in rows {
        let got = w.open_file(path).map(|(mut f, _)| {
            let mut s = String::new();
            f.read_to_string(&mut s).unwrap();
            s
        });
        match (got, want) {
            (Ok(s), Ok(w)) => assert_eq!(s, w, "{path}"),
            (Err(e), Err(w)) => assert!(e.to_string().contains(w), "{path}: {e}"),
            (got, want) => panic!("{path}: got {got:?}, want {want:?}"),
        }
    }
    let long = "a/".repeat(2100);
    assert!(w.open_file(&long).unwrap_err().to_string().contains("4096"));
}

#[test]
fn writes_are_atomic_and_refuse_links() {
    let (dir, ws) = setup();
    let w = Workspace::open(&ws, (1000, 1000)).unwrap();
    w.entry("src/a.txt", false)
        .unwrap()
        .write(b"new", w.owner())
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(ws.join("src/a.txt")).unwrap(),
        "new"
    );
    // No temporary file is left behind.
    let names: Vec<_> = std::fs::read_dir(ws.join("src")).unwrap().collect();
    assert_eq!(names.len(), 1);
    // A stream over its bound replaces nothing and leaves nothing; one within it is written.
    let entry = w.entry("src/a.txt", false).unwrap();
    let mut long = std::io::repeat(b'z').take(10_001);
    let e = entry
        .write_from(&mut long, 10_000, w.owner(), &[])
        .unwrap_err();
    assert!(e.to_string().contains("10000-byte bound"), "{e}");
    assert_eq!(
        std::fs::read_to_string(ws.join("src/a.txt")).unwrap(),
        "new"
    );
    assert_eq!(std::fs::read_dir(ws.join("src")).unwrap().count(), 1);
    let mut exact = std::io::repeat(b'z').take(10_000);
    assert_eq!(
        entry
            .write_from(&mut exact, 10_000, w.owner(), &[])
            .unwrap(),
        10_000
    );
    entry.write(b"new", w.owner()).unwrap();
    w.entry("deep/er/f", true)
        .unwrap()
        .write(b"x", w.owner())
        .unwrap();
    assert_eq!(std::fs::read_to_string(ws.join("deep/er/f")).unwrap(), "x");
    let err = |p: &str, create: bool| match w.entry(p, create) {
        Err(e) => e.to_string(),
        Ok(e) => e.write(b"bad", w.owner()).unwrap_err().to_string(),
    };
    assert!(err("missing/f", false).contains("no such file"));
    // Missing directories that would climb out are refused before any is made.
    assert!(err("new/../../outside/f", true).contains("leaves"));
    assert!(!ws.join("new").exists());
    assert!(w.check_creatable("a/b/c").is_ok());
    assert!(w.check_creatable("a/../../c").is_err());
    assert!(err("etc-link/passwd", false).contains("leaves"));
    assert!(err("etc-link/new/f", true).contains("leaves"));
    assert!(err("up-link/secret", false).contains("leaves"));
    assert!(err("../outside/secret", false).contains("leaves"));
    assert!(err("etc-link", false).contains("symbolic link"));
    assert!(err("inner-link", false).contains("symbolic link"));
    assert!(err("src", false).contains("is a directory"));
    assert!(err("src/..", false).contains("does not name a file"));
    assert!(err("src/", false).contains("does not name a file"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("outside/secret")).unwrap(),
        "s"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("src/a.txt")).unwrap(),
        "new"
    );
}

#[test]
fn the_parts_the_sandbox_sees_read_only_refuse_every_write_also_through_links() {
    let (_dir, ws) = setup();
    let ws = std::fs::canonicalize(&ws).unwrap();
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    std::fs::create_dir_all(ws.join("vendor/lib")).unwrap();
    std::fs::write(
        ws.join("vendor/lib/.git"),
        "gitdir: ../../.git/modules/lib\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(".git/hooks", ws.join("hooks-link")).unwrap();
    let w = Workspace::open(&ws, (1000, 1000))
        .unwrap()
        .with_read_only(vec![ws.join(".git"), ws.join("vendor/lib/.git")]);
    for (path, create_dirs) in [
        (".git/hooks/pre-commit", false),
        (".git/config", false),
        ("/workspace/.git/hooks/post-checkout", false),
        ("hooks-link/pre-commit", false),
        (".git/hooks/new/dir/x", true),
        (".git", false),
        ("vendor/lib/.git", false),
    ] {
        let e = w
            .entry(path, create_dirs)
            .err()
            .unwrap_or_else(|| panic!("{path} was allowed"));
        assert!(
            matches!(e, ConfineError::ReadOnlyPart { .. }),
            "{path}: {e}"
        );
        assert!(e.to_string().contains("--git-writable"), "{e}");
    }
    assert!(
        !ws.join(".git/hooks/new").exists(),
        "nothing was made on the way"
    );
    // Next to them, everything is as before.
    for path in [
        "src/a.txt",
        "vendor/lib/file",
        ".gitignore",
        "vendor/lib/.github/x",
    ] {
        w.entry(path, true)
            .unwrap()
            .write(b"ok", w.owner())
            .unwrap_or_else(|e| panic!("{path}: {e}"));
    }
}
