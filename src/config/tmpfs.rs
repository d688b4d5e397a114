//! How big each tmpfs of a session container may grow, derived from the memory limit.
//!
//! tmpfs pages are charged to the container's memory cgroup and cannot be reclaimed or
//! swapped (swap equals the limit), so a tmpfs the engine sizes by default (half of the
//! host's RAM) lets one `dd` into `/tmp` fill the whole memory limit: from then on every exec
//! is OOM-killed at start, `rm` included, and the session is wedged for good. Every tmpfs
//! therefore gets an explicit size, and all of them together (plus `/dev/shm`) stay within
//! `sandbox.tmpfs_max_bytes`, which leaves the rest of `sandbox.memory` to the processes
//! (docs/security.md, "Sandbox limits").

use super::parse_size;
use crate::output::human_bytes;

/// What `sandbox.tmpfs_max_bytes = "auto"` gives: this fraction (1/N) of the memory limit.
const AUTO_DIVISOR: u64 = 2;
/// The part of the memory limit (1/N) that must stay free of tmpfs: the working reserve
/// that keeps a shell, `rm` and moat's helpers able to start when every tmpfs is full.
const RESERVE_DIVISOR: u64 = 4;
/// The engine's default `/dev/shm`; moat sets it explicitly so it is part of the budget.
const SHM_DEFAULT: u64 = 64 << 20;
/// Smallest size a tmpfs gets; below it even a lock file or a pip build step fails.
const MIN_MOUNT: u64 = 1 << 20;
/// tmpfs sizes are whole pages; rounding down keeps the total within the budget.
const PAGE: u64 = 4096;

/// One tmpfs with the size it gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TmpfsMount {
    /// Mount point inside the container.
    pub path: String,
    /// Bytes it may hold; `None` leaves the engine's default (only without a memory limit).
    pub size: Option<u64>,
}

/// Every tmpfs of a container and `/dev/shm`, sized together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TmpfsPlan {
    /// The `sandbox.tmpfs` mounts, in config order.
    pub mounts: Vec<TmpfsMount>,
    /// Size of `/dev/shm`; `None` leaves the engine's default (64 MiB).
    pub shm: Option<u64>,
    /// What all of them may hold together; `None` without a memory limit and an explicit total.
    pub total: Option<u64>,
}

/// Why a tmpfs configuration cannot be honoured; `key` names the setting to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TmpfsError {
    /// The config key at fault (`sandbox.tmpfs` or `sandbox.tmpfs_max_bytes`).
    pub key: &'static str,
    /// A fragment that completes "failed to accept `key`: …".
    pub message: String,
}

fn err(key: &'static str, message: String) -> TmpfsError {
    TmpfsError { key, message }
}

/// Splits a `sandbox.tmpfs` entry into its path and, with a `PATH:SIZE` entry, the size.
pub fn parse_entry(entry: &str) -> Result<(String, Option<u64>), TmpfsError> {
    let (path, size) = match entry.split_once(':') {
        Some((p, s)) => (p, Some(s)),
        None => (entry, None),
    };
    if !path.starts_with('/') {
        return Err(err(
            "sandbox.tmpfs",
            format!("`{entry}` is not an absolute path (PATH or PATH:SIZE)"),
        ));
    }
    let size = match size {
        None => None,
        Some(s) => {
            let bytes = parse_size(s).map_err(|m| {
                err(
                    "sandbox.tmpfs",
                    format!("`{entry}`: {m} (PATH or PATH:SIZE, e.g. /tmp:512m)"),
                )
            })?;
            if bytes < MIN_MOUNT {
                return Err(err(
                    "sandbox.tmpfs",
                    format!("`{entry}` is smaller than the minimum of 1m"),
                ));
            }
            Some(bytes)
        }
    };
    Ok((path.to_string(), size))
}

