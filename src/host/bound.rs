//! Files a plan runs, bound by content (docs/approvals.md, "Files a plan runs").
//!
//! An approval for `sh build.sh` is worth nothing if `build.sh` can change between the
//! operator reading it and the run. So the files a plan runs — a script operand of a shell or
//! interpreter, a program file an option names (`awk -f`, `make -f`), a file loaded as code
//! besides it (`--rcfile`), the file of `.`/`source`, a program named by a path outside the
//! trusted directories — are found here ([`scan`], [`scan_with`]), hashed when
//! the approval is made, and at run time copied into a place the agent cannot write; the plan
//! is rewritten to run the copies ([`rewrite`]), and the copies' hashes must equal the approved
//! ones. On the host the copies are made here (opened with `O_NOFOLLOW`, bounded, into a
//! private directory); a sandbox plan uses the same detection and rewrite, with its files read
//! inside the container and copied into the run directory (`tools::exec_tool::sandbox_files`).
//! Which word of an interpreter's argv is its program is the policy's interpreter table
//! (`policy::interpreters`), so the file bound is the file the inline-eval check judged.

use std::io::Read;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::approvals::BoundFile;
use crate::policy::{
    command_layers, parse_script, render, PlannedSegment, Redirect, Resolver, Script,
};

/// The largest file moat binds: scripts are small; a larger file is refused, not truncated.
pub const MAX_BOUND_BYTES: u64 = 16 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// The file cannot be bound (missing, not a regular file, too large): the caller's.
    #[error("bind file `{operand}` of a {place} command: {reason}")]
    Unusable {
        /// `host` or `sandbox`: where the plan runs.
        place: &'static str,
        operand: String,
        reason: String,
    },
    #[error("bind file `{operand}` of a {place} command: moat cannot make the command run an approved copy of it ({reason})")]
    NotRewritable {
        /// `host` or `sandbox`: where the plan runs.
        place: &'static str,
        operand: String,
        reason: String,
    },
    #[error("copy file `{operand}` to {dir}")]
    Copy {
        operand: String,
        dir: String,
        #[source]
        source: std::io::Error,
    },
    /// moat could not read a sandbox file through the engine, or not place its copy: moat's.
    #[error("read file `{operand}` of a sandbox command: {reason}")]
    Fetch { operand: String, reason: String },
}

/// One file operand of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The word as written.
    pub operand: String,
    /// Absolute (the cwd joined in front of a relative operand; for a sandbox program found
    /// through PATH, the PATH hit), not resolved: on the host it is opened without following a
    /// final symlink.
    pub path: PathBuf,
    /// Segment index and word index in that segment's argv, for the rewrite.
    pub at: (usize, usize),
}

/// The indices in `layer` of the files `layer[0]` runs: the file of `.`/`source`, or what the
/// interpreter table says the interpreter runs (`policy::interpreters`, the table the
/// inline-eval check reads too), its family found by `names` (the word, its PATH hit, its
/// symlink target) as the policy finds it. `Err` says why that cannot be told.
fn operands_of(layer: &[String], names: &[String]) -> Result<Vec<usize>, (usize, String)> {
    let Some(first) = layer.first() else {
        return Ok(Vec::new());
    };
    if first == "." || first == "source" {
        return Ok(if layer.len() > 1 { vec![1] } else { Vec::new() });
    }
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    crate::policy::interpreters::program_files(layer, &names)
}

fn trusted(path: &Path, trusted_dirs: &[String]) -> bool {
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    trusted_dirs
        .iter()
        .any(|d| real.parent() == Some(Path::new(d.trim_end_matches('/'))))
}

/// Every file a host `plan` runs, relative words taken from `cwd`; a program named by a path
/// is bound unless it lies in `trusted_dirs`. `resolver` holds what the policy resolved the
/// command words to. See [`scan_with`].
pub fn scan(
    plan: &str,
    cwd: &Path,
    trusted_dirs: &[String],
    resolver: &dyn Resolver,
) -> Result<Vec<Found>, BindError> {
    let program = |word: &str| {
        let path = cwd.join(word);
        (word.contains('/') && !trusted(&path, trusted_dirs)).then_some(path)
    };
    scan_with(plan, cwd, "host", &program, resolver)
}

