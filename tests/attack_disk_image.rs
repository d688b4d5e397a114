//! Attack: fill the host's disk past `sandbox.workspace_max_bytes` when each session has its own
//! filesystem of that size (`sandbox.disk_bound`, docs/security.md "Disk bound"). The watchdog
//! this replaces where moat can make one was beaten three ways by a hostile review: a tree too
//! large to walk (over 1,000,000 entries) was measured short and 1.5 GiB went past a 64 MiB
//! bound; one session's big tree slowed every other session's measurements; and short bursts,
//! one per command, each set a new floor, so 8 commands held 9× the bound. Here each attack
//! runs for real and the host's own account of the session's disk (the image file's allocated
//! blocks) stays within the bound.

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use moat::config::{Config, DiskBound};
use moat::contract::Status;

const BOUND_MB: u64 = 64;

/// Makes up to 1,100,000 empty files under /workspace/t (more than the watchdog's walk
/// counts), stopping at the first the filesystem refuses, and says how many it made.
const MANY_FILES: &str = "'\nimport os\nn = 0\nwhile n < 1100000:\n    try:\n        os.close(os.open(\"/workspace/t/%d\" % n, os.O_CREAT | os.O_WRONLY))\n    except OSError:\n        break\n    n += 1\nprint(\"files=%d\" % n)\n'";

fn config() -> Config {
    let mut c = Config::default();
    c.sandbox.workspace_max_bytes = format!("{BOUND_MB}m");
    c.sandbox.disk_bound = DiskBound::Image;
    c
}

/// The session's image file, as the host sees it.
fn image(m: &common::TestMoat, session: &str) -> PathBuf {
    let slug = m.app.sessions.names(&m.key(session)).1.slug;
    m.dir.path().join("disks").join(format!("{slug}.ext4"))
}

/// What the session's disk takes on the host's disk: the image's allocated blocks.
fn host_bytes(m: &common::TestMoat, session: &str) -> u64 {
    std::fs::metadata(image(m, session)).unwrap().blocks() * 512
}

fn assert_within(m: &common::TestMoat, session: &str, what: &str) {
    let used = host_bytes(m, session);
    eprintln!(
        "{what}: the session's disk takes {} MiB of the host's",
        used >> 20
    );
    assert!(
        used <= BOUND_MB << 20,
        "{what}: the session's disk takes {used} bytes on the host, over the {BOUND_MB} MiB bound"
    );
}

