//! An allowlisted program is not an allowlisted command (docs/policy.md, "Gadget options"):
//! the catalogue of options that make a program the default image ships run, load or write
//! something else (the public GTFOBins catalogue's shell, command, library-load and file-write
//! functions), against the real engine. For each line: where the payload can run unprivileged
//! in the image, it is first run directly in the container (the control: it writes the
//! marker); then, with only that program allowlisted, `explain` must not say allow, and `exec`
//! must refuse it (ask = off) with the marker absent. Ordinary uses of the same programs
//! still pass.

mod common;

use moat::config::Config;
use moat::contract::Status;
use moat::policy::{Ask, Security};
use moat::tools::ExplainRequest;

const MARKER: &str = "/tmp/pwned";

/// (program allowlisted alone, command, whether the payload works unprivileged in the image).
const CATALOGUE: &[(&str, &str, bool)] = &[
    ("tar", "tar -cf /dev/null /etc/hostname --checkpoint=1 --checkpoint-action=exec='touch /tmp/pwned'", true),
    ("tar", "tar -cf /dev/null /etc/hostname --checkpoint=1 --checkpoint-act=exec='touch /tmp/pwned'", true),
    ("tar", "tar xf /dev/null -I '/bin/sh -c \"touch /tmp/pwned\"'", true),
    ("tar", "tar -xf /tmp/a.tar --to-command='touch /tmp/pwned'", true),
    ("tar", "tar -xf /tmp/a.tar --to-com='touch /tmp/pwned'", true),
    ("tar", "tar -cf /dev/null -F 'touch /tmp/pwned' /etc/hostname", false),
    ("split", "split --filter='touch /tmp/pwned' /etc/hostname", true),
    ("split", "split --fil='touch /tmp/pwned' /etc/hostname", true),
    ("sort", "sort -o /tmp/pwned /etc/hostname", true),
    ("sort", "sort --outp=/tmp/pwned /etc/hostname", true),
    ("sort", "sort --compress-program=sh /etc/hostname", false),
    ("shuf", "shuf -o /tmp/pwned /etc/hostname", true),
    ("rg", "rg --pre sh x /tmp/s", true),
    ("rg", "rg -z x /etc/hostname", false),
    ("curl", "curl -o /tmp/pwned file:///etc/hostname", true),
    ("curl", "curl -sSLo /tmp/pwned file:///etc/hostname", true),
    ("curl", "curl -K /tmp/curlcfg file:///etc/hostname", true),
    ("curl", "curl --engine /tmp/e.so file:///etc/hostname", false),
    ("openssl", "openssl enc -in /etc/hostname -out /tmp/pwned", true),
    ("openssl", "openssl version -engine /tmp/e.so", false),
    ("openssl", "openssl engine /tmp/e.so", false),
    ("openssl", "openssl engine dynamic -pre SO_PATH:/tmp/e.so -pre LOAD", false),
    ("openssl", "openssl s_client -ssl_client_engine /tmp/e.so -connect 127.0.0.1:1", false),
    ("find", "find /etc/hostname -exec touch /tmp/pwned \\;", true),
    ("find", "find /etc/hostname -fprint /tmp/pwned", true),
    // find reads `--` only as the end of -H/-L/-P, and parses -exec after it.
    ("find", "find -- /etc/hostname -exec touch /tmp/pwned \\;", true),
    ("iconv", "iconv -f utf-8 -t utf-8 -o /tmp/pwned /etc/hostname", true),
    ("git", "git ls-remote --upload-pack='touch /tmp/pwned; false' /tmp/r", true),
    ("git", "git ls-remote --upload-pa='touch /tmp/pwned; false' /tmp/r", true),
    ("git", "git -C /tmp/r diff --output=/tmp/pwned", true),
    ("git", "git -C /tmp/r grep --open-files-in-pager='touch /tmp/pwned;:' changed", true),
    ("git", "git clone -u 'touch /tmp/pwned; false' /tmp/r /tmp/clone", true),
    ("git", "git -C /tmp/r2 -c user.name=a -c user.email=a@b rebase --root -qx 'touch /tmp/pwned'", true),
    ("git", "git -C /tmp/r2 -c user.name=a -c user.email=a@b rebase --root --exe='touch /tmp/pwned'", true),
    ("git", "git -C /tmp/r config core.fsmonitor 'touch /tmp/pwned; false' list", false),
    // The next-volume prompt runs a shell on `!`.
    ("tar", "tar -c -M -L 10 -f /tmp/vol.tar /usr/bin/tar", false),
    ("setarch", "setarch -3 /bin/sh -c 'touch /tmp/pwned'", false),
    ("setarch", "setarch x86_64 /bin/sh -c 'touch /tmp/pwned'", true),
    ("choom", "choom -n 1000 -- /bin/sh -c 'touch /tmp/pwned'", true),
    ("taskset", "taskset 1 /bin/sh -c 'touch /tmp/pwned'", true),
    ("chrt", "chrt -o 0 /bin/sh -c 'touch /tmp/pwned'", true),
    ("ionice", "ionice -c 3 /bin/sh -c 'touch /tmp/pwned'", true),
    ("flock", "flock /tmp/l -c 'touch /tmp/pwned'", true),
    ("nice", "nice /bin/sh -c 'touch /tmp/pwned'", true),
    ("timeout", "timeout 5 /bin/sh -c 'touch /tmp/pwned'", true),
    ("env", "env /bin/sh -c 'touch /tmp/pwned'", true),
    ("run-parts", "run-parts /workspace/rp", true),
    ("start-stop-daemon", "start-stop-daemon -S -x /bin/sh -- -c 'touch /tmp/pwned'", false),
    ("logsave", "logsave /dev/null /bin/sh -c 'touch /tmp/pwned'", true),
    ("script", "script -qc 'touch /tmp/pwned' /dev/null", true),
    ("xargs", "xargs -a /etc/hostname -I{} touch /tmp/pwned", true),
    ("pydoc3", "pydoc3 /tmp/pwmod.py", true),
    ("ld.so", "ld.so /bin/sh -c 'touch /tmp/pwned'", true),
    ("perlbug", "perlbug -s x -r x -c x -e 'touch /tmp/pwned #'", false),
    ("less", "less /etc/hostname", false),
    ("more", "more /etc/hostname", false),
    ("top", "top -b -n 1", false),
    ("dpkg", "dpkg --pre-invoke='touch /tmp/pwned' --configure -a", false),
    ("apt-get", "apt-get update -o APT::Update::Pre-Invoke::='touch /tmp/pwned'", false),
    ("sysctl", "sysctl kernel.core_pattern='|/tmp/s'", false),
    ("date", "date -s 2020-01-01", false),
    ("update-alternatives", "update-alternatives --altdir /tmp/alt --admindir /tmp/adm --install /tmp/pwned x /etc/hostname 0", false),
];