/// Every file `plan` runs on `place` (`host` or `sandbox`), relative operands taken from
/// `cwd`. `program` says for a command word (after wrappers) which file it runs when that file
/// must be bound: `None` for a trusted program. `resolver` holds what the policy resolved the
/// command words to (PATH hit, symlink target): an interpreter is known by those names as the
/// policy knows it, so a link `./py` to python binds the script it runs. Refused when such a
/// file sits in a part of the plan moat cannot rebuild, since then it could not run the
/// approved copy.
pub fn scan_with(
    plan: &str,
    cwd: &Path,
    place: &'static str,
    program: &dyn Fn(&str) -> Option<PathBuf>,
    resolver: &dyn Resolver,
) -> Result<Vec<Found>, BindError> {
    scan_script(&parse_script(plan), cwd, place, program, resolver)
}

/// [`scan_with`] on a plan already parsed (an exec parses its command once).
pub fn scan_script(
    script: &Script,
    cwd: &Path,
    place: &'static str,
    program: &dyn Fn(&str) -> Option<PathBuf>,
    resolver: &dyn Resolver,
) -> Result<Vec<Found>, BindError> {
    let mut found: Vec<Found> = Vec::new();
    let mut moved = false;
    for (s, segment) in script.segments.iter().enumerate() {
        let argv = &segment.argv;
        let before = found.len();
        for layer in command_layers(argv) {
            let mut at: Vec<(usize, PathBuf)> = Vec::new();
            if let Some(path) = program(&layer[0]) {
                at.push((0, path));
            }
            // Code from stdin, a descriptor or a kernel file (`python3 /dev/stdin <<EOF`) is
            // no file to bind: it is inline eval, which asks every time (docs/policy.md).
            let from_stream =
                |i: &usize| crate::policy::unreviewed_source(&layer[*i], &cwd.to_string_lossy());
            let names = crate::policy::interpreters::names_of(&layer[0], resolver);
            let operands =
                operands_of(&layer, &names).map_err(|(at, reason)| BindError::NotRewritable {
                    place,
                    operand: crate::output::escape_display(&layer[at]),
                    reason: crate::output::escape_display(&reason),
                })?;
            at.extend(
                operands
                    .into_iter()
                    .filter(|i| !from_stream(i))
                    .map(|i| (i, cwd.join(&layer[i]))),
            );
            for (idx, path) in at {
                let operand = layer[idx].clone();
                let offset = argv.len().checked_sub(layer.len());
                let located = offset.filter(|o| argv[*o..] == layer[..]);
                let Some(offset) = located else {
                    return Err(BindError::NotRewritable {
                        place,
                        operand,
                        reason: "it runs through find -exec or xargs".into(),
                    });
                };
                let f = Found {
                    operand,
                    path,
                    at: (s, offset + idx),
                };
                if !found.contains(&f) {
                    found.push(f);
                }
            }
        }
        // Files are taken from the workdir; after a `cd` they would name other files.
        if moved && found.len() > before {
            return Err(BindError::NotRewritable {
                place,
                operand: found[before].operand.clone(),
                reason: "a `cd` comes before it; give the directory as the workdir instead".into(),
            });
        }
        moved |= argv
            .first()
            .is_some_and(|w| ["cd", "pushd", "popd"].contains(&w.as_str()));
    }
    if let Some(first) = found.first() {
        let miss = script
            .miss
            .clone()
            .or_else(|| script.segments.iter().find_map(|s| s.miss.clone()))
            .or_else(|| {
                script
                    .segments
                    .iter()
                    .any(|s| s.time_keyword.is_some())
                    .then(|| "the time keyword".to_string())
            });
        if let Some(miss) = miss {
            return Err(BindError::NotRewritable {
                place,
                operand: first.operand.clone(),
                reason: format!("the command has a part moat cannot rebuild: {miss}"),
            });
        }
    }
    Ok(found)
}

