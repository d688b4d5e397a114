//! `moat shell [--session NAME]`: an interactive login shell in a session's running container
//! for operators (README, "moat shell"). It starts as the agent's commands start — the
//! container's user, the session's environment and secrets, `sandbox.path_prepend` put in
//! front of PATH by the same prelude after the login profile — in a terminal of the operator's
//! size, kept in step on SIGWINCH. The local terminal is in raw mode while it runs; the
//! terminal stream passes byte for byte, as a terminal must (`term::terminal_bytes`).

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::process::ExitCode;

use anyhow::{bail, Context};
use futures::StreamExt;
use moat::app::App;
use moat::home::Home;
use moat::runtime::ExecSpec;
use moat::wrapper::login_script;
use moat::wrapper::PATH_PREPEND_VAR;
use nix::sys::termios::{self, SetArg, Termios};
use tokio::io::unix::AsyncFd;
use tokio::io::AsyncWriteExt;
use tokio::signal::unix::{signal, SignalKind};

use super::term::terminal_bytes;

/// The operator's terminal size (rows, cols), if stdin is one.
fn terminal_size() -> Option<(u16, u16)> {
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` to the pointer, which outlives the call.
    let r = unsafe { libc::ioctl(0, libc::TIOCGWINSZ, &mut size) };
    (r == 0 && size.ws_row > 0 && size.ws_col > 0).then_some((size.ws_row, size.ws_col))
}

/// Puts stdin's terminal in raw mode and non-blocking reads; restores both when dropped.
struct RawStdin {
    saved: Option<Termios>,
    flags: nix::fcntl::OFlag,
}

impl RawStdin {
    fn new() -> anyhow::Result<Self> {
        let stdin = std::io::stdin();
        let saved = termios::tcgetattr(stdin.as_fd()).ok();
        if let Some(t) = &saved {
            let mut raw = t.clone();
            termios::cfmakeraw(&mut raw);
            termios::tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &raw)
                .context("put the terminal in raw mode")?;
        }
        let flags = nix::fcntl::OFlag::from_bits_truncate(
            nix::fcntl::fcntl(stdin.as_fd(), nix::fcntl::FcntlArg::F_GETFL)
                .context("read stdin's flags")?,
        );
        nix::fcntl::fcntl(
            stdin.as_fd(),
            nix::fcntl::FcntlArg::F_SETFL(flags | nix::fcntl::OFlag::O_NONBLOCK),
        )
        .context("make stdin non-blocking")?;
        Ok(Self { saved, flags })
    }
}

impl Drop for RawStdin {
    fn drop(&mut self) {
        let stdin = std::io::stdin();
        let _ = nix::fcntl::fcntl(stdin.as_fd(), nix::fcntl::FcntlArg::F_SETFL(self.flags));
        if let Some(t) = &self.saved {
            let _ = termios::tcsetattr(stdin.as_fd(), SetArg::TCSANOW, t);
        }
    }
}

/// Stdin's descriptor, for `AsyncFd` (it is never closed while moat runs).
struct Stdin;

impl AsRawFd for Stdin {
    fn as_raw_fd(&self) -> i32 {
        0
    }
}

pub async fn run(home: Home, session: &str) -> anyhow::Result<ExitCode> {
    moat::session::validate_key(session)?;
    let app = App::open(home).await.context("start moat")?;
    let (_, names) = app.sessions.names(session);
    match app.engine.inspect_container(&names.name).await? {
        Some(c) if c.running => {}
        _ => bail!(
            "open a shell in session {session}: it has no running container (start it with `moat exec --session {session} -- true`)"
        ),
    }
    // An interactive shell reads a terminal: input from a pipe or a file would run and then
    // leave the shell waiting at end-of-input for ever.
    use std::io::IsTerminal;
    if !std::io::stdin().is_terminal() {
        bail!(
            "open a shell in session {session}: stdin is not a terminal; run commands from a pipe or a file with `moat exec --session {session} -- 'COMMAND'`"
        );
    }
    let sandbox = &app.config.sandbox;
    let (rows, cols) = terminal_size().unwrap_or((24, 80));
    let mut env = vec![
        format!("{PATH_PREPEND_VAR}={}", sandbox.path_prepend.join(":")),
        format!(
            "TERM={}",
            std::env::var("TERM")
                .ok()
                .filter(|t| !t.is_empty()
                    && t.len() < 64
                    && t.bytes().all(|b| b.is_ascii_graphic()))
                .unwrap_or_else(|| "xterm".into())
        ),
    ];
    env.extend(
        app.secrets
            .for_target(session, false)
            .into_iter()
            .map(|(k, v)| format!("{k}={v}")),
    );
    let shell = sandbox.shell.name();
    let spec = ExecSpec {
        argv: vec![
            shell.into(),
            "-lc".into(),
            login_script(&format!("exec {shell} -i")),
        ],
        env,
        workdir: Some(moat::contract::WORKSPACE_MOUNT.into()),
        user: None,
        tty: true,
        console_size: Some((rows, cols)),
        wrapped: None,
    };
    let started = app.commands.exec(&names.name, spec).await?;
    let Some(mut tty) = started.tty else {
        bail!("open a shell in session {session}: the engine gave no terminal");
    };
    let _ = app.commands.resize_exec(&started.id, rows, cols).await;
    let raw = RawStdin::new()?;
    // SAFETY: descriptor 0 stays open and is neither replaced nor closed while moat runs.
    let stdin = unsafe { AsyncFd::register(Stdin) }.context("watch stdin")?;
    let mut winch = signal(SignalKind::window_change()).context("watch SIGWINCH")?;
    let mut buf = vec![0u8; 8192];
    let mut stdin_open = true;
    loop {
        tokio::select! {
            chunk = tty.output.next() => match chunk {
                Some(Ok(bytes)) => {
                    if terminal_bytes(&bytes).is_err() {
                        break;
                    }
                }
                _ => break,
            },
            ready = stdin.readable(), if stdin_open => {
                let mut guard = ready.context("read stdin")?;
                // SAFETY: descriptor 0 is open for the whole run (see `Stdin`).
                let fd = unsafe { BorrowedFd::borrow_raw(0) };
                match guard.try_io(|_| nix::unistd::read(fd, &mut buf).map_err(std::io::Error::from)) {
                    Ok(Ok(0)) | Ok(Err(_)) => {
                        stdin_open = false;
                        let _ = tty.input.shutdown().await;
                    }
                    Ok(Ok(n)) => {
                        if tty.input.write_all(&buf[..n]).await.is_err() {
                            stdin_open = false;
                        }
                        let _ = tty.input.flush().await;
                    }
                    Err(_would_block) => {}
                }
            }
            _ = winch.recv() => {
                if let Some((r, c)) = terminal_size() {
                    let _ = app.commands.resize_exec(&started.id, r, c).await;
                }
            }
        }
    }
    drop(raw);
    let code = app
        .commands
        .exec_exit_code(&started.id)
        .await
        .ok()
        .flatten()
        .unwrap_or(0);
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}
