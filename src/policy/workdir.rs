//! The `allowed_workdirs` gate.

use super::paths::{is_within, normalize_absolute};

/// Checks that `cwd` lies inside one of the allowed roots (any cwd when none are configured).
pub(crate) fn check(cwd: &str, allowed: &[String]) -> Result<(), String> {
    if allowed.is_empty() {
        return Ok(());
    }
    let roots = allowed.join(", ");
    let Ok(cwd_normal) = normalize_absolute(cwd) else {
        return Err(format!(
            "working directory {cwd:?} is not a normalized absolute path; allowed roots: {roots}"
        ));
    };
    let inside = allowed
        .iter()
        .filter_map(|root| normalize_absolute(root).ok())
        .any(|root| is_within(cwd_normal, root));
    if inside {
        Ok(())
    } else {
        Err(format!(
            "working directory {cwd} is outside the allowed roots: {roots}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workdir_table() {
        let roots = vec!["/workspace".to_owned(), "/srv/data/".to_owned()];
        let rows = [
            ("/workspace", true),
            ("/workspace/", true),
            ("/workspace/a/b", true),
            ("/srv/data", true),
            ("/srv/data/x", true),
            ("/workspace2", false),
            ("/srv", false),
            ("/", false),
            ("/workspace/../etc", false),
            ("/workspace/./a", false),
            ("workspace", false),
            ("", false),
        ];
        for (cwd, want) in rows {
            assert_eq!(check(cwd, &roots).is_ok(), want, "cwd {cwd:?}");
        }
        assert!(check("anything", &[]).is_ok());
        let err = check("/etc", &roots).unwrap_err();
        assert_eq!(
            err,
            "working directory /etc is outside the allowed roots: /workspace, /srv/data/"
        );
    }
}