/// Reads `f` without following a final symlink, bounded, as a regular file.
fn read(f: &Found) -> Result<Vec<u8>, BindError> {
    let unusable = |reason: String| BindError::Unusable {
        place: "host",
        operand: crate::output::escape_display(&f.operand),
        reason,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(&f.path)
        .map_err(|e| {
            unusable(format!(
                "open {}: {e}",
                crate::output::escape_display(&f.path.display().to_string())
            ))
        })?;
    let meta = file
        .metadata()
        .map_err(|e| unusable(format!("inspect it: {e}")))?;
    if !meta.is_file() {
        return Err(unusable("it is not a regular file".into()));
    }
    if meta.len() > MAX_BOUND_BYTES {
        return Err(unusable(format!(
            "it is {} bytes (limit {MAX_BOUND_BYTES})",
            meta.len()
        )));
    }
    let mut bytes = Vec::new();
    file.take(MAX_BOUND_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| unusable(format!("read it: {e}")))?;
    if bytes.len() as u64 > MAX_BOUND_BYTES {
        return Err(unusable(format!("it grew past {MAX_BOUND_BYTES} bytes")));
    }
    Ok(bytes)
}

/// The binding of `bytes`, read for `f`.
pub fn describe(f: &Found, bytes: &[u8]) -> BoundFile {
    BoundFile {
        operand: f.operand.clone(),
        path: f.path.display().to_string(),
        sha256: hex::encode(Sha256::digest(bytes)),
        size: bytes.len() as u64,
    }
}

/// The name a copy of `f` gets: its base name, with anything but letters, digits and `._-`
/// replaced, so `$0` (and a multi-call program's dispatch on it) keeps its meaning.
pub fn copy_name(f: &Found) -> String {
    let name: String = Path::new(&f.operand)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() || name == "." || name == ".." {
        "file".into()
    } else {
        name
    }
}

/// The content binding of each found file, read now (when the approval is made).
pub fn bind(found: &[Found]) -> Result<Vec<BoundFile>, BindError> {
    found.iter().map(|f| Ok(describe(f, &read(f)?))).collect()
}

/// A bound run: the plan rewritten to run private copies, and the copies' bindings.
#[derive(Debug)]
pub struct Snapshot {
    pub plan: String,
    pub files: Vec<BoundFile>,
}

/// Copies each found file into `dir` (created 0700, each copy 0700 under its own numbered
/// subdirectory so `$0` keeps its base name), binds the bytes copied, and rewrites `plan` to
/// run the copies. What runs is exactly what was hashed.
pub fn snapshot(plan: &str, found: &[Found], dir: &Path) -> Result<Snapshot, BindError> {
    let copy_err = |f: &Found, source: std::io::Error| BindError::Copy {
        operand: crate::output::escape_display(&f.operand),
        dir: dir.display().to_string(),
        source,
    };
    let mut files = Vec::new();
    let mut swaps: Vec<((usize, usize), String)> = Vec::new();
    if found.is_empty() {
        return Ok(Snapshot {
            plan: plan.to_string(),
            files,
        });
    }
    if let Some(parent) = dir.parent() {
        crate::home::ensure_private_dir(parent).map_err(|e| copy_err(&found[0], e))?;
    }
    crate::home::ensure_private_dir(dir).map_err(|e| copy_err(&found[0], e))?;
    for (i, f) in found.iter().enumerate() {
        let bytes = read(f)?;
        let sub = dir.join(i.to_string());
        crate::home::ensure_private_dir(&sub).map_err(|e| copy_err(f, e))?;
        let copy = sub.join(copy_name(f));
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o700)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&copy)
            .map_err(|e| copy_err(f, e))?;
        std::io::Write::write_all(&mut out, &bytes).map_err(|e| copy_err(f, e))?;
        out.set_permissions(std::fs::Permissions::from_mode(0o700))
            .map_err(|e| copy_err(f, e))?;
        drop(out);
        files.push(describe(f, &bytes));
        swaps.push((f.at, copy.display().to_string()));
    }
    Ok(Snapshot {
        plan: rewrite(plan, &swaps),
        files,
    })
}

