//! One process's output as moat holds it in memory: sanitized, redacted, capped.
//!
//! Raw bytes come from the log file at increasing offsets. Each chunk is sanitized once and
//! then feeds two capped views: `aggregated` (the whole run, head + tail) and `pending` (what
//! the next `poll` drains). Memory is bounded by two caps, whatever the command prints.

use crate::output::{CappedText, Redactor, Sanitizer};

pub struct OutputState {
    sanitizer: Sanitizer,
    /// Replaces secret values; streaming, so a value split across reads is still caught.
    redactor: Redactor,
    /// The whole run, capped to `max_chars` (head 10 % + tail).
    aggregated: CappedText,
    /// Produced since the last poll; replaced by a fresh one on every drain.
    pending: CappedText,
    max_chars: usize,
    /// Bytes of the log consumed so far (the next read starts here).
    pub bytes_read: u64,
    /// `bytes_read` at the last drain, persisted so a restart does not repeat polled output.
    pub drained_at: u64,
    /// Reused buffers: the hot path allocates nothing per chunk.
    clean: String,
    redacted: String,
}

impl OutputState {
    pub fn new(max_chars: usize, secrets: Vec<(String, String)>) -> Self {
        Self {
            sanitizer: Sanitizer::new(),
            redactor: Redactor::new(secrets),
            aggregated: CappedText::new(max_chars),
            pending: CappedText::new(max_chars),
            max_chars,
            bytes_read: 0,
            drained_at: 0,
            clean: String::new(),
            redacted: String::new(),
        }
    }

    /// Feeds raw bytes. `to_pending` is false when replaying output a poll already returned.
    pub fn ingest(&mut self, bytes: &[u8], to_pending: bool) {
        self.bytes_read += bytes.len() as u64;
        self.clean.clear();
        self.sanitizer.push(bytes, &mut self.clean);
        self.emit(to_pending);
    }

    /// Adds moat's own remark to the output (it is not part of the log, so the read offset
    /// does not move).
    pub fn note(&mut self, text: &str) {
        self.aggregated.push_str(text);
        self.pending.push_str(text);
    }

    /// Flushes partial sequences at the end of the run.
    pub fn finish(&mut self) {
        self.clean.clear();
        self.sanitizer.finish(&mut self.clean);
        self.emit(true);
        self.redacted.clear();
        self.redactor.finish(&mut self.redacted);
        self.aggregated.push_str(&self.redacted);
        self.pending.push_str(&self.redacted);
    }

    fn emit(&mut self, to_pending: bool) {
        let text = if self.redactor.is_empty() {
            &self.clean
        } else {
            self.redacted.clear();
            self.redactor.push(&self.clean, &mut self.redacted);
            &self.redacted
        };
        if text.is_empty() {
            return;
        }
        self.aggregated.push_str(text);
        if to_pending {
            self.pending.push_str(text);
        }
    }

    /// Takes what was produced since the last drain.
    pub fn drain(&mut self) -> String {
        let fresh = CappedText::new(self.max_chars);
        let taken = std::mem::replace(&mut self.pending, fresh);
        self.drained_at = self.bytes_read;
        taken.render()
    }

    pub fn has_pending(&self) -> bool {
        self.pending.total_chars() > 0
    }

    pub fn aggregated(&self) -> String {
        self.aggregated.render()
    }

    pub fn truncated(&self) -> bool {
        self.aggregated.truncated()
    }

    pub fn total_chars(&self) -> u64 {
        self.aggregated.total_chars()
    }

    /// The last `n` characters, for `running` results and exit events.
    pub fn tail(&self, n: usize) -> String {
        self.aggregated.last_chars(n)
    }

    /// Redacts a one-off text (an event line) with the same secrets.
    pub fn redact(&self, text: &str) -> String {
        if self.redactor.is_empty() {
            text.to_string()
        } else {
            self.redactor.redact_all(text)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drain_returns_only_new_output() {
        let mut o = OutputState::new(1000, vec![]);
        o.ingest(b"one\n", true);
        assert_eq!(o.drain(), "one\n");
        assert_eq!(o.drain(), "");
        o.ingest(b"\x1b[31mtwo\x1b[0m\n", true);
        assert_eq!(o.drain(), "two\n");
        assert_eq!(o.aggregated(), "one\ntwo\n");
        assert_eq!(o.drained_at, o.bytes_read);
    }

    #[test]
    fn replayed_bytes_skip_pending() {
        let mut o = OutputState::new(1000, vec![]);
        o.ingest(b"old\n", false);
        o.ingest(b"new\n", true);
        assert_eq!(o.drain(), "new\n");
        assert_eq!(o.aggregated(), "old\nnew\n");
    }

    #[test]
    fn secrets_split_across_reads_are_redacted() {
        let mut o = OutputState::new(1000, vec![("TOKEN".into(), "s3cr3t-value".into())]);
        o.ingest(b"key=s3cr", true);
        o.ingest(b"3t-value done", true);
        o.finish();
        assert_eq!(o.aggregated(), "key=[REDACTED:TOKEN] done");
    }

    #[test]
    fn caps_apply() {
        let mut o = OutputState::new(1000, vec![]);
        for _ in 0..100 {
            o.ingest(&[b'x'; 100], true);
        }
        assert!(o.truncated());
        assert_eq!(o.total_chars(), 10_000);
        assert!(o.aggregated().contains("[… 9000 chars truncated …]"));
    }
}
