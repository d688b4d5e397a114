//! The files a sandbox plan runs, bound by content like a host plan's (docs/approvals.md,
//! "Files a plan runs"; docs/security.md, "Files a plan runs: bound by content").
//!
//! Which files, and how the plan is rewritten to run copies, is the host's table
//! (`host::scan_with`, `host::rewrite_plan`). What differs is where the files are: inside the
//! container, which the agent controls.
//!
//! - A program word is bound unless it stays in the trusted directories: its own path (as
//!   typed, or the PATH hit of a bare name) and what that finally points to through symlinks,
//!   both as the resolve script found them inside the container, lie in `trusted_dirs`. This is
//!   the allowlist's own view, so a symlink in the workspace that points at `/usr/bin/x` is
//!   bound too (the link could be turned elsewhere before the run).
//! - Each file is read inside the container, as the sandbox user, by [`FETCH_SCRIPT`]: fixed
//!   text that gets the file's path and the run file to fill as arguments, never in its text.
//!   The bytes pass through a run file moat creates (`<id>.bind`) and reads back through its
//!   descriptor, at most [`MAX_BOUND_BYTES`] + 1 bytes. moat hashes what it read itself; the
//!   script's exit code only chooses an error message, and its output is not read at all.
//! - At run time the files are read again the same way, and the bytes moat hashed are written
//!   into read-only copies of moat's in the run directory (`process::approved`); the plan is
//!   rewritten to run the copies at `/run/moat/approved-<id>/<n>/<name>`. The sandbox may
//!   change its own file at any moment, before or after the read: either the copy's hash is not
//!   the approved one (refused, `plan-changed: content of …`) or the copy holds the approved
//!   bytes, which the sandbox user can run but not change.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::prepare::Prepared;
use super::tool::ExecTool;
use crate::approvals::BoundFile;
use crate::contract::Place;
use crate::host::{BindError, Found, Snapshot, MAX_BOUND_BYTES};
use crate::output::escape_display;
use crate::policy::{check_trusted, Parsed, Resolver};
use crate::process::approved::{self, Copies};
use crate::process::RunFiles;

/// Copies the file `$1` into the run file `$2`, at most `$3` bytes. Exit 3: not a regular
/// file (or missing); 4: unreadable. `[ -f ]` and the redirection follow symlinks: the read is
/// the sandbox user's own, inside the container, so a link can only lead to what the sandbox
/// may read anyway. It must stay POSIX sh (plain `sh -c`, no login profile).
pub const FETCH_SCRIPT: &str = r#"[ -f "$1" ] || exit 3
[ -r "$1" ] || exit 4
head -c "$3" < "$1" > "$2" || exit 4"#;

/// How long one read may take. A file swapped for a FIFO between the check and the read
/// would block it for good; the call gives up instead.
const FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the files of sandbox plans are bound: the word in errors.
const PLACE: &str = "sandbox";

/// `path` made absolute against `cwd` with `.` and `..` removed, as text.
fn lexical(cwd: &str, word: &str) -> PathBuf {
    crate::host::lexical_path(Path::new(cwd), Path::new(word))
}

/// The file a program word runs when it must be bound (see the module docs): `None` for a
/// program that stays in the trusted directories, and for a bare name nothing was found for
/// (it cannot run, and a later find is a changed plan).
pub(super) fn sandbox_program(
    word: &str,
    cwd: &str,
    resolver: &dyn Resolver,
    trusted_dirs: &[String],
) -> Option<PathBuf> {
    let own = if word.contains('/') {
        lexical(cwd, word)
    } else {
        PathBuf::from(resolver.resolve(word)?)
    };
    let trusted = |p: &str| check_trusted(p, trusted_dirs).is_ok();
    let own_trusted = own.to_str().is_some_and(trusted);
    let real_trusted = resolver.real(word).is_none_or(|r| trusted(&r));
    (!(own_trusted && real_trusted)).then_some(own)
}

impl Prepared {
    /// The files a sandbox `plan` runs (see [`sandbox_program`]); `parsed` is the request's
    /// command, whose parse serves when the plan is that command.
    pub(super) fn sandbox_files(
        &self,
        parsed: Option<&Parsed>,
        plan: &str,
    ) -> Result<Vec<Found>, BindError> {
        let (cwd, resolver, trusted) = (&self.cwd, &self.resolver, &self.policy.trusted_dirs);
        let program = |word: &str| sandbox_program(word, cwd, resolver, trusted);
        match parsed.filter(|p| p.command() == plan) {
            Some(p) => {
                crate::host::scan_script(&p.script, Path::new(cwd), PLACE, &program, resolver)
            }
            None => crate::host::scan_with(plan, Path::new(cwd), PLACE, &program, resolver),
        }
    }

