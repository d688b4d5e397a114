//! Starting commands with the exec API.
//!
//! Non-PTY commands run with `tty: false`: their output reaches moat through files (see
//! `process::files`), so the attached stream only tells us when the command ended. A PTY
//! exec returns its raw terminal stream instead.

use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use futures::StreamExt;
use tokio::sync::oneshot;

use super::DockerRuntime;
use crate::runtime::{ExecSpec, ExecStarted, ExecTty, RuntimeError};

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
        let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<bytes::Bytes>>(64);
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

    pub(super) async fn capture(
        &self,
        container: &str,
        argv: Vec<String>,
        user: Option<String>,
    ) -> Result<(i64, Vec<u8>), RuntimeError> {
        let options = CreateExecOptions {
            cmd: Some(argv),
            user,
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            ..Default::default()
        };
        let action = || format!("run a helper command in {container}");
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
        let mut out = Vec::new();
        if let StartExecResults::Attached { mut output, .. } = started {
            while let Some(chunk) = output.next().await {
                let chunk = chunk.map_err(|e| RuntimeError::engine(action(), e))?;
                out.extend_from_slice(&chunk.into_bytes());
            }
        }
        let inspect = self
            .docker
            .inspect_exec(&created.id)
            .await
            .map_err(|e| RuntimeError::engine(action(), e))?;
        Ok((inspect.exit_code.unwrap_or(-1), out))
    }
}
