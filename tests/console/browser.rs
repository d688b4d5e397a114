//! A real browser for the console's tests: Debian's headless chromium, driven over WebDriver
//! by a chromedriver this harness starts on a free loopback port (installed by
//! scripts/setup-test-tools, which scripts/test runs first). Without them the tests skip with a
//! message, except under `CI=true`, where a missing browser is a failure.

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};

pub struct Browser {
    pub client: Client,
    /// chromedriver, leader of its own process group: chromium and its helpers are in it
    /// too, so a test that panics still ends them all.
    driver: Child,
    /// chromium's profile, removed with the browser.
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let group = nix::unistd::Pid::from_raw(self.driver.id() as i32);
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        let _ = self.driver.wait();
    }
}

fn find(candidates: &[&str]) -> Option<PathBuf> {
    candidates
        .iter()
        .map(Path::new)
        .find(|p| p.is_file())
        .map(Path::to_path_buf)
}

/// The browser binary and its driver, if installed.
fn installed() -> Option<(PathBuf, PathBuf)> {
    // Debian's /usr/bin/chromium is a wrapper script; chromedriver wants the binary.
    let chromium = find(&["/usr/lib/chromium/chromium", "/usr/bin/chromium"])?;
    let driver = find(&["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"])?;
    Some((chromium, driver))
}

/// Starts chromedriver and a headless chromium with a 1280×800 window; `None` (skip) when
/// they are missing and CI is not set.
pub async fn start() -> Option<Browser> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let Some((chromium, driver)) = installed() else {
        if ci {
            panic!(
                "chromium or chromedriver is missing under CI=true: run scripts/setup-test-tools"
            );
        }
        eprintln!("skipping: chromium or chromedriver missing (run scripts/setup-test-tools)");
        return None;
    };
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let profile = tempfile::tempdir().unwrap();
    let child = Command::new(driver)
        .arg(format!("--port={port}"))
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("failed to start chromedriver");
    let url = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "chromedriver did not listen on {port}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        serde_json::json!({
            "binary": chromium,
            // CI runs as root: chromium's sandbox needs an unprivileged user.
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,800", "--hide-scrollbars", "--force-device-scale-factor=1",
                     "--no-first-run", "--disable-extensions", "--disable-background-networking",
                     format!("--user-data-dir={}", profile.path().display()),
                     "--disable-component-update", "--disable-sync", "--lang=en-US"],
        }),
    );
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    let client = ClientBuilder::new(connector)
        .capabilities(caps)
        .connect(&url)
        .await
        .expect("failed to open a chromium session over WebDriver");
    let b = Browser {
        client,
        driver: child,
        _profile: profile,
    };
    b.viewport(1280, 800).await;
    Some(b)
}

impl Browser {
    /// Sizes the window so that the page itself (what screenshots show) is `w`×`h`.
    pub async fn viewport(&self, w: u32, h: u32) {
        self.client.set_window_size(w, h).await.unwrap();
        let inner = self
            .js("return [window.innerWidth, window.innerHeight];")
            .await;
        let (iw, ih) = (
            inner[0].as_u64().unwrap() as u32,
            inner[1].as_u64().unwrap() as u32,
        );
        self.client
            .set_window_size(w + w.saturating_sub(iw), h + h.saturating_sub(ih))
            .await
            .unwrap();
    }

    pub async fn goto(&self, url: &str) {
        self.client.goto(url).await.unwrap();
    }

    /// Waits up to `secs` for `css` to match an element whose text contains `text`.
    pub async fn wait_text(
        &self,
        css: &str,
        text: &str,
        secs: u64,
    ) -> fantoccini::elements::Element {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            for el in self
                .client
                .find_all(Locator::Css(css))
                .await
                .unwrap_or_default()
            {
                if el.text().await.is_ok_and(|t| t.contains(text)) {
                    return el;
                }
            }
            if Instant::now() > deadline {
                let src = self.client.source().await.unwrap_or_default();
                panic!("no `{css}` with text {text:?} within {secs}s; page:\n{src}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits up to `secs` until no `css` element contains `text`.
    pub async fn wait_gone(&self, css: &str, text: &str, secs: u64) {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let mut found = false;
            for el in self
                .client
                .find_all(Locator::Css(css))
                .await
                .unwrap_or_default()
            {
                if el.text().await.is_ok_and(|t| t.contains(text)) {
                    found = true;
                }
            }
            if !found {
                return;
            }
            if Instant::now() > deadline {
                let src = self.client.source().await.unwrap_or_default();
                panic!("`{css}` with text {text:?} still there after {secs}s; page:\n{src}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    pub async fn js(&self, script: &str) -> serde_json::Value {
        self.client.execute(script, vec![]).await.unwrap()
    }

    /// Runs `script` as an async function body (it `return`s a promise's value).
    pub async fn js_async(&self, script: &str) -> serde_json::Value {
        let wrapped = format!(
            "const done = arguments[arguments.length - 1]; (async () => {{ {script} }})().then(done, e => done('error: ' + e));"
        );
        self.client.execute_async(&wrapped, vec![]).await.unwrap()
    }

    /// Saves a PNG of the viewport to `NAME.png` in [`screenshot_dir`].
    pub async fn screenshot(&self, name: &str) {
        // Let fonts and the live script settle before the picture.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let png = self.client.screenshot().await.unwrap();
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
    }
}

/// Where the screenshots go: under the build's target directory, so that running the tests
/// leaves the checkout as it was. `scripts/console-screenshots` copies them into
/// docs/console/ when the docs' pictures are refreshed.
pub fn screenshot_dir() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    // A relative CARGO_TARGET_DIR is taken from the manifest's directory, where the scripts
    // run cargo.
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .filter(|d| !d.is_empty())
        .map_or_else(|| manifest.join("target"), |d| manifest.join(d));
    target.join("console-screenshots")
}
