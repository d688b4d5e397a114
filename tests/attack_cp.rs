//! Attack: `moat cp SESSION:PATH DIR` reads an archive the sandbox can still write. A script
//! in the sandbox watches the archive in `/run/moat` (inotify), and at moat's first read
//! rewrites the first header so it claims every byte up to 1 GiB, and writes three 256 MiB
//! file headers there whose data is a hole (free for the sandbox). An unpacker that checks the
//! archive and then reads it again writes 768 MiB after a check that counted 128 MiB
//! (docs/security.md, "moat cp").
//!
//! Control: the script saw moat's first read, rewrote the file, and moat went on reading it
//! after the rewrite (the window was there); the rewritten file, read again as the unpacker
//! before this one did, writes 768 MiB. Defence: moat reads the archive once into a copy of
//! its own, so what lands on the host is what the check counted, byte for byte.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::cli_home::{text, wait_until, TestHome};

/// The real file's size: what the check counts. Large enough that reading it takes moat
/// longer than the script takes to notice the first read and rewrite the file.
const REAL: u64 = 128 << 20;
/// The per-file bound the unpacker before this one read each entry up to.
const PER_FILE: u64 = 256 << 20;

/// The watcher. It writes `evidence.json` (and a sparse copy of the rewritten archive,
/// `evidence.tar`) into /workspace, which the test reads from the host.
const WATCHER: &str = r#"
import ctypes, json, os, select, struct, time
libc = ctypes.CDLL(None, use_errno=True)
IN_ACCESS, IN_CLOSE_WRITE, IN_CLOSE_NOWRITE = 0x1, 0x8, 0x10
fd = libc.inotify_init1(0)
if libc.inotify_add_watch(fd, b"/run/moat", IN_ACCESS | IN_CLOSE_WRITE | IN_CLOSE_NOWRITE) < 0:
    raise SystemExit("inotify_add_watch failed: %d" % ctypes.get_errno())
TAIL = 1 << 30
FILE = 256 << 20
def header(name, kind, size):
    h = bytearray(512)
    h[0:len(name)] = name
    h[100:108] = b"0000644\0"; h[108:116] = b"0000000\0"; h[116:124] = b"0000000\0"
    h[124:136] = b"%011o\0" % size; h[136:148] = b"00000000000\0"
    h[156:157] = kind; h[257:265] = b"ustar  \0"
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\0 " % sum(h)
    return bytes(h)
ev = {"rewritten": False, "access_after": 0, "closed": False, "name": None, "ms": {}}
t0 = None
target, f, written = None, None, False
deadline = time.monotonic() + 300
open("/tmp/watcher.ready", "w").close()
while time.monotonic() < deadline and not ev["closed"]:
    if not select.select([fd], [], [], 1)[0]:
        continue
    buf = os.read(fd, 65536)
    i = 0
    while i < len(buf):
        wd, mask, cookie, n = struct.unpack_from("iIII", buf, i)
        name = buf[i + 16:i + 16 + n].rstrip(b"\0").decode()
        i += 16 + n
        if not (name.startswith("cp-") and name.endswith(".tar")):
            continue
        path = "/run/moat/" + name
        if mask & IN_CLOSE_WRITE and f is None:
            # moat's create, then tar's close: armed once tar wrote something.
            written = os.stat(path).st_size > 0
            target = name
        elif mask & IN_ACCESS and written and name == target:
            if f is None:
                t0 = time.monotonic()
                f = os.open(path, os.O_WRONLY)
                for k in range(3):
                    at = TAIL + k * (512 + FILE)
                    os.pwrite(f, header(b"src/g%d" % k, b"0", FILE), at)
                os.pwrite(f, bytes(1024), TAIL + 3 * (512 + FILE))
                os.pwrite(f, header(b"src/", b"5", TAIL - 512), 0)
                ev["rewritten"] = True
                ev["name"] = name
                ev["ms"]["rewrite"] = (time.monotonic() - t0) * 1000
            else:
                ev["access_after"] += 1
        elif mask & IN_CLOSE_NOWRITE and f is not None and name == target:
            ev["closed"] = True
            ev["ms"]["closed"] = (time.monotonic() - t0) * 1000
