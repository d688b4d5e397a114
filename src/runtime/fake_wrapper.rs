//! moat's wrapper as the fake engine plays it, for unit tests of the registry, the supervisor
//! and the tools over [`FakeRuntime`]. No command runs: a started command writes into its run
//! files what the wrapper (src/process/script.rs) would (`<id>.pid`, `.ready`, `.out`,
//! `.exit`), and the short helpers moat runs beside it are answered as a container would
//! answer them: the kill helper (`kill_group_argv`) prints `signalled`, and `killed` when it
//! had to escalate; the liveness check prints `alive` while the group runs; the resolve
//! script finds every bare name in `/usr/bin`; the sweep and the shell check find nothing to
//! report.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use super::fake::{ExecTask, FakeRuntime};
use super::ExecSpec;
use crate::wrapper::PRELUDE;

/// What a played command does.
#[derive(Debug, Clone, PartialEq)]
pub enum Play {
    /// Prints `out` and exits with `code`.
    Exit { out: String, code: i64 },
    /// Prints `out`, then runs until its group is signalled. It dies of the SIGTERM (the
    /// wrapper, which traps TERM, records 143), or with `ignores_term` only of the SIGKILL the
    /// kill helper sends after its grace, which takes the wrapper along: no exit status.
    UntilKilled { out: String, ignores_term: bool },
}

/// A signal the kill helper sent to a group.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Signal {
    Term,
    Kill,
}

/// A live process group.
struct Group {
    /// Delivers the kill helper's signals to the played command.
    signals: mpsc::UnboundedSender<Signal>,
    /// Whether only SIGKILL ends it (the helper then escalates and says `killed`).
    ignores_term: bool,
}

/// See the module docs. Built with a run root and a script; [`Wrapper::engine`] gives the
/// fake engine that plays it.
pub struct Wrapper {
    /// Where the run directories are: a process's is this directory or the child of it that
    /// holds its `<id>.out` (a session's is only known once its container exists).
    run_root: PathBuf,
    /// What each command does, by its text (without the PATH prelude).
    script: Box<dyn Fn(&str) -> Play + Send + Sync>,
    /// Live groups by process-group id.
    groups: Mutex<HashMap<u32, Group>>,
    /// The next group id handed out; above 1, as `RunFiles::read_pgid` requires.
    next_pgid: AtomicU32,
    /// Every command started, in order.
    started: Mutex<Vec<String>>,
    /// Groups the kill helper found alive and signalled, in order.
    signalled: Mutex<Vec<u32>>,
}

impl Wrapper {
    pub fn new(
        run_root: impl Into<PathBuf>,
        script: impl Fn(&str) -> Play + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(Self {
            run_root: run_root.into(),
            script: Box::new(script),
            groups: Mutex::new(HashMap::new()),
            next_pgid: AtomicU32::new(100),
            started: Mutex::new(Vec::new()),
            signalled: Mutex::new(Vec::new()),
        })
    }

    /// The fake engine that plays this wrapper for every exec and helper command.
    pub fn engine(self: &Arc<Self>) -> FakeRuntime {
        let on_exec = self.clone();
        let on_capture = self.clone();
        FakeRuntime::new()
            .with_exec_task(move |spec| on_exec.start(spec))
            .with_capture_handler(move |_, argv| on_capture.capture(argv))
    }

    /// The commands started so far, in order.
    pub fn started(&self) -> Vec<String> {
        self.started.lock().unwrap().clone()
    }

    /// The groups the kill helper signalled so far, in order.
    pub fn signalled(&self) -> Vec<u32> {
        self.signalled.lock().unwrap().clone()
    }

    fn start(self: &Arc<Self>, spec: &ExecSpec) -> ExecTask {
        let Some((id, command)) = wrapped(spec) else {
            return Box::pin(async {});
        };
        let this = self.clone();
        Box::pin(async move { this.run(id, command).await })
    }