/// Ordinary uses of the same programs, allowlisted alone: still allowed.
const ORDINARY: &[(&str, &str)] = &[
    ("tar", "tar -cf /tmp/ok.tar -C /etc hostname"),
    ("tar", "tar --checkpoint=1 -tf /tmp/a.tar"),
    ("split", "split -l 1 /etc/hostname /tmp/part"),
    ("sort", "sort -rn /etc/hostname"),
    ("rg", "rg -n root /etc/passwd"),
    ("curl", "curl -fsS file:///etc/hostname"),
    ("openssl", "openssl version"),
    ("find", "find /etc -maxdepth 1 -name hostname"),
    ("git", "git -C /tmp/r log --oneline"),
    ("git", "git -C /tmp/r status"),
    ("taskset", "taskset 1 ls"),
    ("nice", "nice ls"),
];

fn config() -> Config {
    let mut config = Config::default();
    let policy = &mut config.policy.sandbox;
    policy.security = Security::Allowlist;
    policy.ask = Ask::Off;
    // `ls` for the wrappers' ordinary uses; everything else comes in alone, per line.
    let mut all: Vec<String> = CATALOGUE
        .iter()
        .map(|(p, _, _)| (*p).to_string())
        .chain(ORDINARY.iter().map(|(p, _)| (*p).to_string()))
        .collect();
    all.push("ls".into());
    all.sort();
    all.dedup();
    policy.allowlist = all;
    config
}

