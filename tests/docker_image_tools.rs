//! The default sandbox image is an agent's developer machine (README, "The sandbox image"):
//! `make test` over a C and a C++ build, a Python venv with pip, Node with npm (whose cache
//! needs a writable place on a read-only root), archives, hex dumps, SQLite, file types, the
//! pager and the rest of the list, through `moat run` against the real engine. Against the
//! image from before the toolchain, the first line of the recipe already fails (no `make`).

mod common;

use std::process::Command;

use common::cli_home::{stdout, text, TestHome};

/// Every tool of the README's list, each printing a marker the test looks for.
const MAKEFILE: &str = "\
test: hello hello-cpp
\t./hello
\t./hello-cpp
\tpython3 -m venv .venv
\t.venv/bin/pip --version
\t.venv/bin/python -c 'import sqlite3, ssl, venv; print(\"python modules ok\")'
\tnode -e 'console.log(\"node \" + process.version)'
\tnpm --version
\tcd pkg && npm pack --silent
\tzip -q out.zip hello.c && unzip -l out.zip | grep -q hello.c && echo zip-unzip-ok
\tprintf moat | xxd -p
\tsqlite3 :memory: 'select 6*7;'
\tfile hello | grep -q ELF && echo file-ok
\techo paged | less -FX
\tpkg-config --version >/dev/null && echo pkg-config-ok
\txz --version >/dev/null && bzip2 --help 2>/dev/null; echo xz-bzip2-ok
\tssh -V 2>&1 | grep -q OpenSSH && echo ssh-ok
\twget --version >/dev/null && echo wget-ok
\ttree . >/dev/null && echo tree-ok
\tgit --version >/dev/null && curl --version >/dev/null && jq --version >/dev/null && rg --version >/dev/null && echo core-ok

hello: hello.c
\tcc -Wall -o $@ hello.c

hello-cpp: hello.cpp
\tc++ -Wall -o $@ hello.cpp
";

#[tokio::test]
async fn make_test_runs_over_the_everyday_toolchain() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-image-tools");
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    std::fs::write(dir.join("Makefile"), MAKEFILE).unwrap();
    std::fs::write(
        dir.join("hello.c"),
        "#include <stdio.h>\nint main(void) { puts(\"hello from C\"); return 0; }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("hello.cpp"),
        "#include <iostream>\nint main() { std::cout << \"hello from C++\" << std::endl; }\n",
    )
    .unwrap();
    std::fs::create_dir(dir.join("pkg")).unwrap();
    std::fs::write(
        dir.join("pkg/package.json"),
        r#"{"name":"moat-probe","version":"1.0.0"}"#,
    )
    .unwrap();
    // A directory root owns is never a workspace (README, "Root-owned checkouts"): the tests
    // run as root, so the checkout goes to the image's user, as the CI example does.
    if nix::unistd::geteuid().is_root() {
        let st = Command::new("chown")
            .args(["-R", "1000:1000", &dir.display().to_string()])
            .status()
            .unwrap();
        assert!(st.success());
    }
    let o = home
        .moat()
        .current_dir(dir)
        .args(["run", "--workspace", ".", "--", "make test"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = stdout(&o);
    for marker in [
        "hello from C\n",
        "hello from C++\n",
        "pip 2",
        "python modules ok\n",
        "node v",
        "moat-probe-1.0.0.tgz\n",
        "zip-unzip-ok\n",
        "6d6f6174\n",
        "\n42\n",
        "file-ok\n",
        "paged\n",
        "pkg-config-ok\n",
        "xz-bzip2-ok\n",
        "ssh-ok\n",
        "wget-ok\n",
        "tree-ok\n",
        "core-ok\n",
    ] {
        assert!(out.contains(marker), "{marker:?} missing\n{}", text(&o));
    }
    // npm's version line: digits after `npm --version`.
    let npm = out
        .lines()
        .skip_while(|l| *l != "npm --version")
        .nth(1)
        .unwrap_or_default();
    assert!(
        npm.split('.').count() == 3 && npm.chars().all(|c| c.is_ascii_digit() || c == '.'),
        "{npm:?}\n{}",
        text(&o)
    );
    // What the build made is on the host, in the checkout.
    assert!(dir.join("hello").exists() && dir.join(".venv/bin/pip").exists());
    assert!(dir.join("pkg/moat-probe-1.0.0.tgz").exists());
}

/// `moat image build --if-outdated` (what scripts/setup runs) leaves an image it did not build
/// as it is, and the current default image is up to date; `moat doctor` names an image an
/// older recipe built (README, "The sandbox image").
#[tokio::test]
async fn if_outdated_leaves_a_users_own_image_alone() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-image-outdated");
    // A user's own image: no recipe label.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("Dockerfile"),
        "FROM scratch\nLABEL purpose=moat-test\n",
    )
    .unwrap();
    let st = Command::new("docker")
        .args(["build", "-q", "-t", "moat-test-own-image:1"])
        .arg(dir.path())
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let id = || {
        let o = Command::new("docker")
            .args(["image", "inspect", "-f", "{{.Id}}", "moat-test-own-image:1"])
            .output()
            .unwrap();
        stdout(&o)
    };
    let before = id();
    let o = home.run(&[
        "image",
        "build",
        "--tag",
        "moat-test-own-image:1",
        "--if-outdated",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        stdout(&o).contains("was not built by `moat image build`: left as it is"),
        "{}",
        text(&o)
    );
    assert_eq!(id(), before, "the user's image is untouched");
    let _ = Command::new("docker")
        .args(["rmi", "-f", "moat-test-own-image:1"])
        .output();
    // The default image, built by this checkout's scripts/setup: current.
    let o = home.run(&["image", "build", "--if-outdated"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        stdout(&o).contains("is up to date (recipe "),
        "{}",
        text(&o)
    );
    // And `moat doctor` has no warning about it.
    let o = home.run(&["doctor"]);
    assert!(!stdout(&o).contains("older recipe"), "{}", text(&o));
    // An image an older moat built (its recipe label differs): doctor says so and how to fix.
    std::fs::write(
        dir.path().join("Dockerfile"),
        "FROM scratch\nLABEL dev.moat.image.recipe=000000000000\n",
    )
    .unwrap();
    let st = Command::new("docker")
        .args(["build", "-q", "-t", "moat-test-old-recipe:1"])
        .arg(dir.path())
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let o = home
        .moat()
        .env("MOAT_SANDBOX_IMAGE", "moat-test-old-recipe:1")
        .arg("doctor")
        .output()
        .unwrap();
    let _ = Command::new("docker")
        .args(["rmi", "-f", "moat-test-old-recipe:1"])
        .output();
    assert!(
        stdout(&o).contains("warn  image moat-test-old-recipe:1 was built from an older recipe (000000000000) than this moat's"),
        "{}",
        text(&o)
    );
    assert!(
        stdout(&o).contains("run `moat image build`"),
        "{}",
        text(&o)
    );
}
