//! Which containers the helper serves: session containers, named `moat-<slug>`, whose run
//! directory is `$MOAT_HOME/run/<slug>` (`session::container_name`). Anything else (an image probe's
//! container, an id) goes through the engine's exec.

/// The run-directory slug of a session container's name; `None` for any other name, and for
/// one that could name a path other than a single directory entry.
pub fn slug_of(container: &str) -> Option<&str> {
    let slug = container.strip_prefix("moat-")?;
    let plain = !slug.is_empty()
        && slug.len() <= 63
        && !slug.starts_with('.')
        && slug
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    plain.then_some(slug)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_session_names_have_a_run_directory() {
        let cases = [
            ("moat-main-1a2b3c4d", Some("main-1a2b3c4d")),
            ("moat-a.b_c-12345678", Some("a.b_c-12345678")),
            ("moat-", None),
            ("moat-..", None),
            ("moat-.hidden", None),
            ("moat-a/b", None),
            ("moat-a/../../etc", None),
            ("moat-a b", None),
            ("0123456789abcdef", None),
            ("other-main", None),
        ];
        for (name, want) in cases {
            assert_eq!(slug_of(name), want, "{name}");
        }
        assert_eq!(slug_of(&format!("moat-{}", "a".repeat(64))), None);
    }
}
