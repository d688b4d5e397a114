//! The README's CI example (README, "Using it"), taken from the README and run as written by
//! `sh -e` in a fresh clone, with the `moat` binary on PATH, against the real engine: as
//! root, whose clone belongs to root, and as a normal user. Then the two ways out of a
//! root-owned checkout the refusal names, each doing what the README says it gives (README,
//! "Root-owned checkouts").
//!
//! The tests run as root (the chown needs it); the normal user is uid 4242 through
//! `setpriv`, with the Docker socket's group, as a user in the `docker` group would be.

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::cli_home::{stdout, text, TestHome};

/// The unprivileged user of the normal-user run.
const USER: (u32, u32) = (4242, 4242);

/// The first `sh` block after "In CI," in the README: the example as a user copies it.
fn readme_ci_example() -> String {
    let readme = include_str!("../README.md");
    let from = readme.find("In CI,").expect("the README's CI example");
    let rest = &readme[from..];
    let start = rest.find("```sh\n").expect("its code block") + "```sh\n".len();
    let end = rest[start..].find("```").expect("its end");
    rest[start..start + end].to_string()
}

/// Whether this process may chown and switch users; under CI=true it must.
fn root_or_skip() -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "this test needs root under CI=true (it makes a root-owned checkout and a normal user)"
    );
    eprintln!("skipping: needs root");
    false
}

/// An upstream repository: a C program, its Makefile (building into `build/`, in the
/// checkout), committed.
fn upstream(parent: &Path) -> PathBuf {
    let dir = parent.join("upstream");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("hello.c"),
        "#include <stdio.h>\nint main(void) { puts(\"tests pass\"); return 0; }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("Makefile"),
        "test: build/hello\n\t./build/hello\n\nbuild/hello: hello.c\n\tmkdir -p build\n\tcc -o $@ hello.c\n",
    )
    .unwrap();
    for args in [
        &["init", "-q"][..],
        &["add", "."],
        &[
            "-c",
            "user.name=moat",
            "-c",
            "user.email=moat@example.invalid",
            "commit",
            "-qm",
            "upstream",
        ],
    ] {
        let o = Command::new("git")
            .args(args)
            .current_dir(&dir)
            .output()
            .expect("git is needed for this test");
        assert!(o.status.success(), "git {args:?}: {o:?}");
    }
    dir
}

/// `argv` as `user` (or as this process), with the Docker socket's group so the engine
/// answers, as a member of the `docker` group would run it.
fn command_as(user: Option<(u32, u32)>, argv: &[&str]) -> Command {
    match user {
        None => {
            let mut c = Command::new(argv[0]);
            c.args(&argv[1..]);
            c
        }
        Some((uid, gid)) => {
            let mut c = Command::new("setpriv");
            c.args([
                format!("--reuid={uid}"),
                format!("--regid={gid}"),
                format!("--groups={}", docker_socket_gid()),
                "--".into(),
            ])
            .args(argv);
            c
        }
    }
}

fn docker_socket_gid() -> u32 {
    let socket = std::env::var("DOCKER_HOST")
        .ok()
        .and_then(|h| h.strip_prefix("unix://").map(str::to_string))
        .unwrap_or_else(|| "/var/run/docker.sock".into());
    std::fs::metadata(socket).unwrap().gid()
}

/// `git clone` of `upstream` into `dest`, as `user`.
fn clone(upstream: &Path, dest: &Path, user: Option<(u32, u32)>) {
    let o = command_as(
        user,
        &[
            "git",
            "clone",
            "-q",
            &upstream.display().to_string(),
            &dest.display().to_string(),
        ],
    )
    .env("HOME", dest.parent().unwrap())
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", text(&o));
}

/// The README's CI example in `checkout`, by `sh -e`, as `user`, with `home`'s MOAT_HOME and
/// the `moat` under test first on PATH.
fn run_example(home: &TestHome, checkout: &Path, user: Option<(u32, u32)>) -> Output {
    let script = readme_ci_example();
    let bin = Path::new(env!("CARGO_BIN_EXE_moat")).parent().unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let mut c = command_as(user, &["sh", "-ec", &script]);
    c.current_dir(checkout)
        .env("PATH", path)
        .env("HOME", checkout.parent().unwrap())
        .env("MOAT_HOME", home.path())
        .env_remove("MOAT_SESSION")
        .env_remove("MOAT_SHELL")
        .stdin(std::process::Stdio::null());
    if let Ok(t) = std::env::var("MOAT_TEST_TRANSPORT") {
        c.env("MOAT_SANDBOX_TRANSPORT", t);
    }
    c.output().unwrap()
}

fn owner(p: &Path) -> (u32, u32) {
    let m = std::fs::symlink_metadata(p).unwrap();
    (m.uid(), m.gid())
}