/// `plan` rendered again from its parse with the words at `swaps` replaced. Only called on
/// plans [`scan_with`] accepted: every segment is modelled.
pub fn rewrite(plan: &str, swaps: &[((usize, usize), String)]) -> String {
    if swaps.is_empty() {
        return plan.to_string();
    }
    let script = parse_script(plan);
    let segments: Vec<PlannedSegment> = script
        .segments
        .iter()
        .enumerate()
        .map(|(s, seg)| {
            let mut argv = seg.argv.clone();
            for ((ss, w), new) in swaps {
                if *ss == s && *w < argv.len() {
                    argv[*w] = new.clone();
                }
            }
            let mut redirects = Vec::new();
            let mut heredoc = None;
            for r in &seg.redirects {
                match r {
                    Redirect::HereDoc { body } => heredoc = Some(body.clone()),
                    other => redirects.extend(other.as_operator().map(str::to_owned)),
                }
            }
            PlannedSegment {
                argv,
                redirects,
                heredoc,
                joiner: seg.joiner.map(|j| j.as_str().to_owned()),
            }
        })
        .collect();
    render(&segments)
}

/// `path` made absolute against `cwd` with `.` and `..` removed, without touching the disk.
pub fn lexical(cwd: &Path, path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in cwd.join(path).components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_string).collect()
    }

    #[test]
    fn operands_that_are_run() {
        let rows: &[(&str, Result<&[usize], &str>)] = &[
            ("sh build.sh", Ok(&[1])),
            ("bash -e -x build.sh arg", Ok(&[3])),
            ("bash -o pipefail build.sh", Ok(&[3])),
            ("bash -- x", Ok(&[2])),
            ("sh -c echo", Ok(&[])),
            ("sh -ec echo", Ok(&[])),
            ("sh", Ok(&[])),
            ("sh -s", Ok(&[])),
            ("bash --rcfile rc -i", Ok(&[2])),
            ("python3 x.py", Ok(&[1])),
            ("python3.11 -u x.py", Ok(&[2])),
            ("python3 -m http.server", Ok(&[])),
            ("python3 -c print(1)", Ok(&[])),
            ("python3 -ic code", Ok(&[])),
            ("python3 -W ignore x.py", Ok(&[3])),
            ("node app.js", Ok(&[1])),
            ("node -e 1", Ok(&[])),
            ("node -r ./hook.js app.js", Ok(&[3])),
            ("deno run x.ts", Ok(&[2])),
            ("perl -e 1", Ok(&[])),
            ("perl x.pl", Ok(&[1])),
            ("perl -MPOSIX x.pl", Ok(&[2])),
            ("awk {print} f", Ok(&[])),
            ("awk -f prog.awk data", Ok(&[2])),
            ("sed -f s.sed f", Ok(&[2])),
            ("sed -nf s.sed f", Ok(&[2])),
            ("sed -n -f s.sed f", Ok(&[3])),
            // A path attached to its option is no word moat can swap for its copy.
            ("sed -fs.sed f", Err("attached to its option")),
            ("awk -f./x.awk f", Err("attached to its option")),
            ("awk --file=x.awk f", Err("attached to its option")),
            ("sed -n s/a/b/ f", Ok(&[])),
            ("perl -l ./x.pl", Ok(&[2])),
            ("perl -l0 -w x.pl", Ok(&[3])),
            (". ./env.sh", Ok(&[1])),
            ("source env.sh", Ok(&[1])),
            ("git status", Ok(&[])),
            // Where the binding's own table used to read an argv otherwise than the policy:
            // a makefile is make's program, bound like a script.
            ("make -f Makefile", Ok(&[2])),
            ("make -C sub -f ci.mk test", Ok(&[4])),
            ("make test", Ok(&[])),
            // `--rcfile` runs besides the script; both are bound.
            ("bash --rcfile rc x.sh", Ok(&[2, 3])),
            // `-C dir` takes a value: the script is the word after it, not `dir`.
            ("ruby -C dir x.rb", Ok(&[3])),
            // fish's `-C` is code, not a file.
            ("fish -C cmd x.fish", Ok(&[])),
            // `-encoding` is one option of tclsh, with a value (once read as `-e`: no file).
            ("tclsh -encoding utf-8 x.tcl", Ok(&[3])),
            ("yash x.sh", Ok(&[1])),
            ("pwsh -File x.ps1", Ok(&[2])),
            ("pwsh -Command x", Ok(&[])),
            ("expect -f x.exp", Ok(&[2])),
            ("gawk -f a.awk -i b.awk x", Ok(&[2, 4])),
            // An option moat does not know, followed by two words: either may be the script.
            (
                "node --weird a.js b.js",
                Err("cannot tell whether it or `b.js`"),
            ),
            ("node --weird a.js", Ok(&[2])),
            ("node --weird=1 a.js b.js", Ok(&[2])),
        ];
        for (cmd, want) in rows {
            let argv = words(cmd);
            match (operands_of(&argv, &argv[..1]), want) {
                (Ok(got), Ok(want)) => assert_eq!(got, *want, "{cmd}"),
                (Err((_, e)), Err(needle)) => assert!(e.contains(needle), "{cmd}: {e}"),
                (got, want) => panic!("{cmd}: got {got:?}, want {want:?}"),
            }
        }
    }

    /// The binding and the policy read every interpreter and every option of the shared table
    /// alike: the file the binding hashes is the file the policy judged, an option the policy
    /// reads as program text never makes the binding take its value for a file, and
    /// allow-always never remembers any of them by path.
    #[test]
    fn binding_and_policy_read_every_listed_interpreter_alike() {
        let samples = crate::policy::interpreters::samples();
        assert!(samples.len() > 300, "{}", samples.len());
        for s in samples {
            let shown = s.argv.join(" ");
            let names = [s.argv[0].as_str()];
            let asks = crate::policy::inline_eval_label(&s.argv, &names, "/w").is_some();
            assert_eq!(asks, s.asks, "policy on {shown}");
            let runs = operands_of(&s.argv, &s.argv[..1]).map_err(|_| ());
            assert_eq!(runs, s.runs, "binding of {shown}");
            // The program the policy resolves (to see through `x.py -> /dev/stdin`) is the
            // file the binding binds.
            if !s.asks {
                let judged = crate::policy::program_path_of(&s.argv);
                let bound = s
                    .runs
                    .as_ref()
                    .ok()
                    .and_then(|r| r.last())
                    .map(|&i| crate::policy::source_word_of(&s.argv[i]));
                if s.runs.is_ok() {
                    assert_eq!(judged, bound, "program of {shown}");
                }
            }
            assert!(
                crate::approvals::is_interpreter(&s.argv[0]),
                "allow-always would remember {} by path",
                s.argv[0]
            );
        }
    }

    #[test]
    fn scan_finds_scripts_and_program_paths_and_refuses_what_it_cannot_rewrite() {
        let cwd = Path::new("/w");
        let trusted = vec!["/usr/bin".to_string(), "/bin".to_string()];
        type Located = Vec<(String, (usize, usize))>;
        let ops = |plan: &str| -> Result<Located, String> {
            scan(plan, cwd, &trusted, &crate::policy::MapResolver::new())
                .map(|f| f.into_iter().map(|f| (f.operand, f.at)).collect())
                .map_err(|e| e.to_string())
        };
        assert_eq!(ops("sh build.sh").unwrap(), [("build.sh".into(), (0, 1))]);
        // Code from stdin or a descriptor is inline eval, not a file.
        assert_eq!(ops("python3 /dev/stdin").unwrap(), []);
        assert_eq!(ops("sh /proc/self/fd/0").unwrap(), []);
        assert_eq!(ops("awk -f /dev/fd/3 x").unwrap(), []);
        assert_eq!(ops("./run.sh -v").unwrap(), [("./run.sh".into(), (0, 0))]);
        assert_eq!(ops("/usr/bin/git status").unwrap(), []);
        assert_eq!(
            ops("env A=1 nice bash -- x.sh && ls").unwrap(),
            [("x.sh".into(), (0, 5))]
        );
        assert_eq!(
            ops("echo hi | python3 a.py").unwrap(),
            [("a.py".into(), (1, 1))]
        );
        let err = ops("sh build.sh $(id)").unwrap_err();
        assert!(err.contains("bind file `build.sh`"), "{err}");
        assert!(err.contains("cannot rebuild"), "{err}");
        assert_eq!(ops("sh -c 'echo $(id)'").unwrap(), []);
        assert_eq!(
            ops("sh build.sh && cd sub").unwrap(),
            [("build.sh".into(), (0, 1))]
        );
        let err = ops("cd sub && sh build.sh").unwrap_err();
        assert!(err.contains("a `cd` comes before it"), "{err}");
        let err = ops("sh build.sh > out.txt").unwrap_err();
        assert!(err.contains("cannot rebuild"), "{err}");
    }

    /// An interpreter is known by what the command word resolves to, as the policy knows it:
    /// `./py x.py` with `./py` a link to python binds `x.py` (by the typed name alone it bound
    /// only `./py`, and `x.py` could be swapped after the approval).
    #[test]
    fn an_interpreter_behind_another_name_binds_its_script() {
        let cwd = Path::new("/w");
        let resolver = crate::policy::MapResolver::new()
            .with_real("./py", "/usr/bin/python3.11")
            .with("runner", "/w/bin/runner")
            .with_real("runner", "/usr/bin/perl");
        let ops = |plan: &str| -> Vec<String> {
            scan(plan, cwd, &["/usr/bin".to_string()], &resolver)
                .unwrap()
                .into_iter()
                .map(|f| f.operand)
                .collect()
        };
        assert_eq!(ops("./py x.py"), ["./py", "x.py"]);
        assert_eq!(ops("./py -c code"), ["./py"]);
        assert_eq!(ops("runner -l x.pl"), ["x.pl"]);
        // The policy judges the same argv by the same names.
        let argv: Vec<String> = ["./py", "-c", "code"].map(String::from).to_vec();
        let names = crate::policy::interpreters::names_of("./py", &resolver);
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        assert_eq!(
            crate::policy::inline_eval_label(&argv, &names, "/w").as_deref(),
            Some("python3.11 -c")
        );
    }

    #[test]
    fn snapshots_run_exactly_the_copied_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().join("cwd");
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::write(cwd.join("build.sh"), "echo one\n").unwrap();
        let found = scan(
            "sh build.sh 2>&1",
            &cwd,
            &[],
            &crate::policy::MapResolver::new(),
        )
        .unwrap();
        let approved = bind(&found).unwrap();
        assert_eq!(approved[0].size, 9);
        let private = dir.path().join("private");
        let snap = snapshot("sh build.sh 2>&1", &found, &private).unwrap();
        assert_eq!(snap.files, approved);
        let copy = private.join("0/build.sh");
        assert_eq!(snap.plan, format!("'sh' '{}' 2>&1", copy.display()));
        assert_eq!(std::fs::read_to_string(&copy).unwrap(), "echo one\n");
        let mode = std::fs::metadata(&private).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        // Swapped afterwards: the next snapshot binds other bytes.
        std::fs::write(cwd.join("build.sh"), "echo two\n").unwrap();
        let again = snapshot("sh build.sh 2>&1", &found, &dir.path().join("p2")).unwrap();
        assert_ne!(again.files[0].sha256, approved[0].sha256);
        // A symlink is not followed; a directory or FIFO is not a file.
        std::fs::remove_file(cwd.join("build.sh")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", cwd.join("build.sh")).unwrap();
        let err = bind(&found).unwrap_err().to_string();
        assert!(
            err.starts_with("bind file `build.sh` of a host command: open "),
            "{err}"
        );
        std::fs::remove_file(cwd.join("build.sh")).unwrap();
        nix::unistd::mkfifo(&cwd.join("build.sh"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let err = bind(&found).unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
    }

    #[test]
    fn lexical_paths() {
        assert_eq!(
            lexical(Path::new("/a/b"), Path::new("../c/./d")),
            Path::new("/a/c/d")
        );
        assert_eq!(
            lexical(Path::new("/a"), Path::new("/x/../y")),
            Path::new("/y")
        );
    }
}
