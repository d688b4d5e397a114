//! What a finished process's record keeps in memory, against the real engine: a command that
//! printed a megabyte leaves no output buffer behind, and its record still shows the same text
//! (issue 29; docs/ARCHITECTURE.md, "Process memory").

mod common;

use moat::config::Config;
use moat::tools::ProcessRequest;
use sha2::{Digest, Sha256};

/// A text's digest: the test keeps these, not 30 capped views, so its own memory stays out of
/// the figure.
fn digest(text: &str) -> Vec<u8> {
    Sha256::digest(text.as_bytes()).to_vec()
}

/// This process's resident set, in MiB.
fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb / 1024.0
}

#[tokio::test]
async fn finished_records_keep_no_output_buffers_and_show_the_same_text() {
    let Some(m) = common::moat("t-recmem", Config::default()).await else {
        return;
    };
    m.exec("a", "true").await;
    let idle = rss_mib();
    // Numbered lines with escape sequences (the sanitizer drops them), 1.5 MB each run: a
    // replay that put a line in the wrong place, or kept an escape, would show.
    const RUNS: usize = 30;
    let mut kept = Vec::new();
    for run in 0..RUNS {
        let command =
            format!("seq 1 100000 | awk '{{printf \"{run}:%s \\033[1mbold\\033[0m\\n\", $1}}'");
        let r = m.exec("a", &command).await;
        let details = r.details.to_json();
        let id = details["sessionId"].as_str().unwrap_or_else(|| {
            panic!("the output cap cut it, so its record is kept: {}", r.text())
        });
        let aggregated = details["aggregated"].as_str().unwrap();
        assert!(
            aggregated.starts_with(&format!("{run}:1 bold\n"))
                && aggregated.ends_with(&format!("{run}:100000 bold\n"))
                && !aggregated.contains('\x1b'),
            "{}",
            &aggregated[..200]
        );
        kept.push((id.to_string(), digest(aggregated)));
    }
    let grown = rss_mib() - idle;
    for (id, aggregated) in &kept {
        let p = m.app.registry.get(&m.key("a"), id).unwrap();
        let held = p.lock().output.held_bytes();
        assert!(held <= 4 << 10, "{id} holds {held} bytes of output buffers");
        // A poll brings the text back from the log: the same capped view as the result, all
        // of it new to a poll.
        let poll = m
            .process(
                "a",
                &ProcessRequest {
                    action: "poll".into(),
                    process_id: Some(id.clone()),
                    ..Default::default()
                },
            )
            .await;
        let again = poll.details.to_json()["aggregated"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(&digest(&again), aggregated, "{id}");
        assert!(
            poll.text().starts_with(again.trim_end()),
            "{id}: {}",
            &poll.text()[..200]
        );
        assert!(p.lock().output.held_bytes() <= 4 << 10, "{id} after a poll");
    }
    // Each record kept about 1.3 MB before (3 output buffers of the last read and two
    // capped views): 30 of them grew this process by about 40 MiB.
    assert!(
        grown < 8.0,
        "{RUNS} finished records grew RSS by {grown:.1} MiB (idle {idle:.1} MiB)"
    );
    eprintln!("{RUNS} finished records: RSS {idle:.1} MiB idle, +{grown:.1} MiB");
}