/// Skips (outside CI) where this moat cannot make disks; under CI=true the machine must allow it.
fn disks_here() -> bool {
    use moat::session::disk_image::Availability;
    match Availability::probe() {
        Availability::Yes => true,
        Availability::No(why) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "no session disks under CI=true: {why}"
            );
            eprintln!("skipping: no session disks here ({why})");
            false
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_writer_gets_past_the_bound_however_it_writes() {
    if !disks_here() {
        return;
    }
    let Some(m) = common::moat("t-dimg-writers", config()).await else {
        return;
    };
    let r = m.exec("a", "df -k /workspace | tail -1").await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    assert!(image(&m, "a").is_file(), "a disk was made");

    // 1. More entries than any walk would count, then data below them.
    let r = m
        .exec(
            "a",
            &format!(
                "mkdir -p /workspace/t && python3 -c {MANY_FILES}; \
             dd if=/dev/zero of=/workspace/big bs=1M count=1536 2>&1"
            ),
        )
        .await;
    let text = r.text();
    assert!(text.contains("No space left on device"), "{text}");
    assert!(
        text.contains("files=") && !text.contains("files=1100000"),
        "{text}"
    );
    assert_within(&m, "a", "a million files, then 1.5 GiB");

    // Every inode and block of the workspace taken, moat still makes the next command's
    // files (the run directory has a filesystem of its own), so the agent can free space.
    let r = m
        .exec("a", "rm -rf /workspace/t /workspace/big && echo freed")
        .await;
    assert!(r.text().contains("freed"), "{}", r.text());

    // The helper's directory is the one place under /run/moat the sandbox may make entries:
    // filled, with a grabber taking back every inode freed, the run filesystem still has room
    // for moat (the directory lives on the workspace's filesystem).
    let grab = m
        .background(
            "a",
            "cd /run/moat/helper && i=0; while :; do i=$((i+1)); : > f$i 2>/dev/null || { i=$((i-1)); sleep 0.01; }; done",
        )
        .await;
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let r = m.exec("a", "echo alive").await;
    assert!(r.text().contains("alive"), "{}", r.text());
    let kill = moat::tools::ProcessRequest {
        action: "kill".into(),
        process_id: Some(grab),
        ..Default::default()
    };
    m.process("a", &kill).await;
    let r = m
        .exec("a", "rm -rf /run/moat/helper/f* && echo freed")
        .await;
    assert!(r.text().contains("freed"), "{}", r.text());

    // 2. Bursts, one per command, faster than any measuring interval.
    for i in 0..8 {
        let r = m
            .exec(
                "a",
                &format!("dd if=/dev/zero of=/workspace/burst{i} bs=1M count=100 2>&1"),
            )
            .await;
        assert!(
            i == 0 || r.text().contains("No space left on device"),
            "{}",
            r.text()
        );
        assert_within(&m, "a", &format!("burst {i}"));
    }

    // 3. A writer that left its command and keeps writing after the command ended.
    let r = m
        .exec(
            "a",
            "rm -f /workspace/burst*; setsid sh -c 'echo $$ > /tmp/writer; while :; do dd if=/dev/zero of=/workspace/w bs=1M count=512 2>/dev/null; rm -f /workspace/w; done' >/dev/null 2>&1 & echo left",
        )
        .await;
    assert!(r.text().contains("left"), "{}", r.text());
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_within(&m, "a", "a writer left running");

    // 4. The files moat made for it in the run directory, filled: still bounded, and moat
    // still makes the next command's (it keeps blocks there for itself).
    let r = m
        .exec(
            "a",
            "for f in /run/moat/*.exit; do dd if=/dev/zero of=\"$f\" bs=1M count=512 2>&1 | grep -q 'No space left' && echo refused-at-the-bound; done",
        )
        .await;
    assert!(r.text().contains("refused-at-the-bound"), "{}", r.text());
    let run_image = image(&m, "a").with_extension("run.ext4");
    let run_used = std::fs::metadata(&run_image).unwrap().blocks() * 512;
    assert!(
        run_used <= BOUND_MB << 20,
        "the run disk takes {run_used} bytes"
    );
    let r = m.exec("a", "echo still-runs").await;
    assert!(r.text().contains("still-runs"), "{}", r.text());

    // The session is full, not broken: freeing space lets it write again.
    let r = m
        .exec(
            "a",
            "kill -9 -- -$(cat /tmp/writer); sleep 0.2; rm -f /workspace/w; \
             dd if=/dev/zero of=/workspace/small bs=1M count=16 2>/dev/null && echo small-ok",
        )
        .await;
    assert!(r.text().contains("small-ok"), "{}", r.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_neighbours_big_tree_does_not_loosen_another_sessions_bound() {
    if !disks_here() {
        return;
    }
    let mut c = config();
    c.sandbox.workspace_max_bytes = "1g".into();
    let Some(big) = common::moat("t-dimg-tree", c).await else {
        return;
    };
    let Some(m) = common::moat("t-dimg-neighbour", config()).await else {
        return;
    };
    // A tree of a hundred thousand entries in one session...
    let tree = big.exec(
        "a",
        "mkdir -p /workspace/t && cd /workspace/t && seq 1 100000 | xargs touch 2>/dev/null; ls | wc -l",
    );
    // ... while the other writes as fast as it can.
    let write = m.exec("b", "dd if=/dev/zero of=/workspace/f bs=1M count=512 2>&1");
    let (tree, write) = tokio::join!(tree, write);
    assert_eq!(tree.status(), Some(Status::Completed), "{}", tree.text());
    assert!(
        write.text().contains("No space left on device"),
        "{}",
        write.text()
    );
    assert_within(&m, "b", "beside a neighbour's big tree");
}

#[tokio::test]
async fn removing_the_session_removes_its_disk_and_older_sessions_keep_their_files() {
    if !disks_here() {
        return;
    }
    let Some(m) = common::moat("t-dimg-life", config()).await else {
        return;
    };
    let r = m.exec("a", "echo kept > /workspace/note && echo ok").await;
    assert!(r.text().contains("ok"), "{}", r.text());
    let names = m.app.sessions.names(&m.key("a")).1;
    let ws = m.app.sessions.workspace_dir(&names.slug);
    // Seen at the usual place by the operator.
    assert_eq!(
        std::fs::read_to_string(ws.join("note")).unwrap().trim(),
        "kept"
    );
    assert!(image(&m, "a").is_file());
    // The disk's block devices count as places the sandbox writes, for the host gates.
    let disks = m.dir.path().join("disks");
    let devices = moat::session::disk_image::loop_devices_under(&disks);
    assert_eq!(devices.len(), 2, "{devices:?}");
    let roots = m.app.sessions.writable_roots().await;
    for dev in &devices {
        assert!(
            roots.roots().iter().any(|(_, p)| p == dev),
            "{dev:?} is not a writable root: {:?}",
            roots.roots()
        );
    }
    m.app.sessions.remove_with(&m.key("a"), true).await.unwrap();
    assert!(!image(&m, "a").exists(), "the image is deleted");
    assert!(!image(&m, "a").with_extension("run.ext4").exists());
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mounts.contains(&names.slug),
        "no mount of the session is left: {mounts}"
    );

    // A session whose workspace holds files from before it could have a disk keeps them
    // (and is watched instead).
    let old = m.app.sessions.names(&m.key("old")).1;
    let old_ws = m.app.sessions.workspace_dir(&old.slug);
    std::fs::create_dir_all(&old_ws).unwrap();
    std::fs::write(old_ws.join("from-before"), "mine").unwrap();
    let r = m.exec("old", "cat /workspace/from-before").await;
    assert!(r.text().contains("mine"), "{}", r.text());
    assert!(!image(&m, "old").exists());
}

/// A moat that does not share the engine's mount namespace cannot give a session a disk the
/// engine would see: with `disk_bound = "image"` sessions are refused, naming why; with `auto`
/// the session is watched instead. Run for real: the CLI's daemon in a mount namespace of its
/// own (`unshare -m`).
#[tokio::test]
async fn a_moat_outside_the_engines_mount_namespace_never_mounts_an_unbounded_disk() {
    if !disks_here() {
        return;
    }
    let home = common::cli_home::TestHome::configured(
        "t-dimg-ns",
        &format!("[sandbox]\nworkspace_max_bytes = \"{BOUND_MB}m\"\ndisk_bound = \"image\"\n"),
    );
    let unshared = |args: &[&str]| {
        let mut c = std::process::Command::new("unshare");
        c.args(["-m", "--propagation", "private", env!("CARGO_BIN_EXE_moat")])
            .args(args)
            .env("MOAT_HOME", home.path())
            .stdin(std::process::Stdio::null());
        c.output().unwrap()
    };
    let out = unshared(&["exec", "--session", &home.key("a"), "--", "echo", "ran"]);
    let text = common::cli_home::text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("sandbox.disk_bound") && text.contains("mount namespace"),
        "{text}"
    );
    assert!(!text.contains("ran\n"), "{text}");
}

/// `moat sessions rm --purge` deletes the session's disks with it; without `--purge` the
/// workspace, and so its disk, stays.
#[tokio::test]
async fn the_cli_purges_a_session_with_its_disks() {
    if !disks_here() || common::engine().await.is_none() {
        return;
    }
    let home = common::cli_home::TestHome::configured(
        "t-dimg-cli",
        &format!("[sandbox]\nworkspace_max_bytes = \"{BOUND_MB}m\"\ndisk_bound = \"image\"\n"),
    );
    let key = home.key("a");
    let images = || -> Vec<String> {
        std::fs::read_dir(home.path().join("disks"))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.ends_with(".ext4"))
                    .collect()
            })
            .unwrap_or_default()
    };
    let out = home.run(&["exec", "--session", &key, "--", "echo kept > /workspace/f"]);
    assert!(out.status.success(), "{}", common::cli_home::text(&out));
    assert_eq!(images().len(), 2, "{:?}", images());
    let out = home.run(&["sessions", "rm", &key]);
    assert!(out.status.success(), "{}", common::cli_home::text(&out));
    assert_eq!(images().len(), 2, "kept without --purge: {:?}", images());
    let out = home.run(&["exec", "--session", &key, "--", "cat /workspace/f"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("kept"),
        "{}",
        common::cli_home::text(&out)
    );
    let out = home.run(&["sessions", "rm", "--purge", &key]);
    let text = common::cli_home::text(&out);
    assert!(
        out.status.success() && text.contains("workspace was deleted"),
        "{text}"
    );
    assert!(images().is_empty(), "{:?}", images());
}

