//! Hostile output through the real engine (docs/security.md, "Operator-facing text"): a bare
//! carriage return cannot make later text overwrite earlier text, and an escape sequence that
//! never ends swallows at most the rest of its line, not the lines after it. Checked in the
//! foreground result and in `process poll` and `process log` of a background run.

mod common;

use std::time::Duration;

use moat::config::Config;
use moat::contract::Status;
use moat::tools::ProcessRequest;

/// `printf` text: `before`, an opener that is never terminated, then the numbers 1 to 1000 on
/// lines of their own.
fn flood_after(opener: &str) -> String {
    format!("printf 'before{opener}'; seq 1 1000")
}

/// What must survive of [`flood_after`]: `before`, then every line but the first (the opener
/// swallowed the `1`, which shares its line).
fn expected_flood() -> String {
    let lines: Vec<String> = (2..=1000).map(|i| i.to_string()).collect();
    format!("before\n{}", lines.join("\n"))
}

#[tokio::test]
async fn a_carriage_return_cannot_overwrite_and_an_open_sequence_cannot_swallow_lines() {
    let Some(m) = common::moat("sanitize-e2e", Config::default()).await else {
        return;
    };
    let r = m.exec("s", r"printf 'safe-looking\rEVIL\n'").await;
    assert_eq!(r.text(), "safe-looking\nEVIL", "{:?}", r.text());
    let r = m
        .exec("s", r"printf 'rm -rf /tmp/cache\r\033[Kecho harmless\r\n'")
        .await;
    assert_eq!(
        r.text(),
        "rm -rf /tmp/cache\necho harmless",
        "{:?}",
        r.text()
    );

    for opener in [r"\033]0;title", r"\033[", r"\033[1;2", r"\033P", r"\033_"] {
        let r = m.exec("s", &flood_after(opener)).await;
        assert_eq!(
            r.status(),
            Some(Status::Completed),
            "{opener}: {}",
            r.text()
        );
        assert_eq!(r.text(), expected_flood(), "{opener}");
    }

    // The same output kept for a background process: poll and the re-read record agree.
    let id = m
        .background(
            "s",
            &format!(
                r"printf 'safe-looking\rEVIL\n'; {}",
                flood_after(r"\033]8;;http://x/")
            ),
        )
        .await;
    let mut polled = String::new();
    // The whole output as the last poll holds it (under load it arrives over several polls).
    let mut aggregated = String::new();
    for _ in 0..60 {
        let r = m
            .process(
                "s",
                &ProcessRequest {
                    action: "poll".into(),
                    process_id: Some(id.clone()),
                    timeout: Some(1000),
                    ..Default::default()
                },
            )
            .await;
        polled.push_str(r.text());
        aggregated = r.details.aggregated().unwrap_or_default().to_string();
        if r.details.to_json()["status"] != "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let want = format!("safe-looking\nEVIL\n{}", expected_flood());
    assert!(aggregated.starts_with(&want), "poll: {aggregated:?}");
    assert!(!polled.contains('\r'));
    let log = m
        .process(
            "s",
            &ProcessRequest {
                action: "log".into(),
                process_id: Some(id),
                offset: Some(1),
                limit: Some(2000),
                ..Default::default()
            },
        )
        .await;
    assert!(log.text().starts_with(&want), "log: {:?}", log.text());
    assert_eq!(log.details.to_json()["totalLines"], 1002, "{}", log.details);
}
