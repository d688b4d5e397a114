//! How many egress rows one session may write to the shared audit log (docs/security.md,
//! "Network egress"). Every connection, allowed or refused, is a row, and a refused request
//! costs the sandbox nothing: one loop of requests to a denied name wrote 70 000 rows (15 MB
//! of `state.db`) in 20 seconds in a hostile review. So each session has a budget: a burst of
//! [`BURST`] rows, refilled at [`PER_SECOND`] a second; a record past it is counted, not
//! written, and the next row written says how many were left out. Pure: time is passed in.

/// Rows a session may write at once.
pub const BURST: f64 = 200.0;
/// Rows a session earns back each second.
pub const PER_SECOND: f64 = 5.0;

/// One session's budget.
#[derive(Debug, Clone)]
pub struct AuditBudget {
    /// Rows that may be written now.
    tokens: f64,
    /// When `tokens` was last brought up to date (milliseconds).
    at_ms: i64,
    /// Records left out since the last row written.
    left_out: u64,
}

/// What to do with one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spend {
    /// Write it; first a row saying this many records were left out, when not zero.
    Write { left_out: u64 },
    /// Count it and write nothing.
    Skip,
}

impl AuditBudget {
    pub fn new(now_ms: i64) -> Self {
        Self {
            tokens: BURST,
            at_ms: now_ms,
            left_out: 0,
        }
    }

    /// Spends one row at `now_ms`, when there is one.
    pub fn spend(&mut self, now_ms: i64) -> Spend {
        let elapsed = (now_ms - self.at_ms).max(0) as f64 / 1000.0;
        self.tokens = (self.tokens + elapsed * PER_SECOND).min(BURST);
        self.at_ms = now_ms.max(self.at_ms);
        if self.tokens < 1.0 {
            self.left_out += 1;
            return Spend::Skip;
        }
        self.tokens -= 1.0;
        Spend::Write {
            left_out: std::mem::take(&mut self.left_out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_the_rate_and_a_count_of_what_was_left_out() {
        let mut b = AuditBudget::new(0);
        for _ in 0..BURST as usize {
            assert_eq!(b.spend(0), Spend::Write { left_out: 0 });
        }
        for _ in 0..1000 {
            assert_eq!(b.spend(0), Spend::Skip);
        }
        // A fifth of a second later one row is earned back; it carries the count.
        assert_eq!(b.spend(200), Spend::Write { left_out: 1000 });
        assert_eq!(b.spend(200), Spend::Skip);
        assert_eq!(b.spend(400), Spend::Write { left_out: 1 });
        // A flood for a minute writes the burst and then five rows a second.
        let mut b = AuditBudget::new(0);
        let mut written = 0;
        for ms in 0..60_000 {
            if let Spend::Write { .. } = b.spend(ms) {
                written += 1;
            }
        }
        assert_eq!(written, BURST as i64 + 60 * PER_SECOND as i64 - 1);
        // A clock that goes back earns nothing.
        let mut b = AuditBudget::new(10_000);
        for _ in 0..BURST as usize {
            b.spend(10_000);
        }
        assert_eq!(b.spend(0), Spend::Skip);
    }
}
