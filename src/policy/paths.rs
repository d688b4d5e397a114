//! Path helpers that work on text only: the engine never touches the file system.

/// Returns `path` without trailing slashes if it is absolute and already normalized.
///
/// Normalized means no empty, `.` or `..` components, because without the file system such a
/// path cannot be reasoned about (`/usr/bin/../../tmp/x` is not inside `/usr/bin`).
pub(crate) fn normalize_absolute(path: &str) -> Result<&str, &'static str> {
    if path.is_empty() {
        return Err("empty path");
    }
    if !path.starts_with('/') {
        return Err("not an absolute path");
    }
    if path.chars().any(char::is_control) {
        return Err("contains a control character");
    }
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return Ok("/");
    }
    for component in trimmed.split('/').skip(1) {
        match component {
            "" => return Err("contains an empty path component"),
            "." | ".." => return Err("contains a . or .. component"),
            _ => {}
        }
    }
    Ok(trimmed)
}

/// Whether `path` equals `root` or lies below it, compared by whole components.
///
/// Both must already be normalized; `/workspace2` is not inside `/workspace`.
pub(crate) fn is_within(path: &str, root: &str) -> bool {
    if root == "/" {
        return true;
    }
    match path.strip_prefix(root) {
        Some("") => true,
        Some(rest) => rest.starts_with('/'),
        None => false,
    }
}

/// The last component of a path (the whole string if it has no slash).
pub(crate) fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_absolute_table() {
        let rows: &[(&str, Result<&str, ()>)] = &[
            ("/usr/bin", Ok("/usr/bin")),
            ("/usr/bin/", Ok("/usr/bin")),
            ("/", Ok("/")),
            ("//", Ok("/")),
            ("/workspace/a", Ok("/workspace/a")),
            ("", Err(())),
            ("usr/bin", Err(())),
            ("./x", Err(())),
            ("/usr//bin", Err(())),
            ("/usr/./bin", Err(())),
            ("/usr/bin/..", Err(())),
            ("/usr/../etc", Err(())),
            ("/a\nb", Err(())),
        ];
        for (input, want) in rows {
            assert_eq!(
                normalize_absolute(input).map_err(|_| ()),
                *want,
                "input {input:?}"
            );
        }
    }

    #[test]
    fn is_within_compares_components() {
        let rows = [
            ("/workspace", "/workspace", true),
            ("/workspace/a/b", "/workspace", true),
            ("/workspace2", "/workspace", false),
            ("/work", "/workspace", false),
            ("/anything", "/", true),
            ("/usr/bin/ls", "/usr/bin", true),
            ("/usr/binx/ls", "/usr/bin", false),
        ];
        for (path, root, want) in rows {
            assert_eq!(is_within(path, root), want, "{path} in {root}");
        }
    }

    #[test]
    fn basename_table() {
        assert_eq!(basename("/usr/bin/ls"), "ls");
        assert_eq!(basename("ls"), "ls");
        assert_eq!(basename("/"), "");
    }
}
