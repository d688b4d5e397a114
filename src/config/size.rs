//! Byte sizes written the way Docker users write them (`512m`, `2g`, `1024`).

/// Parses `N`, `Nk`, `Nm`, `Ng` (optionally with a trailing `b`/`ib`, any case) into bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    let t = t
        .strip_suffix("ib")
        .or_else(|| t.strip_suffix('b'))
        .unwrap_or(&t);
    let (digits, mult) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('m') => (&t[..t.len() - 1], 1 << 20),
        Some('g') => (&t[..t.len() - 1], 1 << 30),
        Some('t') => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1),
    };
    let n: u64 = digits
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a size such as 512m or 2g"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("`{text}` is too large"))
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes() {
        let rows: &[(&str, Option<u64>)] = &[
            ("1024", Some(1024)),
            ("2g", Some(2 << 30)),
            ("2G", Some(2 << 30)),
            ("512m", Some(512 << 20)),
            ("512MiB", Some(512 << 20)),
            ("64k", Some(64 << 10)),
            ("1kb", Some(1024)),
            (" 3m ", Some(3 << 20)),
            ("", None),
            ("g", None),
            ("-1m", None),
            ("1.5g", None),
            ("99999999999999t", None),
        ];
        for (input, want) in rows {
            assert_eq!(parse_size(input).ok(), *want, "input {input:?}");
        }
    }
}