fn chown_r(p: &Path, (uid, gid): (u32, u32)) {
    let st = Command::new("chown")
        .args(["-R", &format!("{uid}:{gid}"), &p.display().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
}

#[test]
fn the_example_is_the_one_the_readme_shows() {
    let example = readme_ci_example();
    assert!(
        example.ends_with("moat run --workspace . -- make test\n"),
        "{example}"
    );
    assert!(example.contains("chown -R 1000:1000 ."), "{example}");
}

#[tokio::test]
async fn the_ci_example_runs_on_a_fresh_clone_as_root() {
    if common::engine().await.is_none() || !root_or_skip() {
        return;
    }
    let home = TestHome::new("t-ci-root");
    let work = tempfile::tempdir().unwrap();
    let upstream = upstream(work.path());
    let checkout = work.path().join("checkout");
    clone(&upstream, &checkout, None);
    assert_eq!(owner(&checkout), (0, 0), "a root runner's clone is root's");

    // CONTROL: the example's moat line alone is refused on this checkout, naming both ways
    // out and what each gives; nothing ran.
    let o = home
        .moat()
        .current_dir(&checkout)
        .args(["run", "--workspace", ".", "--", "make test"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("belongs to root (uid 0)"), "{err}");
    assert!(
        err.contains("`chown -R 1000:1000 ")
            && err.contains("the sandbox then runs as its owner and can write it"),
        "{err}"
    );
    assert!(
        err.contains("set sandbox.user to the uid:gid commands should run as: the sandbox can then read it but not write to it"),
        "{err}"
    );
    assert!(!checkout.join("build").exists());

    // The example as the README has it: the checkout goes to the sandbox's user, make test
    // builds in it and passes, and moat exits with make's code.
    let o = run_example(&home, &checkout, None);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(stdout(&o).contains("tests pass\n"), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("moat run: exit 0, session run-"),
        "{}",
        text(&o)
    );
    assert_eq!(owner(&checkout), (1000, 1000));
    assert_eq!(owner(&checkout.join("build/hello")), (1000, 1000));

    // A failing test fails the job with its code.
    std::fs::write(
        checkout.join("Makefile"),
        "test:\n\t@echo failing; exit 3\n",
    )
    .unwrap();
    chown_r(&checkout, (0, 0));
    let o = run_example(&home, &checkout, None);
    // make's own code for a failed recipe, passed through (moat's own failures say `moat:
    // failed to`, not a run summary).
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(stdout(&o).contains("failing\n"), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("moat run: exit 2, session run-"),
        "{}",
        text(&o)
    );
}

#[tokio::test]
async fn the_ci_example_runs_on_a_fresh_clone_as_a_normal_user() {
    if common::engine().await.is_none() || !root_or_skip() {
        return;
    }
    let home = TestHome::new("t-ciuser");
    chown_r(home.path(), USER);
    let work = tempfile::tempdir().unwrap();
    let upstream = upstream(work.path());
    chown_r(work.path(), USER);
    let checkout = work.path().join("checkout");
    clone(&upstream, &checkout, Some(USER));
    assert_eq!(owner(&checkout), USER);

    let o = run_example(&home, &checkout, Some(USER));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(stdout(&o).contains("tests pass\n"), "{}", text(&o));
    // The chown line did nothing for a user's checkout; the sandbox ran as its owner.
    assert_eq!(owner(&checkout), USER);
    assert_eq!(owner(&checkout.join("build/hello")), USER);
    // The daemon that served it is the user's own.
    let pid = home.daemon_pid().expect("the run's daemon");
    let uid = std::fs::metadata(format!("/proc/{pid}")).unwrap().uid();
    assert_eq!(uid, USER.0);
}

/// The other way out: `sandbox.user` with the checkout left root's. The sandbox runs as that
/// user, reads the checkout, and cannot write it, as the refusal and the README say.
#[tokio::test]
async fn sandbox_user_on_a_root_owned_clone_reads_it_but_cannot_write_it() {
    if common::engine().await.is_none() || !root_or_skip() {
        return;
    }
    let home = TestHome::configured("t-ci-user-set", "[sandbox]\nuser = \"1000:1000\"\n");
    let work = tempfile::tempdir().unwrap();
    let upstream = upstream(work.path());
    let checkout = work.path().join("checkout");
    clone(&upstream, &checkout, None);
    let o = home
        .moat()
        .current_dir(&checkout)
        .args([
            "run",
            "--workspace",
            ".",
            "--",
            "id -u; grep -c tests hello.c; make test",
        ])
        .output()
        .unwrap();
    let out = stdout(&o);
    assert!(
        out.starts_with("1000\n1\n"),
        "ran as 1000 and read: {}",
        text(&o)
    );
    assert_eq!(o.status.code(), Some(2), "make failed: {}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("Permission denied"),
        "{}",
        text(&o)
    );
    assert!(!checkout.join("build").exists());
    assert_eq!(owner(&checkout), (0, 0), "the checkout stays root's");
}