/// `explain` in session `a` with security allowlist, ask off and only `allow` allowlisted:
/// the decision, and the whole verdict for a failure message.
async fn explain(m: &common::TestMoat, command: &str, allow: &[&str]) -> (String, String) {
    let explained = m
        .app
        .exec
        .explain(
            &m.key("a"),
            &ExplainRequest {
                command: command.to_string(),
                security: Some("allowlist".into()),
                ask: Some("off".into()),
                allow: allow.iter().map(|a| (*a).to_string()).collect(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    (
        explained.eval.decision.as_str().to_string(),
        format!("{:?}", explained.eval.decision),
    )
}

fn pwned(m: &common::TestMoat) -> bool {
    m.docker_exec("a", &format!("test -e {MARKER} && echo yes")) == "yes\n"
}

fn clear(m: &common::TestMoat) {
    m.docker_exec("a", &format!("rm -rf {MARKER} /tmp/clone"));
    assert!(!pwned(m));
}

/// The files the payloads use: a script, a curl config, a repository, a run-parts directory,
/// a module, an archive.
const SETUP: &str = r#"set -e
printf 'touch /tmp/pwned\n' > /tmp/s
printf 'output = "/tmp/pwned"\n' > /tmp/curlcfg
git init -q /tmp/r && cd /tmp/r && echo needle > f && git add f
git -c user.name=x -c user.email=x@y commit -qm x
echo changed > f
mkdir -p /workspace/rp && printf '#!/bin/sh\ntouch /tmp/pwned\n' > /workspace/rp/pw && chmod +x /workspace/rp/pw
printf 'open("/tmp/pwned", "w")\n' > /tmp/pwmod.py
tar -cf /tmp/a.tar -C /etc hostname
mkdir -p /tmp/alt /tmp/adm
git init -q /tmp/r2 && cd /tmp/r2 && echo a > a && git add a
git -c user.name=x -c user.email=x@y commit -qm a
echo ready"#;

#[tokio::test]
async fn every_gadget_in_the_catalogue_is_refused_when_its_program_is_allowlisted() {
    let Some(m) = common::moat("t-gadgetsx", config()).await else {
        return;
    };
    m.exec("a", "ls").await;
    assert_eq!(m.docker_exec("a", SETUP), "ready\n");
    let mut controls = 0;
    for (program, command, works) in CATALOGUE {
        clear(&m);
        if *works {
            m.docker_exec("a", command);
            assert!(pwned(&m), "control: {command:?} did not write the marker");
            controls += 1;
            clear(&m);
        }
        let (decision, _) = explain(&m, command, &[program]).await;
        assert_ne!(decision, "allow", "explain allows {command:?}");
        let r = m.exec("a", command).await;
        assert_eq!(r.status(), Some(Status::Failed), "{command}: {}", r.text());
        assert!(
            r.text().starts_with("Exec denied"),
            "{command}: {}",
            r.text()
        );
        assert!(!pwned(&m), "{command} wrote the marker");
    }
    assert!(controls >= 30, "only {controls} payloads proved themselves");
}

#[tokio::test]
async fn ordinary_uses_of_the_same_programs_still_run() {
    let Some(m) = common::moat("t-gadgets-ok", config()).await else {
        return;
    };
    m.exec("a", "ls").await;
    assert_eq!(m.docker_exec("a", SETUP), "ready\n");
    for (program, command) in ORDINARY {
        let (decision, shown) = explain(&m, command, &[program, "ls"]).await;
        assert_eq!(decision, "allow", "{command}: {shown}");
        let r = m.exec("a", command).await;
        assert_eq!(
            r.status(),
            Some(Status::Completed),
            "{command}: {}",
            r.text()
        );
    }
}

/// Polls a background process until its output holds `needle` or `secs` pass.
async fn output_with(m: &common::TestMoat, id: &str, needle: &str, secs: u64) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    let mut last = String::new();
    while std::time::Instant::now() < deadline {
        let mut q = moat::tools::ProcessRequest {
            action: "poll".into(),
            process_id: Some(id.into()),
            ..Default::default()
        };
        q.timeout = Some(200);
        let p = m.process("a", &q).await;
        let out = p.details.aggregated().unwrap_or("");
        if !out.is_empty() && out.contains(needle) {
            return true;
        }
        last = p.text().to_string();
    }
    eprintln!("output so far: {last}");
    false
}

/// git's pager is less, and `!cmd` in less is a shell: an allowlisted `git log` on a PTY
/// must not open one. Control: under full security the same keys reach the shell.
#[tokio::test]
async fn an_allowlisted_git_on_a_pty_opens_no_pager_shell() {
    let mut c = config();
    c.policy.sandbox.security = Security::Full;
    let Some(m) = common::moat("t-gadgets-pager", c).await else {
        return;
    };
    m.exec("a", "ls").await;
    m.docker_exec(
        "a",
        "cd /workspace && git init -q repo && cd repo && seq 1 300 > f && git add f && \
         git -c user.name=x -c user.email=x@y commit -qm x",
    );
    for (security, reaches) in [(None, true), (Some("allowlist"), false)] {
        clear(&m);
        let r = m
            .exec_req(
                "a",
                moat::tools::ExecRequest {
                    command: "git log -p".into(),
                    workdir: Some("repo".into()),
                    security: security.map(str::to_owned),
                    background: Some(true),
                    pty: Some(true),
                    ..Default::default()
                },
            )
            .await;
        assert_eq!(r.status(), Some(Status::Running), "{}", r.text());
        let id = r.details.process_id().unwrap().to_string();
        assert!(
            // Under the pager the first screen is less's (on some terminals it first asks for
            // RETURN, which the newline below gives); under cat it is the log itself.
            output_with(&m, &id, if reaches { "" } else { "+1" }, 10).await,
            "git log printed nothing"
        );
        let q = moat::tools::ProcessRequest {
            action: "write".into(),
            process_id: Some(id.clone()),
            data: Some(format!("\n!touch {MARKER}\n")),
            ..Default::default()
        };
        m.process("a", &q).await;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !pwned(&m) && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        assert_eq!(pwned(&m), reaches, "security {security:?}");
        let kill = moat::tools::ProcessRequest {
            action: "kill".into(),
            process_id: Some(id),
            ..Default::default()
        };
        m.process("a", &kill).await;
    }
}