    /// Whether the sandbox command `parsed` runs a file the sandbox can write (any bound file),
    /// or one moat cannot bind: then an exact-command entry, which names the text and not the
    /// content, does not let it pass (docs/approvals.md, "Files a plan runs").
    pub(super) fn runs_sandbox_files(&self, parsed: &Parsed) -> bool {
        !self.on_host()
            && self
                .sandbox_files(Some(parsed), parsed.command())
                .map_or(true, |f| !f.is_empty())
    }
}

impl ExecTool {
    /// The content bindings of the files a sandbox `plan` runs (the policy's plan for the
    /// command `parsed`), read now, when the approval is made.
    pub(super) async fn bind_sandbox(
        &self,
        p: &Prepared,
        parsed: &Parsed,
        plan: &str,
    ) -> Result<Vec<BoundFile>, BindError> {
        let mut out = Vec::new();
        for f in p.sandbox_files(Some(parsed), plan)? {
            let bytes = self.fetch(p, &f).await?;
            out.push(crate::host::describe_bound(&f, &bytes));
        }
        Ok(out)
    }

    /// The files a sandbox `plan` runs read again, copied read-only into the run directory for
    /// approval `id`, and the plan rewritten to run the copies. What runs is what these
    /// bindings say.
    pub(super) async fn snapshot_sandbox(
        &self,
        p: &Prepared,
        plan: &str,
        id: &str,
    ) -> Result<Snapshot, BindError> {
        let found = p.sandbox_files(None, plan)?;
        if found.is_empty() {
            return Ok(Snapshot {
                plan: plan.to_string(),
                files: Vec::new(),
            });
        }
        let place_err = |f: &Found, e: std::io::Error| BindError::Fetch {
            operand: escape_display(&f.operand),
            reason: format!("place its approved copy in the run directory: {e}"),
        };
        let copies = Copies::create(&p.run_dir, id).map_err(|e| place_err(&found[0], e))?;
        let mut files = Vec::new();
        let mut swaps = Vec::new();
        for (n, f) in found.iter().enumerate() {
            let bytes = self.fetch(p, f).await?;
            let copy = copies
                .add(n, &crate::host::copy_name(f), &bytes)
                .map_err(|e| place_err(f, e))?;
            files.push(crate::host::describe_bound(f, &bytes));
            swaps.push((f.at, copy));
        }
        Ok(Snapshot {
            plan: crate::host::rewrite_plan(plan, &swaps),
            files,
        })
    }

    /// Reads the bytes of `f` inside the container (see the module docs).
    async fn fetch(&self, p: &Prepared, f: &Found) -> Result<Vec<u8>, BindError> {
        let operand = escape_display(&f.operand);
        let shown = escape_display(&f.path.display().to_string());
        let unusable = |reason: String| BindError::Unusable {
            place: PLACE,
            operand: operand.clone(),
            reason,
        };
        let failed = |reason: String| BindError::Fetch {
            operand: operand.clone(),
            reason,
        };
        let Place::Container(container) = &p.place else {
            return Err(failed("the run is not in a container".into()));
        };
        let id = format!("bind-{}", uuid::Uuid::new_v4().simple());
        let files = RunFiles::open(&p.run_dir, &id, Some(p.owner))
            .map_err(|e| failed(format!("open the run directory: {e}")))?;
        files
            .create_bound()
            .map_err(|e| failed(format!("create its run file: {e}")))?;
        let argv = vec![
            "sh".to_string(),
            "-c".to_string(),
            FETCH_SCRIPT.to_string(),
            "moat-bind".to_string(),
            f.path.display().to_string(),
            format!("{}/{id}.bind", crate::wrapper::RUN_DIR),
            (MAX_BOUND_BYTES + 1).to_string(),
        ];
        let ran = tokio::time::timeout(
            FETCH_TIMEOUT,
            self.sessions.commands().exec_capture(container, argv, None),
        )
        .await;
        let read = match ran {
            Err(_) => Err(unusable(format!(
                "reading {shown} in the sandbox took longer than {} s (is it a FIFO or a \
                 device?); run a regular file",
                FETCH_TIMEOUT.as_secs()
            ))),
            Ok(Err(e)) => Err(failed(format!("run the read in the container: {e}"))),
            Ok(Ok((0, _))) => files
                .read_bound(MAX_BOUND_BYTES + 1)
                .map_err(|e| failed(format!("read its run file back: {e}"))),
            Ok(Ok((3, _))) => Err(unusable(format!(
                "{shown} is not a regular file in the sandbox (or does not exist); name a \
                 regular file"
            ))),
            Ok(Ok((4, _))) => Err(unusable(format!(
                "the sandbox user cannot read {shown}; make it readable"
            ))),
            Ok(Ok((code, _))) => Err(failed(format!("the read in the container exited {code}"))),
        };
        files.remove();
        let bytes = read?;
        if bytes.len() as u64 > MAX_BOUND_BYTES {
            return Err(unusable(format!(
                "{shown} is larger than {MAX_BOUND_BYTES} bytes, the most moat binds"
            )));
        }
        Ok(bytes)
    }

