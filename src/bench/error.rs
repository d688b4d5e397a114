//! What stops a bench run.

use crate::app::AppError;
use crate::tools::ExecError;

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    App(#[from] AppError),
    #[error(transparent)]
    Exec(#[from] ExecError),
    #[error("run `{0}`")]
    Docker(String),
    #[error("benchmark command failed: {0}")]
    Command(String),
}
