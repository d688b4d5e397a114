//! The file tools against the real engine: what `write_file` writes is what the sandbox sees
//! (and owns), paths never leave the workspace, a failing patch changes nothing, binary files
//! are not dumped, and `security = "deny"` leaves only the reads (docs/mcp.md, "File tools";
//! docs/security.md, "File tools").

mod common;

use moat::config::Config;
use moat::contract::{Status, ToolResult};
use moat::policy::Security;
use moat::tools::{FileCall, ListRequest, PatchRequest, ReadRequest, WriteRequest};

/// One file-tool call in `session`: `Ok` with the result, or the error's text.
async fn call(m: &common::TestMoat, session: &str, c: FileCall) -> Result<ToolResult, String> {
    m.app.files.call(&m.key(session), &c).await.map_err(|e| {
        let mut text = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(cause) = source {
            text.push_str(&format!(": {cause}"));
            source = cause.source();
        }
        text
    })
}

fn read(path: &str) -> FileCall {
    FileCall::Read(ReadRequest {
        path: path.into(),
        ..Default::default()
    })
}

fn write(path: &str, content: &str) -> FileCall {
    FileCall::Write(WriteRequest {
        path: path.into(),
        content: content.into(),
        create_dirs: Some(true),
    })
}

fn patch(input: &str) -> FileCall {
    FileCall::Patch(PatchRequest {
        input: input.into(),
    })
}

#[tokio::test]
async fn written_files_are_the_sandbox_users_and_reads_see_commands_files() {
    let Some(m) = common::moat("t-files-rw", Config::default()).await else {
        return;
    };
    let r = call(&m, "s", write("/workspace/src/hello.txt", "hi there\n"))
        .await
        .unwrap();
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    assert!(r.text().contains("Created"), "{}", r.text());
    let (uid, gid) = m.app.config.sandbox.uid_gid();
    let out = m
        .exec(
            "s",
            "cat src/hello.txt; stat -c '%u:%g %a' src/hello.txt src",
        )
        .await;
    assert_eq!(out.status(), Some(Status::Completed), "{}", out.text());
    assert_eq!(
        out.text().trim(),
        format!("hi there\n{uid}:{gid} 644\n{uid}:{gid} 755")
    );
    // Replacing keeps the mode the sandbox gave the file.
    m.exec("s", "chmod 755 src/hello.txt").await;
    call(&m, "s", write("src/hello.txt", "#!/bin/sh\necho run\n"))
        .await
        .unwrap();
    let out = m
        .exec("s", "./src/hello.txt; stat -c %a src/hello.txt")
        .await;
    assert_eq!(out.text().trim(), "run\n755", "{}", out.text());

    // A file the sandbox wrote, read by lines.
    m.exec(
        "s",
        "seq 1 5000 > nums.txt; printf 'a\\033[2Jb\\n' > esc.txt",
    )
    .await;
    let r = call(
        &m,
        "s",
        FileCall::Read(ReadRequest {
            path: "nums.txt".into(),
            offset: Some(10),
            limit: Some(3),
            ..Default::default()
        }),
    )
    .await
    .unwrap();
    assert!(r.text().starts_with("10\n11\n12\n"), "{}", r.text());
    assert!(r.text().contains("offset=13"), "{}", r.text());
    let r = call(&m, "s", read("nums.txt")).await.unwrap();
    assert!(r.text().contains("\n2000\n"), "{}", r.text());
    assert!(!r.text().contains("\n2001\n"), "{}", r.text());
    let r = call(
        &m,
        "s",
        FileCall::Read(ReadRequest {
            path: "nums.txt".into(),
            byte_offset: Some(2),
            byte_limit: Some(4),
            ..Default::default()
        }),
    )
    .await
    .unwrap();
    assert!(r.text().starts_with("2\n3\n"), "{}", r.text());
    // Escape sequences are stripped like command output's.
    let r = call(&m, "s", read("esc.txt")).await.unwrap();
    assert_eq!(r.text(), "ab\n");

    // A binary file is described, not dumped.
    m.exec("s", "head -c 3000 /bin/sh > blob.bin").await;
    let r = call(&m, "s", read("blob.bin")).await.unwrap();
    assert_eq!(r.details.to_json()["binary"], true, "{}", r.text());
    assert_eq!(r.details.to_json()["size"], 3000);
    assert!(
        r.text().contains("binary file (3000 bytes)"),
        "{}",
        r.text()
    );

    let r = call(
        &m,
        "s",
        FileCall::List(ListRequest {
            path: Some("/workspace".into()),
            limit: None,
        }),
    )
    .await
    .unwrap();
    assert!(r.text().contains("src/\n"), "{}", r.text());
    assert!(r.text().contains("blob.bin  3000 bytes"), "{}", r.text());
}

