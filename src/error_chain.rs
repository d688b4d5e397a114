//! An error with its causes, as `anyhow`'s `{:#}` prints them: the model and the HTTP client
//! need the cause (permission denied, no such file) to act on it.

/// `error: cause: cause …`.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_carry_their_causes() {
        let e = crate::process::ProcessError::Files {
            dir: "/x".into(),
            source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        };
        assert_eq!(
            error_chain(&e),
            "prepare process files in /x: permission denied"
        );
    }
}
