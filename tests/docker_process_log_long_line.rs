//! A single output line longer than a `process log` page (200 000 characters) is read back
//! whole through `moat process log`, page after page, each starting where the last page's
//! note says (docs/mcp.md, `process log`: `charOffset`).

mod common;

use moat::config::Config;

#[tokio::test]
async fn a_line_longer_than_a_page_is_read_back_whole() {
    let Some(m) = common::moat("t-longline", Config::default()).await else {
        return;
    };
    let session = m.key("a");
    // 500 000 characters on one line, between two short ones.
    let id = m
        .background(
            "a",
            "echo before; i=0; while [ $i -lt 5000 ]; do printf '%0100d' $i; i=$((i+1)); done; echo; echo after",
        )
        .await;
    let want: String = (0..5000).map(|i| format!("{i:0100}")).collect();
    let log = |args: &[&str]| {
        let mut all = vec![
            "process",
            "log",
            "--session",
            &session,
            "--id",
            &id,
            "--json",
        ];
        all.extend_from_slice(args);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_moat"))
            .args(&all)
            .env("MOAT_HOME", m.dir.path())
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["content"][0]["text"].as_str().unwrap().to_string()
    };
    // Wait for the end.
    let started = std::time::Instant::now();
    while !log(&["--offset", "3"]).contains("after") {
        assert!(started.elapsed().as_secs() < 60, "never ended");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    // Control: a page of that one line alone is cut, so without reading on inside the line
    // most of it is unreachable.
    let first = log(&["--offset", "2", "--limit", "1"]);
    assert!(first.len() < want.len(), "one page does not hold the line");
    let (mut got, mut at, mut pages) = (String::new(), 0usize, 0);
    loop {
        let text = log(&[
            "--offset",
            "2",
            "--limit",
            "1",
            "--char-offset",
            &at.to_string(),
        ]);
        pages += 1;
        let (body, note) = text.rsplit_once("\n\n[").unwrap_or((&text, ""));
        got.push_str(body);
        match note.split("charOffset=").nth(1) {
            Some(rest) => {
                let next: usize = rest
                    .trim_end_matches(']')
                    .split(|c: char| !c.is_ascii_digit())
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap();
                assert!(note.contains("inside line 2"), "{note}");
                assert_eq!(next, at + body.chars().count(), "{note}");
                at = next;
            }
            None => break,
        }
        assert!(pages < 10, "no end");
    }
    eprintln!("a {}-character line read in {pages} pages", got.len());
    assert_eq!(got.len(), want.len());
    assert!(got == want, "the line read back whole");
}