#[tokio::test]
async fn paths_and_links_that_leave_are_refused() {
    let Some(m) = common::moat("t-files-esc", Config::default()).await else {
        return;
    };
    let out = m
        .exec(
            "s",
            "ln -s /etc etc-link && ln -s ../.. up && mkdir d && ls",
        )
        .await;
    assert_eq!(out.status(), Some(Status::Completed), "{}", out.text());
    let host_passwd = std::fs::read("/etc/passwd").unwrap();
    for (what, c) in [
        ("read through /etc link", read("etc-link/passwd")),
        ("read the /etc link", read("etc-link")),
        ("read ../", read("../../../etc/passwd")),
        ("read /etc/passwd", read("/etc/passwd")),
        ("read /workspace/..", read("/workspace/../etc/passwd")),
        ("read through ../.. link", read("up/etc/passwd")),
        ("write through /etc link", write("etc-link/passwd", "x")),
        (
            "write a new file under the /etc link",
            write("etc-link/moat-new", "x"),
        ),
        ("write ../", write("../escaped.txt", "x")),
        ("write /etc/passwd", write("/etc/passwd", "x")),
        (
            "list the /etc link",
            FileCall::List(ListRequest {
                path: Some("etc-link".into()),
                limit: None,
            }),
        ),
        (
            "patch through the /etc link",
            patch("*** Begin Patch\n*** Add File: etc-link/moat-new\n+x\n*** End Patch"),
        ),
        (
            "patch ../",
            patch("*** Begin Patch\n*** Delete File: ../x\n*** End Patch"),
        ),
        (
            "patch with a new directory that climbs out",
            patch("*** Begin Patch\n*** Add File: a-ok.txt\n+x\n*** Add File: nodir/../../x\n+y\n*** End Patch"),
        ),
    ] {
        let err = call(&m, "s", c).await.expect_err(what);
        assert!(err.contains("leaves the workspace"), "{what}: {err}");
    }
    let err = call(&m, "s", write("etc-link", "x")).await.unwrap_err();
    assert!(err.contains("symbolic link"), "{err}");
    assert_eq!(std::fs::read("/etc/passwd").unwrap(), host_passwd);
    // The refused patch wrote nothing, not even its valid first file.
    let out = m.exec("s", "ls -a").await;
    assert!(
        !out.text().contains("a-ok.txt") && !out.text().contains("nodir"),
        "{}",
        out.text()
    );
    assert!(!std::path::Path::new("/etc/moat-new").exists());
    let ws = m
        .app
        .sessions
        .workspace_dir(&m.app.sessions.names(&m.key("s")).0);
    assert!(!ws.parent().unwrap().join("escaped.txt").exists());
}

#[tokio::test]
async fn a_patch_whose_second_hunk_fails_changes_nothing() {
    let Some(m) = common::moat("t-files-patch", Config::default()).await else {
        return;
    };
    m.exec(
        "s",
        "printf 'one\\ntwo\\nthree\\n' > a.txt; printf 'alpha\\nbeta\\n' > b.txt",
    )
    .await;
    let before_a = m
        .exec("s", "sha256sum a.txt b.txt")
        .await
        .text()
        .to_string();
    let bad = "*** Begin Patch\n*** Update File: a.txt\n@@\n one\n-two\n+TWO\n*** Update File: b.txt\n@@\n alpha\n-beta\n+BETA\n@@\n-gamma\n+GAMMA\n*** Delete File: a.txt\n*** End Patch";
    let err = call(&m, "s", patch(bad)).await.unwrap_err();
    assert!(
        err.contains("hunk 2") && err.contains("b.txt") && err.contains("gamma"),
        "{err}"
    );
    assert_eq!(m.exec("s", "sha256sum a.txt b.txt").await.text(), before_a);

    let good = "*** Begin Patch\n*** Update File: a.txt\n*** Move to: moved/a.txt\n@@\n one\n-two\n+TWO\n*** Update File: b.txt\n@@ alpha\n-beta\n+BETA\n*** Add File: c.txt\n+new\n*** End Patch";
    let r = call(&m, "s", patch(good)).await.unwrap();
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    let (uid, gid) = m.app.config.sandbox.uid_gid();
    let out = m
        .exec(
            "s",
            "cat moved/a.txt b.txt c.txt; test -e a.txt || echo gone; stat -c %u:%g moved moved/a.txt c.txt",
        )
        .await;
    assert_eq!(
        out.text().trim(),
        format!("one\nTWO\nthree\nalpha\nBETA\nnew\ngone\n{uid}:{gid}\n{uid}:{gid}\n{uid}:{gid}")
    );
}

