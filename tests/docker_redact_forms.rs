//! Secret redaction as an attack: a command in the sandbox prints its secret encoded
//! (base64, hex, URL-encoded, reversed) instead of verbatim. The tool result must not carry the
//! secret in any of those forms (docs/security.md, "Secrets and redaction").

mod common;

use moat::config::{Config, SecretConfig};

/// Has `?`, `>` and `~`, so its standard and URL-safe base64 differ and URL encoders escape it.
const VALUE: &str = "tok?>~en~~~???-secret9";

/// Encoders: what a command could pipe the secret through. Tools missing from the image are
/// replaced by the same transformation in python3.
const ATTACKS: &[(&str, &str)] = &[
    ("base64", r#"echo "$S" | base64"#),
    ("base64 after 1 byte", r#"printf 'x%s\n' "$S" | base64"#),
    ("base64 after 2 bytes", r#"printf 'xy%s' "$S" | base64 -w0"#),
    (
        "base64 url-safe unpadded",
        r#"printf '%s' "$S" | base64 -w0 | tr '+/' '-_' | tr -d '='"#,
    ),
    (
        "xxd -p",
        r#"if command -v xxd >/dev/null; then echo "$S" | xxd -p; else echo "$S" | od -An -v -tx1 -w64 | tr -d ' '; fi"#,
    ),
    (
        "od hex",
        r#"printf '%s' "$S" | od -An -v -tx1 -w64 | tr -d ' '"#,
    ),
    (
        "hex upper",
        r#"python3 -c 'import os; print(os.environ["S"].encode().hex().upper())'"#,
    ),
    (
        "rev",
        r#"if command -v rev >/dev/null; then echo "$S" | rev; else python3 -c 'import os; print(os.environ["S"][::-1])'; fi"#,
    ),
    (
        "urllib quote",
        r#"python3 -c 'import os, urllib.parse as u; print(u.quote(os.environ["S"]))'"#,
    ),
    (
        "urllib quote safe=''",
        r#"python3 -c 'import os, urllib.parse as u; print(u.quote(os.environ["S"], safe=""))'"#,
    ),
    (
        "urllib quote_plus",
        r#"python3 -c 'import os, urllib.parse as u; print(u.quote_plus(os.environ["S"]))'"#,
    ),
];

#[tokio::test]
async fn encoded_secrets_are_redacted() {
    std::env::set_var("REDACT_FORMS_SOURCE_VAR", VALUE);
    let mut config = Config::default();
    config.secrets.insert(
        "S".into(),
        SecretConfig {
            env: "REDACT_FORMS_SOURCE_VAR".into(),
            sessions: vec!["*".into()],
            ..Default::default()
        },
    );
    let Some(m) = common::moat("redactforms", config).await else {
        return;
    };
    for (name, command) in ATTACKS {
        let r = m.exec("a", command).await;
        let out = r.details.aggregated().unwrap_or_default();
        let text = r.text();
        assert!(
            out.contains("[REDACTED:S]"),
            "{name}: the encoded secret was not recognised: {out:?}"
        );
        assert!(!out.contains(VALUE) && !text.contains(VALUE), "{name}");
        // What is left besides the marker: at most the characters that mix in neighbouring
        // bytes, padding and the encoded newline — nothing that decodes to the secret.
        let left: String = out
            .replace("[REDACTED:S]", "")
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        assert!(left.len() <= 8, "{name}: {out:?} leaves {left:?}");
    }
}
