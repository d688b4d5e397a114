//! Why a store operation failed ([`StoreError`]), with the statement it was running.

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("open state database {path}")]
    Open {
        path: String,
        #[source]
        source: rusqlite::Error,
    },
    #[error("{action}")]
    Sql {
        action: &'static str,
        #[source]
        source: rusqlite::Error,
    },
}

pub(crate) trait SqlContext<T> {
    fn ctx(self, action: &'static str) -> Result<T, StoreError>;
}

impl<T> SqlContext<T> for Result<T, rusqlite::Error> {
    fn ctx(self, action: &'static str) -> Result<T, StoreError> {
        self.map_err(|source| StoreError::Sql { action, source })
    }
}