#[tokio::test]
async fn security_deny_leaves_only_the_reads() {
    let mut config = Config::default();
    config.policy.sandbox.security = Security::Deny;
    let Some(m) = common::moat("t-files-deny", config).await else {
        return;
    };
    // Exec is refused too, so the file is put there from the host side.
    let ws = m.app.sessions.ensure(&m.key("s")).await.unwrap().workspace;
    std::fs::write(ws.join("seen.txt"), "visible\n").unwrap();
    let r = call(&m, "s", read("seen.txt")).await.unwrap();
    assert_eq!(r.text(), "visible\n");
    let r = call(&m, "s", FileCall::List(ListRequest::default()))
        .await
        .unwrap();
    assert!(r.text().contains("seen.txt"), "{}", r.text());
    for c in [
        write("seen.txt", "changed"),
        patch("*** Begin Patch\n*** Delete File: seen.txt\n*** End Patch"),
    ] {
        let r = call(&m, "s", c).await.unwrap();
        assert_eq!(r.status(), Some(Status::Failed));
        assert!(
            r.text()
                .starts_with("Write denied (sandbox, security is deny)"),
            "{}",
            r.text()
        );
        assert_eq!(r.details.to_json()["denied"], true);
    }
    assert_eq!(
        std::fs::read_to_string(ws.join("seen.txt")).unwrap(),
        "visible\n"
    );
}

#[tokio::test]
async fn files_over_http_stay_in_the_agents_session() {
    const AGENT: &str = "agent-token-files-0123456789";
    let config = format!(
        "[serve]\noperator_token = \"operator-token-files-0123456789\"\n[[serve.agents]]\ntoken = \"{AGENT}\"\nsession = \"http-files-agent\"\nagent = \"a1\"\n"
    );
    let Some(s) = common::serve::serve("http-files", &config).await else {
        return;
    };
    use common::serve::{http, json};
    let base = "/v1/sessions/http-files-agent/files";
    let (status, body) = http(
        &s.addr,
        "POST",
        &format!("{base}/write"),
        Some(AGENT),
        br#"{"path":"x/y.txt","content":"over http\n","createDirs":true}"#,
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(json(&body)["details"]["status"], "completed", "{body}");
    let (status, body) = http(
        &s.addr,
        "POST",
        &format!("{base}/read"),
        Some(AGENT),
        br#"{"path":"/workspace/x/y.txt"}"#,
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(json(&body)["content"][0]["text"], "over http\n", "{body}");
    let (status, body) = http(
        &s.addr,
        "POST",
        &format!("{base}/list"),
        Some(AGENT),
        br#"{"path":"x"}"#,
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        json(&body)["details"]["entries"][0]["name"],
        "y.txt",
        "{body}"
    );
    let (status, body) = http(
        &s.addr,
        "POST",
        &format!("{base}/patch"),
        Some(AGENT),
        br#"{"input":"*** Begin Patch\n*** Update File: x/y.txt\n@@\n-over http\n+patched\n*** End Patch"}"#,
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = http(
        &s.addr,
        "POST",
        &format!("{base}/read"),
        Some(AGENT),
        br#"{"path":"../../etc/passwd"}"#,
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        json(&body)["error"]
            .as_str()
            .unwrap()
            .contains("leaves the workspace"),
        "{body}"
    );
    let (status, body) = http(
        &s.addr,
        "POST",
        &format!("{base}/read"),
        Some(AGENT),
        br#"{"path":"x/y.txt","bogus":1}"#,
    );
    assert_eq!(status, 400, "{body}");
    // Another session's files are not this token's.
    let (status, _) = http(
        &s.addr,
        "POST",
        "/v1/sessions/http-files-other/files/read",
        Some(AGENT),
        br#"{"path":"x/y.txt"}"#,
    );
    assert_eq!(status, 403);
    let (_, body) = http(
        &s.addr,
        "POST",
        &format!("{base}/read"),
        Some(AGENT),
        br#"{"path":"x/y.txt"}"#,
    );
    assert_eq!(json(&body)["content"][0]["text"], "patched\n", "{body}");
}