    /// Removes the copies a sandbox run of approval `id` used.
    pub(super) fn drop_sandbox_copies(p: &Prepared, id: &str) {
        approved::remove(&p.run_dir, id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::MapResolver;

    fn trusted() -> Vec<String> {
        vec!["/usr/bin".into(), "/bin".into()]
    }

    #[test]
    fn which_program_words_are_bound() {
        let r = MapResolver::new()
            .with("ls", "/usr/bin/ls")
            .with_real("ls", "/usr/bin/ls")
            .with("mytool", "/workspace/bin/mytool")
            .with("sneaky", "/usr/bin/sneaky")
            .with_real("sneaky", "/workspace/sneaky")
            .with_real("./py", "/usr/bin/python3")
            .with_real("/usr/bin/env", "/usr/bin/env");
        let t = trusted();
        let bound = |w: &str| sandbox_program(w, "/workspace", &r, &t);
        assert_eq!(bound("ls"), None);
        assert_eq!(bound("/usr/bin/env"), None);
        // Not found: nothing to bind (the run would not find it either).
        assert_eq!(bound("missing"), None);
        assert_eq!(bound("mytool"), Some("/workspace/bin/mytool".into()));
        // A trusted PATH hit that leads into the sandbox's files.
        assert_eq!(bound("sneaky"), Some("/usr/bin/sneaky".into()));
        // A workspace link to a trusted program: the link could be turned elsewhere.
        assert_eq!(bound("./py"), Some("/workspace/py".into()));
        assert_eq!(bound("/workspace/mytool"), Some("/workspace/mytool".into()));
        assert_eq!(bound("sub/../x"), Some("/workspace/x".into()));
        // Unresolved (no resolution ran): judged by the path as written.
        assert_eq!(bound("/usr/bin/cat"), None);
    }

    /// The fetch script run with the machine's own `sh`: what it copies, and its exit codes.
    #[test]
    fn the_fetch_script() {
        let dir = tempfile::tempdir().unwrap();
        let run = |path: &Path, max: u64| {
            let out = dir.path().join("out");
            std::fs::write(&out, "").unwrap();
            let status = std::process::Command::new("/bin/sh")
                .arg("-c")
                .arg(FETCH_SCRIPT)
                .arg("moat-bind")
                .arg(path)
                .arg(&out)
                .arg(max.to_string())
                .status()
                .unwrap();
            (status.code(), std::fs::read(&out).unwrap())
        };
        let f = dir.path().join("mytool");
        std::fs::write(&f, "#!/bin/sh\necho hi\n").unwrap();
        assert_eq!(run(&f, 100), (Some(0), b"#!/bin/sh\necho hi\n".to_vec()));
        assert_eq!(run(&f, 4), (Some(0), b"#!/b".to_vec()));
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&f, &link).unwrap();
        assert_eq!(run(&link, 100).1, b"#!/bin/sh\necho hi\n".to_vec());
        assert_eq!(run(&dir.path().join("missing"), 100).0, Some(3));
        assert_eq!(run(dir.path(), 100).0, Some(3));
        // A file named like an option is still a path (the script reads it through `<`).
        let odd = dir.path().join("-n");
        std::fs::write(&odd, "x").unwrap();
        assert_eq!(run(&odd, 10), (Some(0), b"x".to_vec()));
    }
}
