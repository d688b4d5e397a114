//! Starting commands with the exec API.
//!
//! Non-PTY commands run with `tty: false`: their output reaches moat through files (see
//! `process::files`), so the attached stream only tells us when the command ended. A PTY
//! exec returns its raw terminal stream instead, read from a connection moat hijacks itself
//! (see `hijack` for why not through bollard).

use std::path::Path;

use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bytes::BytesMut;
use futures::StreamExt;
use tokio::io::AsyncReadExt;
use tokio::sync::{mpsc, oneshot};

use super::{hijack, DockerRuntime};
use crate::runtime::{ExecSpec, ExecStarted, ExecTty, RuntimeError};

/// Read size for the raw terminal stream.
const TTY_READ: usize = 32 * 1024;

/// The most a helper command (name resolution, kill, health checks) may print: they print a
/// few lines; anything more is refused instead of held in memory.
const MAX_CAPTURE_BYTES: usize = 1 << 20;
/// Longest the engine may take to create and start a short helper command (`capture`).
const CAPTURE_START_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

impl DockerRuntime {
    pub(super) async fn start_exec(
        &self,
        container: &str,
        spec: ExecSpec,
    ) -> Result<ExecStarted, RuntimeError> {
        let options = CreateExecOptions {
            cmd: Some(spec.argv),
            env: Some(spec.env),
            working_dir: spec.workdir,
            user: spec.user,
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            attach_stdin: Some(spec.tty),
            tty: Some(spec.tty),
            ..Default::default()
        };
        let created = self
            .docker
            .create_exec(container, options)
            .await
            .map_err(|e| RuntimeError::engine(format!("create exec in {container}"), e))?;
        if spec.tty {
            if let Some(socket) = &self.socket {
                return self
                    .start_tty(container, socket, created.id, spec.console_size)
                    .await;
            }
            static WARNED: std::sync::Once = std::sync::Once::new();
            WARNED.call_once(|| {
                tracing::warn!(
                    "DOCKER_HOST is not a unix socket: PTY output goes through bollard's \
                     decoder, which stalls on output that starts with bytes 0x00-0x02"
                )
            });
        }
        let started = self
            .docker
            .start_exec(
                &created.id,
                Some(StartExecOptions {
                    detach: false,
                    tty: spec.tty,
                    output_capacity: None,
                }),
            )
            .await
            .map_err(|e| RuntimeError::engine(format!("start exec in {container}"), e))?;
        let StartExecResults::Attached { mut output, input } = started else {
            return Err(RuntimeError::Other {
                action: format!("start exec in {container}"),
                message: "the engine detached an exec moat asked to attach".into(),
            });
        };
        let (done_tx, done_rx) = oneshot::channel();
        if !spec.tty {
            tokio::spawn(async move {
                // The command's output goes to its log file; anything that still arrives
                // here (nothing, normally) is drained so the engine never blocks on us.
                while output.next().await.is_some() {}
                let _ = done_tx.send(());
            });
            return Ok(ExecStarted {
                id: created.id,
                finished: done_rx,
                tty: None,
            });
        }
        let (tx, rx) = mpsc::channel::<std::io::Result<bytes::Bytes>>(64);
        tokio::spawn(async move {
            while let Some(item) = output.next().await {
                let item = item.map(|o| o.into_bytes()).map_err(std::io::Error::other);
                if tx.send(item).await.is_err() {
                    break;
                }
            }
            let _ = done_tx.send(());
        });
        Ok(ExecStarted {
            id: created.id,
            finished: done_rx,
            tty: Some(ExecTty {
                output: Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx)),
                input,
            }),
        })
    }

    /// Starts a created TTY exec over a hijacked connection: raw bytes both ways, and
    /// `finished` fires when the engine closes the stream (the command ended).
    async fn start_tty(
        &self,
        container: &str,
        socket: &Path,
        exec_id: String,
        console_size: Option<(u16, u16)>,
    ) -> Result<ExecStarted, RuntimeError> {
        let version = self.docker.client_version().to_string();
        let hijacked = hijack::start_tty(socket, Some(&version), &exec_id, console_size)
            .await
            .map_err(|e| RuntimeError::engine(format!("start exec in {container}"), e.into()))?;
        let (done_tx, done_rx) = oneshot::channel();
        let (tx, rx) = mpsc::channel::<std::io::Result<bytes::Bytes>>(64);
        let hijack::Hijacked {
            first,
            mut read,
            write,
        } = hijacked;
        tokio::spawn(async move {
            // Once nobody listens, keep reading anyway: `finished` means the stream ended.
            let mut listening = first.is_empty() || tx.send(Ok(first)).await.is_ok();
            let mut buf = BytesMut::with_capacity(TTY_READ);
            loop {
                buf.reserve(TTY_READ);
                match read.read_buf(&mut buf).await {
                    Ok(0) => break,
                    Ok(_) => {
                        let chunk = buf.split().freeze();
                        if listening {
                            listening = tx.send(Ok(chunk)).await.is_ok();
                        }
                    }
                    Err(e) => {
                        if listening {
                            let _ = tx.send(Err(e)).await;
                        }
                        break;
                    }
                }
            }
            drop(tx);
            let _ = done_tx.send(());
        });
        Ok(ExecStarted {
            id: exec_id,
            finished: done_rx,
            tty: Some(ExecTty {
                output: Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx)),
                input: Box::pin(write),
            }),
        })
    }

    pub(super) async fn capture(
        &self,
        container: &str,
        argv: Vec<String>,
        user: Option<String>,
        within: std::time::Duration,
    ) -> Result<(i64, Vec<u8>), RuntimeError> {
        let options = CreateExecOptions {
            cmd: Some(argv),
            user,
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            ..Default::default()
        };
        let action = || format!("run a helper command in {container}");
        // The engine's own start is bounded too: an exec into a container that is being killed
        // or restarted under gVisor can wait in the engine without end, and a liveness check
        // or kill that never answers holds its caller for ever.
        let start = async {
            let created = self
                .docker
                .create_exec(container, options)
                .await
                .map_err(|e| RuntimeError::engine(action(), e))?;
            let started = self
                .docker
                .start_exec(&created.id, None::<StartExecOptions>)
                .await
                .map_err(|e| RuntimeError::engine(action(), e))?;
            Ok::<_, RuntimeError>((created, started))
        };
        let (created, started) = tokio::time::timeout(CAPTURE_START_DEADLINE, start)
            .await
            .map_err(|_| RuntimeError::Other {
                action: action(),
                message: format!("the engine did not start it within {CAPTURE_START_DEADLINE:?}"),
            })??;
        let mut out = Vec::new();
        if let StartExecResults::Attached { mut output, .. } = started {
            let read = async {
                while let Some(chunk) = output.next().await {
                    let chunk = chunk.map_err(|e| RuntimeError::engine(action(), e))?;
                    // A helper's output can be steered from inside (a login profile the
                    // sandbox wrote): past the bound, moat stops reading rather than hold it
                    // all.
                    if out.len() + chunk.as_ref().len() > MAX_CAPTURE_BYTES {
                        return Err(RuntimeError::Other {
                            action: action(),
                            message: format!("its output passed {MAX_CAPTURE_BYTES} bytes"),
                        });
                    }
                    out.extend_from_slice(&chunk.into_bytes());
                }
                Ok(())
            };
            // The sandbox user can stop the command (docs/helper.md, "Deadlines"). The Engine
            // API has no way to end an exec: moat stops waiting, and the command is left to
            // the container.
            match tokio::time::timeout(within, read).await {
                Ok(read) => read?,
                Err(_) => {
                    return Err(RuntimeError::Other {
                        action: action(),
                        message: format!(
                            "it did not finish within {} s; moat stopped waiting for it",
                            within.as_secs()
                        ),
                    })
                }
            }
        }
        let inspect = self
            .docker
            .inspect_exec(&created.id)
            .await
            .map_err(|e| RuntimeError::engine(action(), e))?;
        Ok((inspect.exit_code.unwrap_or(-1), out))
    }

    /// Starts `argv` detached (`docker exec -d`): the engine keeps no stream to moat, so the
    /// command outlives this moat.
    pub(super) async fn start_detached(
        &self,
        container: &str,
        argv: Vec<String>,
    ) -> Result<String, RuntimeError> {
        let action = || format!("start a detached command in {container}");
        let options = CreateExecOptions {
            cmd: Some(argv),
            attach_stdout: Some(false),
            attach_stderr: Some(false),
            ..Default::default()
        };
        let created = self
            .docker
            .create_exec(container, options)
            .await
            .map_err(|e| RuntimeError::engine(action(), e))?;
        self.docker
            .start_exec(
                &created.id,
                Some(StartExecOptions {
                    detach: true,
                    tty: false,
                    output_capacity: None,
                }),
            )
            .await
            .map_err(|e| RuntimeError::engine(action(), e))?;
        Ok(created.id)
    }
}