/// A purge through the API (as `moat sessions rm --purge`) forgets the session's process
/// records, whose open logs would keep its run filesystem alive, and readable, after the purge.
#[tokio::test]
async fn a_purge_leaves_no_filesystem_alive() {
    if !disks_here() || common::engine().await.is_none() {
        return;
    }
    let home = common::cli_home::TestHome::configured(
        "t-dimg-purge",
        &format!("[sandbox]\nworkspace_max_bytes = \"{BOUND_MB}m\"\ndisk_bound = \"image\"\n"),
    );
    let key = home.key("a");
    let out = home.run(&[
        "exec",
        "--session",
        &key,
        "--background",
        "--",
        "echo SANDBOX-MARKER",
    ]);
    assert!(out.status.success(), "{}", common::cli_home::text(&out));
    let out = home.run(&["exec", "--session", &key, "--", "sleep 1; echo done"]);
    assert!(out.status.success(), "{}", common::cli_home::text(&out));
    let disks = home.path().join("disks");
    assert_eq!(
        moat::session::disk_image::loop_devices_under(&disks).len(),
        2
    );
    let out = home.run(&["sessions", "rm", "--purge", &key]);
    assert!(out.status.success(), "{}", common::cli_home::text(&out));
    let mut left = moat::session::disk_image::loop_devices_under(&disks);
    for _ in 0..50 {
        if left.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        left = moat::session::disk_image::loop_devices_under(&disks);
    }
    assert!(left.is_empty(), "still attached after the purge: {left:?}");
}
