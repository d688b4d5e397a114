//! Times as the console shows them: relative (`3 min ago`, `in 4 min`) for a glance, and
//! absolute in UTC (`2026-11-24 18:30:12 UTC`) for the record (docs/console.md, "Pages").

/// A moment on a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct When {
    /// Relative to the page's render time.
    pub relative: String,
    /// Absolute, UTC, to the second.
    pub absolute: String,
    /// The moment itself (ms since the epoch): the page's script keeps countdowns current.
    pub ms: i64,
}

impl When {
    pub fn at(ms: i64, now_ms: i64) -> Self {
        Self {
            relative: relative(ms, now_ms),
            absolute: absolute(ms),
            ms,
        }
    }
}

/// `just now`, `42 s ago`, `5 min ago`, `3 h ago`, `2 d ago`, or `in …` for the future.
pub fn relative(ms: i64, now_ms: i64) -> String {
    let delta = (now_ms - ms) / 1000;
    let span = span(delta.unsigned_abs());
    if delta.abs() < 2 {
        "just now".into()
    } else if delta > 0 {
        format!("{span} ago")
    } else {
        format!("in {span}")
    }
}

/// A duration in seconds in its largest sensible unit (`59 s`, `4 min`, `1 h 05 min`, `3 d`).
pub fn span(secs: u64) -> String {
    match secs {
        0..=59 => format!("{secs} s"),
        60..=3599 => format!("{} min", secs / 60),
        3600..=86_399 => format!("{} h {:02} min", secs / 3600, (secs % 3600) / 60),
        _ => format!("{} d", secs / 86_400),
    }
}

/// `YYYY-MM-DD HH:MM:SS UTC`.
pub fn absolute(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`, public domain).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_dates() {
        for (ms, want) in [
            (0, "1970-01-01 00:00:00 UTC"),
            (951_782_400_000, "2000-02-29 00:00:00 UTC"),
            (1_795_539_012_345, "2026-11-24 16:50:12 UTC"),
            (-1000, "1969-12-31 23:59:59 UTC"),
        ] {
            assert_eq!(absolute(ms), want, "{ms}");
        }
    }

    #[test]
    fn relative_times() {
        let now = 1_000_000_000;
        for (ms, want) in [
            (now, "just now"),
            (now - 1500, "just now"),
            (now - 42_000, "42 s ago"),
            (now - 300_000, "5 min ago"),
            (now - 3 * 3_600_000 - 5 * 60_000, "3 h 05 min ago"),
            (now - 2 * 86_400_000, "2 d ago"),
            (now + 240_000, "in 4 min"),
            (now + 30_000, "in 30 s"),
        ] {
            assert_eq!(relative(ms, now), want, "{ms}");
        }
    }
}
