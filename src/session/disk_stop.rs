//! How a session over its disk bound is stopped: every process in its container ends, not
//! only the commands moat is following (docs/security.md, "Disk bound").
//!
//! A writer that left its command (`setsid`, a double fork, a child of a background command,
//! with its `MOAT_PROCESS` marker scrubbed) is in no process group moat knows, so ending moat's
//! commands leaves it writing. What every such process shares is the container. Two ways to
//! end them all, tried in this order:
//!
//! 1. **From inside, as the sandbox's own user.** One engine exec (never the helper, which the
//!    sandbox can kill or trace) runs [`stop_argv`] as the container's user. Every process in
//!    a session container runs as that user: the engine starts each exec as it, capabilities
//!    are all dropped (no `CAP_SETUID`, no `CAP_KILL`), and `no-new-privileges` keeps set-id
//!    programs from changing it. Root inside the container could not do better: without
//!    `CAP_KILL` it may signal only its own uid. The script first stops everything at once
//!    (`kill -STOP -1`: every process it may signal but init and itself; on Linux a fork in
//!    progress gets the signal too), then kills each process by pid, and repeats until a pass
//!    finds none it has not seen (gVisor's `kill -1` works from a snapshot of the tasks, so a
//!    child forked meanwhile is found by the next pass). It spares only pid 1 (the engine's
//!    `docker-init`) and the container's main process (`sleep infinity`, init's first child:
//!    the child of pid 1 that started first), whose end would stop the container. moat's
//!    helper is not spared: a process of the sandbox's user can trace it and write through
//!    it, and moat starts a new one with the next command (docs/helper.md, "Fallback").
//!    It forks nothing (shell builtins only), so it runs at a full pids limit too.
//! 2. **The engine kills the container** (`docker kill`), when the script could not run,
//!    did not finish, found a process it may not signal (another uid: an operator's
//!    `cap_add`, `docker exec -u`, or root in an E2B sandbox, which may become root,
//!    docs/security.md, "Root inside E2B's sandboxes"), or the session grew again right
//!    after a stop. That
//!    ends every process whatever its user, under runc and runsc alike; the container is
//!    started again by the next command, with its tmpfs mounts empty.
//!
//! Neither needs the host's view of the container's processes (its pids or cgroups), which
//! a moat in a container of its own does not have.

use std::time::Duration;

use crate::runtime::{Runtime, RuntimeError};

/// Longest the in-container stop may take before the engine kills the container instead.
const STOP_DEADLINE: Duration = Duration::from_secs(10);
/// Passes the script makes at most; each one after the first only finds what forked while
/// the previous one ran (gVisor), so two are the rule.
const MAX_PASSES: u32 = 20;
/// What the script's report line starts with.
const REPORT: &str = "moat-disk-stop";

/// What stopping a session did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stopped {
    /// Every process but init and the main process was ended from inside.
    Inside {
        /// Processes found and ended.
        ended: u32,
    },
    /// The engine killed the container; it starts again with the next command.
    Container {
        /// Why the stop from inside was not enough (a sentence fragment).
        why: String,
    },
}

impl Stopped {
    /// How the stop is described in results, the audit log and `moat doctor`.
    pub fn describe(&self) -> String {
        match self {
            Stopped::Inside { ended } => format!(
                "moat ended every process in the session's container ({ended} ended, those no command was waiting for included)"
            ),
            Stopped::Container { why } => format!(
                "the engine killed the session's container ({why}); the next command starts it again, with /tmp and the other tmpfs mounts empty"
            ),
        }
    }
}

/// Why a stop could not be carried out at all.
#[derive(Debug, thiserror::Error)]
pub enum StopError {
    #[error("kill container {container} after {why}")]
    Kill {
        container: String,
        why: String,
        #[source]
        source: RuntimeError,
    },
}

/// What the in-container script reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    /// Processes it found (not init, the main process or itself; zombies included).
    pub found: u32,
    /// Of those, processes it may not signal (another user).
    pub refused: u32,
    /// Whether its last pass found nothing new (it ran out of passes otherwise).
    pub settled: bool,
}