/// Sizes every tmpfs for a container whose memory limit is `memory` bytes (0: no limit), with
/// `total` the value of `sandbox.tmpfs_max_bytes` (`auto` or a size) and `entries` those of
/// `sandbox.tmpfs`.
///
/// Mounts with an explicit size get it; `/dev/shm` gets 64 MiB or a quarter of the total,
/// whichever is smaller; the rest of the total is split equally among the other mounts.
pub fn plan(memory: u64, total: &str, entries: &[String]) -> Result<TmpfsPlan, TmpfsError> {
    let parsed = entries
        .iter()
        .map(|e| parse_entry(e))
        .collect::<Result<Vec<_>, _>>()?;
    let total = match total.trim() {
        t if t.eq_ignore_ascii_case("auto") => (memory > 0).then_some(memory / AUTO_DIVISOR),
        t => {
            let bytes = parse_size(t).map_err(|m| {
                err(
                    "sandbox.tmpfs_max_bytes",
                    format!("{m} (or `auto`: half of sandbox.memory)"),
                )
            })?;
            if bytes == 0 {
                return Err(err(
                    "sandbox.tmpfs_max_bytes",
                    "`0` would leave no scratch space; use a size such as 512m, or `auto`".into(),
                ));
            }
            if memory > 0 && bytes > memory - memory / RESERVE_DIVISOR {
                return Err(err(
                    "sandbox.tmpfs_max_bytes",
                    format!(
                        "`{t}` leaves less than a quarter of sandbox.memory ({}) for the processes: \
                         a full tmpfs would then leave no room for any command, `rm` included",
                        human_bytes(memory)
                    ),
                ));
            }
            Some(bytes)
        }
    };
    let Some(total) = total else {
        // No memory limit and no total: nothing to fit inside; explicit sizes still apply.
        return Ok(TmpfsPlan {
            mounts: parsed
                .into_iter()
                .map(|(path, size)| TmpfsMount { path, size })
                .collect(),
            shm: None,
            total: None,
        });
    };
    let shm = SHM_DEFAULT.min(total / 4) / PAGE * PAGE;
    let explicit: u64 = parsed.iter().filter_map(|(_, s)| *s).sum();
    let open = parsed.iter().filter(|(_, s)| s.is_none()).count() as u64;
    let left = total.checked_sub(shm + explicit).ok_or_else(|| {
        err(
            "sandbox.tmpfs",
            format!(
                "the sizes given add up to {} with /dev/shm ({}), over sandbox.tmpfs_max_bytes ({})",
                human_bytes(explicit + shm),
                human_bytes(shm),
                human_bytes(total)
            ),
        )
    })?;
    let share = left.checked_div(open).map_or(0, |s| s / PAGE * PAGE);
    if open > 0 && share < MIN_MOUNT {
        return Err(err(
            "sandbox.tmpfs",
            format!(
                "{open} mount(s) without a size would get {} each from what is left of \
                 sandbox.tmpfs_max_bytes ({}); give the others smaller sizes or raise the total",
                human_bytes(share),
                human_bytes(total)
            ),
        ));
    }
    Ok(TmpfsPlan {
        mounts: parsed
            .into_iter()
            .map(|(path, size)| TmpfsMount {
                path,
                size: Some(size.map_or(share, |s| s / PAGE * PAGE)),
            })
            .collect(),
        shm: Some(shm),
        total: Some(total),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    fn entries(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    /// (memory, total, entries) → sizes of the mounts in order, /dev/shm.
    #[test]
    fn budgets() {
        type Row<'a> = (u64, &'a str, &'a [&'a str], &'a [Option<u64>], Option<u64>);
        let rows: &[Row] = &[
            // The default config: 2 GiB memory, half of it for tmpfs.
            (
                2 * GIB,
                "auto",
                &["/tmp", "/var/tmp:64m", "/run:64m"],
                &[Some(832 * MIB), Some(64 * MIB), Some(64 * MIB)],
                Some(64 * MIB),
            ),
            // Unsized mounts share what is left equally.
            (
                2 * GIB,
                "auto",
                &["/tmp", "/var/tmp", "/run"],
                &[Some(320 * MIB), Some(320 * MIB), Some(320 * MIB)],
                Some(64 * MIB),
            ),
            // A small limit: /dev/shm shrinks to a quarter of the total.
            (
                256 * MIB,
                "auto",
                &["/tmp"],
                &[Some(96 * MIB)],
                Some(32 * MIB),
            ),
            // An explicit total.
            (
                2 * GIB,
                "1g",
                &["/tmp", "/run:64m"],
                &[Some(896 * MIB), Some(64 * MIB)],
                Some(64 * MIB),
            ),
            (
                2 * GIB,
                "1536m",
                &["/tmp"],
                &[Some(1472 * MIB)],
                Some(64 * MIB),
            ),
            // No memory limit: the engine's defaults, except what is given.
            (
                0,
                "auto",
                &["/tmp", "/run:64m"],
                &[None, Some(64 * MIB)],
                None,
            ),
            // An odd memory size still gives whole pages.
            (
                1_000_000_000,
                "auto",
                &["/tmp", "/var/tmp"],
                &[Some(216_444_928), Some(216_444_928)],
                Some(64 * MIB),
            ),
        ];
        for (memory, total, list, sizes, shm) in rows {
            let p = plan(*memory, total, &entries(list)).unwrap();
            let got: Vec<Option<u64>> = p.mounts.iter().map(|m| m.size).collect();
            assert_eq!(&got, sizes, "{memory} {total} {list:?}");
            assert_eq!(p.shm, *shm, "{memory} {total} {list:?}");
            if let Some(t) = p.total {
                let sum: u64 = got.iter().flatten().sum::<u64>() + p.shm.unwrap();
                assert!(sum <= t, "{sum} over {t}");
                assert!(*memory - t >= memory / 4, "reserve kept");
                for s in got.iter().flatten() {
                    assert_eq!(s % PAGE, 0);
                }
            }
        }
    }

    #[test]
    fn refusals_name_the_key() {
        let rows: &[(u64, &str, &[&str], &str, &str)] = &[
            (
                2 * GIB,
                "lots",
                &["/tmp"],
                "sandbox.tmpfs_max_bytes",
                "lots",
            ),
            (
                2 * GIB,
                "0",
                &["/tmp"],
                "sandbox.tmpfs_max_bytes",
                "no scratch",
            ),
            (
                2 * GIB,
                "1600m",
                &["/tmp"],
                "sandbox.tmpfs_max_bytes",
                "quarter",
            ),
            (2 * GIB, "auto", &["tmp"], "sandbox.tmpfs", "absolute"),
            (2 * GIB, "auto", &["/tmp:big"], "sandbox.tmpfs", "/tmp:big"),
            (2 * GIB, "auto", &["/tmp:100k"], "sandbox.tmpfs", "minimum"),
            (2 * GIB, "auto", &["/tmp:2g"], "sandbox.tmpfs", "over"),
            (
                2 * GIB,
                "auto",
                &["/tmp", "/a:960m"],
                "sandbox.tmpfs",
                "would get",
            ),
        ];
        for (memory, total, list, key, needle) in rows {
            let e = plan(*memory, total, &entries(list)).unwrap_err();
            assert_eq!(e.key, *key, "{total} {list:?}");
            assert!(e.message.contains(needle), "{}", e.message);
        }
    }

    #[test]
    fn human_sizes() {
        let rows = [
            (2 * GIB, "2 GiB"),
            (512 * MIB, "512 MiB"),
            (1536 * MIB, "1.5 GiB"),
            (64 << 10, "64 KiB"),
            (100, "100 bytes"),
        ];
        for (bytes, text) in rows {
            assert_eq!(human_bytes(bytes), text);
        }
    }
}
