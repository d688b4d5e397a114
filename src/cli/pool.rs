//! The warm pool as the CLI shows it (`moat sessions list --pool`, `moat doctor`), from the
//! daemon's `GET /v1/pool` (docs/pool.md, "Seeing the pool").

use std::process::ExitCode;

use moat::home::Home;
use moat::output::escape_display;
use serde_json::Value;

use super::term::say;

/// `moat sessions list --pool`: each shape with what is ready and how its claims went. It
/// asks the running daemon only: the pool lives in the daemon, and one started to be asked
/// would only be beginning to fill.
pub async fn list(home: &Home, json: bool) -> anyhow::Result<ExitCode> {
    let Some(v) = moat::daemon::pool(home).await? else {
        if json {
            super::term::json_pretty(&serde_json::json!({ "daemon": false, "shapes": [] }))?;
        } else {
            say!(
                "no daemon runs for {}, so nothing is kept warm (the pool lives in the daemon; docs/pool.md)",
                home.root().display()
            );
        }
        return Ok(ExitCode::SUCCESS);
    };
    if json {
        super::term::json_pretty(&v)?;
        return Ok(ExitCode::SUCCESS);
    }
    let shapes = shapes(&v);
    if shapes.is_empty() {
        say!("no warm pool: pool.size is 0 and pool.images keeps none (docs/pool.md, \"The default\")");
    } else {
        say!(
            "{:<18} {:<32} {:>5} {:>5} {:>6} {:>6}",
            "SHAPE",
            "IMAGE",
            "READY",
            "SIZE",
            "HITS",
            "MISSES"
        );
        for s in &shapes {
            say!(
                "{:<18} {:<32} {:>5} {:>5} {:>6} {:>6}",
                escape_display(s["shape"].as_str().unwrap_or("")),
                escape_display(s["image"].as_str().unwrap_or("")),
                count(&s["ready"]),
                s["size"].as_u64().unwrap_or(0),
                s["hits"].as_u64().unwrap_or(0),
                s["misses"].as_u64().unwrap_or(0),
            );
            for name in s["ready"].as_array().into_iter().flatten() {
                say!("  ready {}", escape_display(name.as_str().unwrap_or("")));
            }
            if let Some(e) = s["failing"].as_str() {
                say!(
                    "  failing to fill (tried again in 10 s): {}",
                    escape_display(e)
                );
            }
        }
    }
    let unkept = v["unkeptMisses"].as_u64().unwrap_or(0);
    if unkept > 0 {
        say!("{unkept} new session(s) fit no kept shape and started a container");
    }
    Ok(ExitCode::SUCCESS)
}

/// `moat doctor`'s lines on the pool of the daemon that runs (nothing when none does: the
/// daemon line says so).
pub async fn doctor(home: &Home) {
    let v = match moat::daemon::pool(home).await {
        Ok(Some(v)) => v,
        Ok(None) => return,
        Err(e) => {
            say!("warn  pool: failed to {e}");
            return;
        }
    };
    let shapes = shapes(&v);
    if shapes.is_empty() {
        say!("ok    pool: off, new sessions start a container (pool.size = 0; docs/pool.md, \"The default\")");
    }
    for s in &shapes {
        let mark = if s["failing"].is_string() {
            "warn"
        } else {
            "ok  "
        };
        say!(
            "{mark}  pool: {} (shape {}): {} of {} ready; claims: {} hit(s), {} miss(es)",
            escape_display(s["image"].as_str().unwrap_or("")),
            escape_display(s["shape"].as_str().unwrap_or("")),
            count(&s["ready"]),
            s["size"].as_u64().unwrap_or(0),
            s["hits"].as_u64().unwrap_or(0),
            s["misses"].as_u64().unwrap_or(0),
        );
        if let Some(e) = s["failing"].as_str() {
            say!(
                "      failing to fill (tried again in 10 s): {}",
                escape_display(e)
            );
        }
    }
    let unkept = v["unkeptMisses"].as_u64().unwrap_or(0);
    if unkept > 0 {
        say!("info  pool: {unkept} new session(s) fit no kept shape and started a container (docs/pool.md, \"Shapes\")");
    }
}

fn shapes(v: &Value) -> Vec<Value> {
    v["shapes"].as_array().cloned().unwrap_or_default()
}

fn count(v: &Value) -> usize {
    v.as_array().map_or(0, Vec::len)
}