/// The in-container stop: `sh -c SCRIPT`, run as the container's user (module docs). It
/// prints one line, `moat-disk-stop found=N refused=N settled=0|1`.
pub fn stop_argv() -> Vec<String> {
    // `/proc/PID/stat` is "pid (comm) state ppid … starttime …": comm is the process's to
    // choose, so everything up to the last ") " goes first; starttime is then field 20.
    // Everything stops first, before the main process is looked for: the fewer instructions
    // before it, the less a writer writes and the shorter the time anything could trace this
    // script. Zombies are killed too rather than told apart: a process whose first thread
    // exited reads as a zombie while its other threads run.
    let script = format!(
        r#"kill -STOP -1 2>/dev/null
main=0 first=
for p in /proc/[0-9]*; do
  read -r s 2>/dev/null < "$p/stat" || continue
  s=${{s##*) }}
  set -- $s
  [ "$2" = 1 ] || continue
  n=${{p#/proc/}}
  if [ -z "$first" ] || [ "${{20}}" -lt "$first" ] 2>/dev/null || {{ [ "${{20}}" = "$first" ] && [ "$n" -lt "$main" ]; }}; then first=${{20}} main=$n; fi
done
me=$$ seen=' ' found=0 refused=0 pass=0 new=1
while [ $new = 1 ] && [ $pass -lt {MAX_PASSES} ]; do
  pass=$((pass+1)) new=0
  kill -STOP -1 2>/dev/null
  for p in /proc/[0-9]*; do
    n=${{p#/proc/}}
    case $n in 1|"$me"|"$main") continue ;; esac
    case $seen in *" $n "*) continue ;; esac
    [ -e "$p" ] || continue
    seen="$seen$n " new=1 found=$((found+1))
    kill -KILL "$n" 2>/dev/null || {{ [ -e "$p" ] && refused=$((refused+1)); }}
  done
done
[ "$main" = 0 ] || kill -CONT "$main" 2>/dev/null
echo "{REPORT} found=$found refused=$refused settled=$((1-new))""#
    );
    vec!["sh".into(), "-c".into(), script]
}

/// The script's report from its output (the last report line); `None` when there is none or
/// it does not parse. The output is the sandbox user's process's, so it is read as hostile:
/// bounded, and anything unexpected reads as no report.
pub fn parse_report(out: &str) -> Option<Report> {
    let line = out.lines().rev().take(16).find(|l| l.starts_with(REPORT))?;
    let mut found = None;
    let mut refused = None;
    let mut settled = None;
    for field in line[REPORT.len()..].split_whitespace().take(8) {
        let (k, v) = field.split_once('=')?;
        let v: u32 = v.parse().ok()?;
        match k {
            "found" => found = Some(v),
            "refused" => refused = Some(v),
            "settled" => settled = Some(v == 1),
            _ => return None,
        }
    }
    let (found, refused) = (found?, refused?);
    (refused <= found).then_some(Report {
        found,
        refused,
        settled: settled?,
    })
}

/// Why a report (or its absence) is not a complete stop; `None` when it is.
fn shortfall(run: &Result<(i64, Vec<u8>), String>) -> Result<Report, String> {
    let (code, out) = run.as_ref().map_err(Clone::clone)?;
    let text = String::from_utf8_lossy(out);
    let report = parse_report(&text).ok_or_else(|| {
        format!(
            "the stop from inside reported nothing (exit {code}): {}",
            text.trim().chars().take(200).collect::<String>()
        )
    })?;
    if report.refused > 0 {
        return Err(format!(
            "{} process(es) in it run as another user, which the sandbox's user may not signal",
            report.refused
        ));
    }
    if !report.settled {
        return Err(format!(
            "processes were still appearing after {MAX_PASSES} passes"
        ));
    }
    Ok(report)
}

/// Ends every process in `container` from inside, and has the engine kill the container
/// when that is not enough (module docs).
pub async fn stop_all(engine: &dyn Runtime, container: &str) -> Result<Stopped, StopError> {
    let run = tokio::time::timeout(
        STOP_DEADLINE,
        engine.exec_capture(container, stop_argv(), None),
    )
    .await
    .map_err(|_| format!("the stop from inside did not finish in {STOP_DEADLINE:?}"))
    .and_then(|r| r.map_err(|e| format!("the stop from inside could not run: failed to {e}")));
    match shortfall(&run) {
        Ok(report) => Ok(Stopped::Inside {
            ended: report.found,
        }),
        Err(why) => kill_container(engine, container, why).await,
    }
}

/// Has the engine kill `container`: every process in it ends, whatever its user. Returns
/// once the engine reports it stopped (the kill only sends the signal; a command that came
/// meanwhile would find it still running and fail as it stops), at most [`STOP_DEADLINE`].
pub async fn kill_container(
    engine: &dyn Runtime,
    container: &str,
    why: String,
) -> Result<Stopped, StopError> {
    if let Err(source) = engine.kill_container(container).await {
        return Err(StopError::Kill {
            container: container.to_string(),
            why,
            source,
        });
    }
    let deadline = tokio::time::Instant::now() + STOP_DEADLINE;
    while tokio::time::Instant::now() < deadline {
        match engine.inspect_container(container).await {
            Ok(Some(c)) if c.running => {}
            _ => break,
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(Stopped::Container { why })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_are_read_as_hostile() {
        let ok = Report {
            found: 3,
            refused: 0,
            settled: true,
        };
        let rows: &[(&str, Option<Report>)] = &[
            ("moat-disk-stop found=3 refused=0 settled=1\n", Some(ok)),
            // The last report counts; noise before it is ignored.
            (
                "sh: 1: kill: x\nmoat-disk-stop found=9 refused=9 settled=0\nmoat-disk-stop found=3 refused=0 settled=1",
                Some(ok),
            ),
            ("", None),
            ("moat-disk-stop found=3 refused=0", None),
            ("moat-disk-stop found=3 refused=4 settled=1", None),
            ("moat-disk-stop found=-1 refused=0 settled=1", None),
            ("moat-disk-stop found=3 refused=0 settled=1 extra=2", None),
            ("moat-disk-stop found=99999999999 refused=0 settled=1", None),
            ("moat-disk-stop found refused=0 settled=1", None),
        ];
        for (text, want) in rows {
            assert_eq!(parse_report(text), *want, "{text:?}");
        }
    }

    #[test]
    fn only_a_complete_stop_from_inside_is_enough() {
        let out = |s: &str| Ok((0, s.as_bytes().to_vec()));
        assert!(shortfall(&out("moat-disk-stop found=2 refused=0 settled=1")).is_ok());
        for (run, why) in [
            (
                out("moat-disk-stop found=2 refused=1 settled=1"),
                "another user",
            ),
            (out("moat-disk-stop found=2 refused=0 settled=0"), "passes"),
            (out("Killed"), "reported nothing"),
            (Err("no such container".to_string()), "no such container"),
        ] {
            let e = shortfall(&run).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
    }

    /// Over the fake engine: a complete report is a stop from inside; anything short of it
    /// (a refusal, no report) has the engine kill the container, and that is said.
    #[tokio::test]
    async fn what_is_not_enough_inside_is_the_engines_kill() {
        use crate::runtime::fake::{Call, FakeRuntime};
        let rows: [(&[u8], Option<&str>); 3] = [
            (b"moat-disk-stop found=2 refused=0 settled=1\n", None),
            (
                b"moat-disk-stop found=2 refused=1 settled=1\n",
                Some("another user"),
            ),
            (b"", Some("reported nothing")),
        ];
        for (out, killed) in rows {
            let out = out.to_vec();
            let fake = FakeRuntime::new().with_capture_handler(move |_, _| (0, out.clone()));
            let got = stop_all(&fake, "moat-a").await.unwrap();
            let kills = fake
                .calls()
                .iter()
                .filter(|c| matches!(c, Call::Kill(n) if n == "moat-a"))
                .count();
            match killed {
                None => {
                    assert_eq!(got, Stopped::Inside { ended: 2 });
                    assert_eq!(kills, 0);
                }
                Some(why) => {
                    assert!(
                        matches!(&got, Stopped::Container { why: w } if w.contains(why)),
                        "{got:?}"
                    );
                    assert_eq!(kills, 1);
                    assert!(got
                        .describe()
                        .contains("the engine killed the session's container"));
                }
            }
        }
    }

    /// The script itself, run here against processes of this test's own user: a stopped
    /// group, a child of a process it kills, a fork loop, and a process whose first thread
    /// exited (it reads as a zombie while its other thread runs), all end; it reports what it
    /// found. (It would signal every process of this user on the machine, so it runs in a
    /// pid namespace of its own: `unshare` when this machine allows it; skipped otherwise.)
    #[test]
    fn the_script_ends_everything_but_init_and_the_main_process() {
        let probe = std::process::Command::new("unshare")
            .args([
                "--user",
                "--map-root-user",
                "--pid",
                "--fork",
                "--mount-proc",
                "true",
            ])
            .output();
        if !probe.is_ok_and(|o| o.status.success()) {
            eprintln!("skipping: no unshare of a pid namespace here (the engine tests cover it)");
            return;
        }
        let argv = stop_argv();
        // pid 1 plays docker-init, its first child `sleep` the main process.
        let scene = format!(
            "sleep 1000 & main=$!; sleep 0.1; \
             setsid sh -c 'while :; do sleep 100 & sleep 0.01; done' & \
             (sh -c 'sleep 1000' &); \
             perl -Mthreads -e 'threads->create(sub {{ sleep 1000 }}); syscall(60, 0)' & \
             sleep 0.5; \
             sh -c {script}; \
             sleep 0.2; left=0; for p in /proc/[0-9]*; do \
               [ \"${{p#/proc/}}\" = 1 ] || [ \"${{p#/proc/}}\" = \"$main\" ] || [ \"$p\" = /proc/$$ ] && continue; \
               set -- $p/task/*; [ $# -gt 1 ] && left=$((left+1)) && continue; \
               read -r s < $p/stat 2>/dev/null || continue; s=${{s##*) }}; case $s in Z*) continue;; esac; left=$((left+1)); done; \
             kill -0 $main && echo main-alive; echo left=$left",
            script = shlex::try_quote(&argv[2]).unwrap()
        );
        let out = std::process::Command::new("unshare")
            .args([
                "--user",
                "--map-root-user",
                "--pid",
                "--fork",
                "--mount-proc",
                "sh",
                "-c",
                &scene,
            ])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let report = parse_report(&text).unwrap_or_else(|| panic!("{text}"));
        assert!(
            report.found >= 3 && report.refused == 0 && report.settled,
            "{text}"
        );
        assert!(text.contains("main-alive"), "{text}");
        assert!(text.contains("left=0"), "{text}");
    }
}
