//! `moat cp`: files between the host and any path of a session's container, for operators
//! (README, "moat cp"; docs/security.md, "moat cp"). The container's root is read-only and the
//! engine's archive upload refuses such a container, so the archive passes through the
//! session's run directory instead: moat creates `<copy id>.tar` there by descriptor, and
//! `tar` runs inside the container to fill or unpack it. An archive that came out of the
//! sandbox is unpacked on the host by `files::unpack`, which makes regular files and
//! directories only, beneath the destination. The sandbox can write its archive at any
//! moment, so moat reads it once, into a file of its own without a name ([`spool`]), and
//! unpacks from that.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use moat::app::App;
use moat::files::unpack::unpack;
use moat::files::Workspace;
use moat::home::Home;
use moat::process::RunFiles;

use super::term::{say, say_err};

/// How long `tar` in the container may take for one copy before moat ends it: 4 GiB at a slow
/// disk's pace, and then some (docs/helper.md, "Deadlines").
const COPY_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30 * 60);

/// One side of a copy.
#[derive(Debug, PartialEq, Eq)]
enum Side {
    Host(PathBuf),
    Container { session: String, path: String },
}

/// `SESSION:/PATH` names a container path when SESSION (up to the first `:/`; keys may hold
/// `:`) is a valid session key; anything else is a host path (`./a:/b`, `/x:/y` stay host
/// paths, as does `main:relative`).
fn side(text: &str) -> Side {
    if let Some(at) = text.find(":/") {
        let (session, path) = (&text[..at], &text[at + 1..]);
        if moat::session::validate_key(session).is_ok()
            && !session.starts_with('.')
            && !session.starts_with('/')
        {
            return Side::Container {
                session: session.to_string(),
                path: path.to_string(),
            };
        }
    }
    Side::Host(PathBuf::from(text))
}

/// Where the archive is inside the container.
fn in_container(id: &str) -> String {
    format!("{}/{id}.tar", moat::session::RUN_MOUNT)
}

pub async fn run(home: Home, src: &str, dst: &str) -> anyhow::Result<ExitCode> {
    let (session, down) = match (side(src), side(dst)) {
        (Side::Container { session, path }, Side::Host(dir)) => (session, Some((path, dir))),
        (Side::Host(_), Side::Container { session, .. }) => (session, None),
        _ => bail!(
            "copy {src} to {dst}: one side must be SESSION:/path in a container and the other a host path"
        ),
    };
    let app = App::open(home).await.context("start moat")?;
    let (_, names) = app.sessions.names(&session);
    match app.engine.inspect_container(&names.name).await? {
        Some(c) if c.running => {}
        _ => bail!(
            "copy to or from session {session}: it has no running container (start it with `moat exec --session {session} -- true`)"
        ),
    }
    let owner = app
        .store
        .session_workspace(&session)?
        .and_then(|w| w.owner())
        .unwrap_or(app.config.sandbox.uid_gid());
    let id = format!("cp-{}", moat::names::generate(|_| false));
    let files = RunFiles::open(app.home.run_dir(&names.slug), &id, Some(owner))
        .context("open the session's run directory")?;
    let outcome = match (down, side(src), side(dst)) {
        (Some((path, dir)), _, _) => download(&app, &names.name, &files, &id, &path, &dir).await,
        (None, Side::Host(from), Side::Container { path, .. }) => {
            upload(&app, &names.name, &files, &id, &from, &path).await
        }
        _ => unreachable!("the sides were matched above"),
    };
    files.remove();
    outcome?;
    Ok(ExitCode::SUCCESS)
}