if f is not None:
    # The headers of the file as it is now, holes between (moat removed its name; this
    # descriptor stays): what a second reading of it would see.
    r = os.open("/proc/self/fd/%d" % f, os.O_RDONLY)
    out = os.open("/workspace/evidence.tar", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    end = os.fstat(r).st_size
    os.ftruncate(out, end)
    for at in [0] + [TAIL + k * (512 + FILE) for k in range(4)]:
        os.pwrite(out, os.pread(r, 512, at), at)
with open("/workspace/evidence.json.tmp", "w") as w:
    json.dump(ev, w)
os.rename("/workspace/evidence.json.tmp", "/workspace/evidence.json")
"#;

/// What the unpacker before this one wrote from `archive` as it is now: the first `checked`
/// entries (its first pass counted them on the bytes it read then), each regular file's data
/// up to the per-file bound.
fn read_again_as_before(archive: &Path, checked: usize) -> u64 {
    let mut a = tar::Archive::new(std::fs::File::open(archive).unwrap());
    let mut written = 0;
    for entry in a.entries_with_seek().unwrap().take(checked) {
        let entry = entry.unwrap();
        if entry.header().entry_type() == tar::EntryType::Regular {
            written += entry.size().min(PER_FILE);
        }
    }
    written
}

/// The session's workspace on the host (`$MOAT_HOME/workspaces/<slug>`).
fn workspace(home: &TestHome) -> PathBuf {
    let dirs: Vec<_> = std::fs::read_dir(home.path().join("workspaces"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

/// Bytes of every regular file beneath `dir`, and their names.
fn written(dir: &Path) -> (u64, Vec<String>) {
    let (mut bytes, mut names) = (0, Vec::new());
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let meta = e.metadata().unwrap();
            if meta.is_dir() {
                todo.push(e.path());
            } else {
                bytes += meta.len();
                names.push(e.path().strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    names.sort();
    (bytes, names)
}

#[tokio::test]
async fn a_header_rewritten_after_the_check_writes_nothing_the_check_did_not_count() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-cprace");
    let key = home.key("s");
    let exec = |cmd: &str| home.run(&["exec", "--session", &key, "--", cmd]);
    let o = exec(&format!(
        "mkdir -p /workspace/src && head -c {REAL} /dev/urandom > /workspace/src/big && : > /workspace/src/e1 && : > /workspace/src/e2 && sha256sum < /workspace/src/big && cat > /tmp/w.py <<'EOF'\n{WATCHER}\nEOF"
    ));
    assert!(o.status.success(), "{}", text(&o));
    let inside = String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    let o = home.run(&[
        "exec",
        "--session",
        &key,
        "--background",
        "--",
        "python3 /tmp/w.py > /tmp/w.log 2>&1",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    wait_until("the watcher is ready", Duration::from_secs(30), || {
        exec("test -e /tmp/watcher.ready").status.success()
    });

    let dst = tempfile::tempdir().unwrap();
    let o = home.run(&[
        "cp",
        &format!("{key}:/workspace/src"),
        &dst.path().display().to_string(),
    ]);
    let cp = text(&o);
    let ws = workspace(&home);
    wait_until("the watcher's evidence", Duration::from_secs(60), || {
        ws.join("evidence.json").exists()
    });
    let ev: serde_json::Value =
        serde_json::from_slice(&std::fs::read(ws.join("evidence.json")).unwrap()).unwrap();
    let log = String::from_utf8_lossy(&exec("cat /tmp/w.log").stdout).into_owned();

    // Control: the script saw moat's first read and rewrote the file while moat was still
    // reading it (the window was there) ...
    assert_eq!(ev["rewritten"], true, "{ev} {log}\n{cp}");
    assert!(
        ev["access_after"].as_u64().unwrap() >= 1,
        "moat read the file after the rewrite: {ev}\n{cp}"
    );
    // ... and the file, read again as the unpacker before this one did, writes 768 MiB where
    // the check counted 128 MiB (four entries: the directory and three files).
    eprintln!("evidence: {ev}");
    let again = read_again_as_before(&ws.join("evidence.tar"), 4);
    assert_eq!(again, 3 * PER_FILE, "the payload is what it says");

    // Defence: what landed is what the check counted.
    assert!(o.status.success(), "{cp}");
    assert!(
        cp.contains(&format!("3 files, 1 directories, {REAL} bytes")),
        "{cp}"
    );
    let (bytes, names) = written(dst.path());
    assert_eq!(names, ["src/big", "src/e1", "src/e2"], "{cp}");
    assert_eq!(bytes, REAL, "bytes on the host");
    let host = std::process::Command::new("sha256sum")
        .arg(dst.path().join("src/big"))
        .output()
        .unwrap();
    let host = String::from_utf8_lossy(&host.stdout);
    assert!(host.starts_with(&inside), "{host} vs {inside}");
}
