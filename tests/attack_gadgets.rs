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
    ("find", "find /etc/hostname -exec touch /tmp/pwned \\;", true),
    ("find", "find /etc/hostname -fprint /tmp/pwned", true),
    ("iconv", "iconv -f utf-8 -t utf-8 -o /tmp/pwned /etc/hostname", true),
    ("git", "git ls-remote --upload-pack='touch /tmp/pwned; false' /tmp/r", true),
    ("git", "git ls-remote --upload-pa='touch /tmp/pwned; false' /tmp/r", true),
    ("git", "git -C /tmp/r diff --output=/tmp/pwned", true),
    ("git", "git -C /tmp/r grep --open-files-in-pager='touch /tmp/pwned;:' changed", true),
    ("git", "git clone -u 'touch /tmp/pwned; false' /tmp/r /tmp/clone", true),
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
echo ready"#;

#[tokio::test]
async fn every_gadget_in_the_catalogue_is_refused_when_its_program_is_allowlisted() {
    let Some(m) = common::moat("t-gadgets", config()).await else {
        return;
    };
    m.exec("a", "ls").await;
    assert_eq!(m.docker_exec("a", SETUP), "ready\n");
    let key = m.key("a");
    let mut controls = 0;
    for (program, command, works) in CATALOGUE {
        clear(&m);
        if *works {
            m.docker_exec("a", command);
            assert!(pwned(&m), "control: {command:?} did not write the marker");
            controls += 1;
            clear(&m);
        }
        let explained = m
            .app
            .exec
            .explain(
                &key,
                &ExplainRequest {
                    command: (*command).to_string(),
                    security: Some("allowlist".into()),
                    ask: Some("off".into()),
                    allow: vec![(*program).to_string()],
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_ne!(
            explained.eval.decision.as_str(),
            "allow",
            "explain allows {command:?}"
        );
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
    let key = m.key("a");
    for (program, command) in ORDINARY {
        let explained = m
            .app
            .exec
            .explain(
                &key,
                &ExplainRequest {
                    command: (*command).to_string(),
                    security: Some("allowlist".into()),
                    allow: vec![(*program).to_string(), "ls".to_string()],
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(
            explained.eval.decision.as_str(),
            "allow",
            "{command}: {:?}",
            explained.eval.decision
        );
        let r = m.exec("a", command).await;
        assert_eq!(
            r.status(),
            Some(Status::Completed),
            "{command}: {}",
            r.text()
        );
    }
}