/// Container path → host directory.
async fn download(
    app: &App,
    container: &str,
    files: &RunFiles,
    id: &str,
    path: &str,
    dir: &Path,
) -> anyhow::Result<()> {
    let p = Path::new(path);
    let (Some(parent), Some(name)) = (p.parent(), p.file_name()) else {
        bail!("copy {path}: name a file or directory below `/`");
    };
    files
        .create_transfer()
        .context("create the archive in the run directory")?;
    let argv = vec![
        "tar".into(),
        "-C".into(),
        parent.display().to_string(),
        "-cf".into(),
        in_container(id),
        "--".into(),
        name.to_string_lossy().into_owned(),
    ];
    let (code, output) = app
        .commands
        .exec_capture_within(container, argv, None, COPY_DEADLINE)
        .await?;
    if code != 0 {
        bail!(
            "copy {path} out of the container (tar exited {code}): {}",
            String::from_utf8_lossy(&output).trim()
        );
    }
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    // Files made on the host are the operator's, not the sandbox user's.
    let me = (
        nix::unistd::geteuid().as_raw(),
        nix::unistd::getegid().as_raw(),
    );
    let dest = Workspace::open(dir, me)?;
    let archive = files.open_transfer().context("open the archive")?;
    let spool = spool(app.home.root()).context("make moat's copy of the archive")?;
    let done = unpack(archive, spool, &dest)?;
    say!(
        "copied {path} to {}: {} files, {} directories, {} bytes",
        dir.display(),
        done.files,
        done.dirs,
        done.bytes
    );
    for s in &done.skipped {
        say_err!("moat: skipped {s}: moat cp makes only files and directories");
    }
    Ok(())
}

/// An empty file for moat's copy of an archive, in `$MOAT_HOME` (which no sandbox sees) and
/// without a name, so nothing but this descriptor reaches it and it is gone when moat is.
fn spool(dir: &Path) -> std::io::Result<std::fs::File> {
    use nix::errno::Errno;
    use nix::fcntl::{open, OFlag};
    use nix::sys::stat::Mode;
    let mode = Mode::from_bits_truncate(0o600);
    match open(
        dir,
        OFlag::O_TMPFILE | OFlag::O_RDWR | OFlag::O_CLOEXEC,
        mode,
    ) {
        Ok(fd) => return Ok(std::fs::File::from(fd)),
        // A file system without unnamed files: a fresh name, removed at once.
        Err(Errno::EOPNOTSUPP | Errno::EISDIR) => {}
        Err(e) => return Err(e.into()),
    }
    let name = dir.join(format!(".cp-{}.spool", moat::names::generate(|_| false)));
    let flags =
        OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_RDWR | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let fd = open(&name, flags, mode)?;
    std::fs::remove_file(&name)?;
    Ok(std::fs::File::from(fd))
}

/// Host path → container directory.
async fn upload(
    app: &App,
    container: &str,
    files: &RunFiles,
    id: &str,
    from: &Path,
    dir: &str,
) -> anyhow::Result<()> {
    let meta =
        std::fs::symlink_metadata(from).with_context(|| format!("read {}", from.display()))?;
    let name = from
        .file_name()
        .with_context(|| format!("copy {}: name a file or directory", from.display()))?;
    let archive = files
        .create_transfer()
        .context("create the archive in the run directory")?;
    let mut builder = tar::Builder::new(archive);
    builder.follow_symlinks(false);
    if meta.is_dir() {
        builder.append_dir_all(name, from)
    } else {
        builder.append_path_with_name(from, name)
    }
    .with_context(|| format!("pack {}", from.display()))?;
    builder
        .into_inner()
        .context("write the archive")?
        .sync_all()
        .context("write the archive")?;
    // Paths travel as arguments, never in the script's text.
    let argv = vec![
        "sh".into(),
        "-c".into(),
        r#"mkdir -p -- "$1" && tar -x --no-same-owner -f "$2" -C "$1""#.into(),
        "moat-cp".into(),
        dir.to_string(),
        in_container(id),
    ];
    let (code, output) = app
        .commands
        .exec_capture_within(container, argv, None, COPY_DEADLINE)
        .await?;
    if code != 0 {
        bail!(
            "copy {} into {dir} (tar exited {code}): {}",
            from.display(),
            String::from_utf8_lossy(&output).trim()
        );
    }
    say!(
        "copied {} to {dir}/{}",
        from.display(),
        name.to_string_lossy()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sides() {
        let c = |s: &str, p: &str| Side::Container {
            session: s.into(),
            path: p.into(),
        };
        let h = |p: &str| Side::Host(PathBuf::from(p));
        let rows = [
            ("main:/tmp/x", c("main", "/tmp/x")),
            ("agent1:chat:/w", c("agent1:chat", "/w")),
            ("main:relative", h("main:relative")),
            ("./main:/x", h("./main:/x")),
            ("/abs:/x", h("/abs:/x")),
            ("file.txt", h("file.txt")),
            ("bad key:/x", h("bad key:/x")),
        ];
        for (text, want) in rows {
            assert_eq!(side(text), want, "{text}");
        }
    }
}