    /// What the wrapper does for process `id`, and the command inside it.
    async fn run(self: Arc<Self>, id: String, command: String) {
        self.started.lock().unwrap().push(command.clone());
        let Some(dir) = self.run_dir_of(&id) else {
            return;
        };
        let play = (self.script)(&command);
        let pgid = self.next_pgid.fetch_add(1, Ordering::SeqCst);
        let (tx, mut signals) = mpsc::unbounded_channel();
        let ignores_term = matches!(
            play,
            Play::UntilKilled {
                ignores_term: true,
                ..
            }
        );
        // Known before the pid file says it, so a kill that read the pid finds the group.
        self.groups.lock().unwrap().insert(
            pgid,
            Group {
                signals: tx,
                ignores_term,
            },
        );
        fill(&dir, &id, "pid", &pgid.to_string());
        fill(&dir, &id, "ready", "1");
        match play {
            Play::Exit { out, code } => {
                append(&dir, &id, &out);
                fill(&dir, &id, "exit", &code.to_string());
            }
            Play::UntilKilled { out, .. } => {
                append(&dir, &id, &out);
                loop {
                    match signals.recv().await {
                        Some(Signal::Term) if !ignores_term => {
                            fill(&dir, &id, "exit", "143");
                            break;
                        }
                        Some(Signal::Term) => {}
                        Some(Signal::Kill) | None => break,
                    }
                }
            }
        }
        self.groups.lock().unwrap().remove(&pgid);
    }

    /// The run directory holding process `id`'s files.
    fn run_dir_of(&self, id: &str) -> Option<PathBuf> {
        let log = format!("{id}.out");
        if self.run_root.join(&log).exists() {
            return Some(self.run_root.clone());
        }
        std::fs::read_dir(&self.run_root)
            .ok()?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|d| d.join(&log).exists())
    }

    /// Answers one helper command as a container would.
    fn capture(&self, argv: &[String]) -> (i64, Vec<u8>) {
        let script = argv.get(2).map(String::as_str).unwrap_or_default();
        if let Some(pgid) = group_after(script, "kill -TERM -") {
            return (0, self.kill(pgid).into_bytes());
        }
        if let Some(pgid) = group_after(script, "kill -0 -") {
            let alive = self.groups.lock().unwrap().contains_key(&pgid);
            return (
                0,
                if alive {
                    b"alive\n".to_vec()
                } else {
                    Vec::new()
                },
            );
        }
        // `sh -lc RESOLVE moat-resolve PREPEND REQUEST_PATH CWD NAME…` (tools::exec_tool::prepare).
        if argv.get(3).map(String::as_str) == Some("moat-resolve") {
            let found: String = argv
                .iter()
                .skip(7)
                .filter(|n| !n.contains('/'))
                .map(|n| format!("{n}\t/usr/bin/{n}\t/usr/bin/{n}\n"))
                .collect();
            return (0, found.into_bytes());
        }
        (0, Vec::new())
    }

    /// The kill helper on group `pgid`: TERM, then KILL for a group TERM did not end.
    fn kill(&self, pgid: u32) -> String {
        let groups = self.groups.lock().unwrap();
        let Some(group) = groups.get(&pgid) else {
            // `kill -TERM` failed: the helper exits quietly.
            return String::new();
        };
        self.signalled.lock().unwrap().push(pgid);
        let _ = group.signals.send(Signal::Term);
        if group.ignores_term {
            let _ = group.signals.send(Signal::Kill);
            "signalled\nkilled\n".into()
        } else {
            "signalled\n".into()
        }
    }
}

/// The process id and command of a wrapped exec: `spec.wrapped`, or the wrapper's argv
/// (`sh -c WRAPPER moat <id> <prelude + command>`).
fn wrapped(spec: &ExecSpec) -> Option<(String, String)> {
    let (id, script) = match &spec.wrapped {
        Some(w) => (w.process_id.clone(), w.login.get(2)?.clone()),
        None => match spec.argv.as_slice() {
            [sh, c, _, _, id, script, ..] if sh == "sh" && c == "-c" => {
                (id.clone(), script.clone())
            }
            _ => return None,
        },
    };
    let command = script
        .strip_prefix(PRELUDE)
        .and_then(|s| s.strip_prefix('\n'))
        .unwrap_or(&script)
        .to_string();
    Some((id, command))
}

/// The group id in a helper script that starts with `prefix` and the id.
fn group_after(script: &str, prefix: &str) -> Option<u32> {
    let rest = script.strip_prefix(prefix)?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Writes one of the files moat made for the wrapper; never creates one (a file that was
/// removed or replaced stays as the test left it).
fn fill(dir: &Path, id: &str, ext: &str, text: &str) {
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(dir.join(format!("{id}.{ext}")))
    {
        let _ = f.write_all(text.as_bytes());
    }
}

/// Appends to the log, as `>> <id>.out` does.
fn append(dir: &Path, id: &str, text: &str) {
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.join(format!("{id}.out")))
    {
        let _ = f.write_all(text.as_bytes());
    }
}
