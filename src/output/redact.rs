//! Replaces secret values in output text with `[REDACTED:<NAME>]`, also when a value is split
//! across pushes.
//!
//! Matching rule: every occurrence of every value is found, overlapping occurrences are merged
//! into one region, and each region becomes a single marker named after the longest value in it
//! (on a tie, the one configured first). So no byte of any secret survives, even when two
//! secrets overlap in the text. Streaming output is identical to one-shot output.
//!
//! [`Redactor::new`] also hides each value's encoded forms (`forms.rs`: reversed, hex,
//! percent-encoded, base64) under the same name; [`Redactor::literal`] matches the values only.
//! All values are searched at once with one Aho-Corasick automaton, so the cost of a pass
//! barely grows with the number of forms.

mod forms;

pub use forms::encoded_forms;

use aho_corasick::{AhoCorasick, Input, MatchKind};

/// One configured secret.
#[derive(Clone, Debug)]
struct Secret {
    /// Shown in the marker so a reader knows which value was hidden.
    name: String,
    /// The text to hide.
    value: String,
    /// KMP failure function of `value`, so the partial match at the end of pending text is found
    /// in time linear in the value's length.
    fail: Vec<usize>,
}

/// Streaming position, kept apart from the secrets so one-shot redaction can use a fresh one.
#[derive(Clone, Debug, Default)]
struct Stream {
    /// Text not yet emitted, preceded by up to one value's length of already handled text that
    /// an overlapping occurrence may still start in.
    buf: String,
    /// Bytes of `buf` already emitted as text or covered by a marker.
    done: usize,
    /// Index of the secret naming the region that ends at `done` and may still grow, if any;
    /// its marker is not emitted yet.
    open: Option<usize>,
}

/// Streaming secret redactor.
#[derive(Clone, Debug)]
pub struct Redactor {
    /// Secrets with non-empty, distinct values; empty values would match everywhere and
    /// repeated ones would only cost searches.
    secrets: Vec<Secret>,
    /// Length in bytes of the longest value, which bounds what must be held back.
    max_len: usize,
    /// Finds the leftmost occurrence of any value (the longest among those starting there);
    /// `None` when there are no values.
    finder: Option<AhoCorasick>,
    /// Where the current stream stands.
    stream: Stream,
}

impl Redactor {
    /// Creates a redactor for `(name, value)` pairs that hides each value and its encoded forms
    /// (see [`encoded_forms`]), every form named after its secret. Empty values are ignored.
    pub fn new(secrets: Vec<(String, String)>) -> Self {
        let mut all = Vec::new();
        for (name, value) in &secrets {
            if !value.is_empty() {
                all.push((name.clone(), value.clone()));
            }
        }
        // The values first: on a tie a value names a region before any encoded form.
        for (name, value) in secrets {
            if value.is_empty() {
                continue;
            }
            for form in encoded_forms(&value) {
                all.push((name.clone(), form));
            }
        }
        Self::literal(all)
    }

    /// Creates a redactor that hides the `(name, value)` pairs exactly as given. Empty values
    /// are ignored; of several secrets with the same value the first name is used.
    pub fn literal(secrets: Vec<(String, String)>) -> Self {
        let mut kept: Vec<Secret> = Vec::new();
        for (name, value) in secrets {
            if value.is_empty() || kept.iter().any(|s| s.value == value) {
                continue;
            }
            let fail = failure_function(value.as_bytes());
            kept.push(Secret { name, value, fail });
        }
        let max_len = kept.iter().map(|s| s.value.len()).max().unwrap_or(0);
        let finder = if kept.is_empty() {
            None
        } else {
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                .build(kept.iter().map(|s| s.value.as_bytes()))
                .ok()
        };
        Self {
            secrets: kept,
            max_len,
            finder,
            stream: Stream::default(),
        }
    }

    /// The same secrets with a fresh stream, for redacting the log again from some offset
    /// (`process log`) without disturbing the live stream.
    pub fn fresh(&self) -> Self {
        Self {
            secrets: self.secrets.clone(),
            max_len: self.max_len,
            finder: self.finder.clone(),
            stream: Stream::default(),
        }
    }

    /// Length in bytes of the longest value: a stream resumed at an arbitrary point may begin
    /// with at most this much of a value whose start was cut off.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Heap bytes the stream holds back between pushes (its buffer's capacity, which the
    /// largest push set): what a process's record keeps until `finish`.
    pub fn held_bytes(&self) -> usize {
        self.stream.buf.capacity()
    }

    /// Whether there is anything to redact.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// Redacts `text` and appends what can be decided so far to `out`. A suffix that may be
    /// the start of a secret is held back until the next push or [`Redactor::finish`].
    pub fn push(&mut self, text: &str, out: &mut String) {
        if self.secrets.is_empty() {
            out.push_str(text);
            return;
        }
        let mut stream = std::mem::take(&mut self.stream);
        stream.buf.push_str(text);
        self.drain(&mut stream, out, false);
        let keep_from = floor_char_boundary(&stream.buf, stream.done.saturating_sub(self.max_len));
        if keep_from > 0 {
            stream.buf.drain(..keep_from);
            stream.done -= keep_from;
        }
        self.stream = stream;
    }

    /// Emits everything held back; the redactor can be reused afterwards.
    pub fn finish(&mut self, out: &mut String) {
        let mut stream = std::mem::take(&mut self.stream);
        self.drain(&mut stream, out, true);
    }

    /// Redacts a complete text, independent of any streaming state.
    pub fn redact_all(&self, text: &str) -> String {
        if self.secrets.is_empty() {
            return text.to_owned();
        }
        let mut stream = Stream {
            buf: text.to_owned(),
            ..Stream::default()
        };
        let mut out = String::with_capacity(text.len());
        self.drain(&mut stream, &mut out, true);
        out
    }

    /// Emits all of `stream.buf` that can be decided; with `at_end`, everything.
    fn drain(&self, stream: &mut Stream, out: &mut String, at_end: bool) {
        let partial = if at_end {
            None
        } else {
            self.partial_start(&stream.buf)
        };
        loop {
            if let Some(name) = stream.open {
                let (end, name) = self.extend_region(&stream.buf, stream.done, name);
                if end > stream.done {
                    stream.done = end;
                    stream.open = Some(name);
                    continue;
                }
                if partial.is_some_and(|p| p < stream.done) {
                    // A value that starts inside the region may still run past its end.
                    return;
                }
                push_marker(out, &self.secrets[name].name);
                stream.open = None;
                continue;
            }
            let limit = partial.unwrap_or(stream.buf.len());
            match self.earliest(&stream.buf, stream.done) {
                Some((start, idx)) if start <= limit => {
                    out.push_str(&stream.buf[stream.done..start]);
                    stream.done = start + self.secrets[idx].value.len();
                    stream.open = Some(idx);
                }
                _ => {
                    let limit = limit.max(stream.done);
                    out.push_str(&stream.buf[stream.done..limit]);
                    stream.done = limit;
                    return;
                }
            }
        }
    }

    /// Finds occurrences that start inside a region ending at `end` and reach past it; returns
    /// the furthest end among them and the region's name after merging them.
    fn extend_region(&self, buf: &str, end: usize, mut name: usize) -> (usize, usize) {
        let mut best_end = end;
        for (idx, secret) in self.secrets.iter().enumerate() {
            let len = secret.value.len();
            // Starts in (end - len, end) are the only ones that can reach past `end`.
            let lo = floor_char_boundary(buf, (end + 1).saturating_sub(len));
            let hi = floor_char_boundary(buf, (end - 1 + len).min(buf.len()));
            if hi <= lo {
                continue;
            }
            let Some(at) = buf[lo..hi].rfind(secret.value.as_str()) else {
                continue;
            };
            let occ_end = lo + at + len;
            if occ_end > end {
                best_end = best_end.max(occ_end);
                if self.wins(idx, name) {
                    name = idx;
                }
            }
        }
        (best_end, name)
    }

    /// Earliest occurrence at or after `from`, with the longest secret among those starting
    /// there (distinct values of one length cannot start at the same place).
    fn earliest(&self, buf: &str, from: usize) -> Option<(usize, usize)> {
        let finder = self.finder.as_ref()?;
        let found = finder.find(Input::new(buf).span(from..buf.len()))?;
        Some((found.start(), found.pattern().as_usize()))
    }

    /// Whether secret `a` names a region in preference to secret `b`.
    fn wins(&self, a: usize, b: usize) -> bool {
        let (la, lb) = (self.secrets[a].value.len(), self.secrets[b].value.len());
        la > lb || (la == lb && a < b)
    }

    /// Start of the longest suffix of `buf` that is a proper prefix of some value.
    fn partial_start(&self, buf: &str) -> Option<usize> {
        let bytes = buf.as_bytes();
        let mut best: Option<usize> = None;
        for secret in &self.secrets {
            let value = secret.value.as_bytes();
            let from = bytes.len().saturating_sub(value.len() - 1);
            let matched = suffix_prefix_len(&bytes[from..], value, &secret.fail);
            if matched > 0 {
                let start = bytes.len() - matched;
                best = Some(best.map_or(start, |b: usize| b.min(start)));
            }
        }
        best
    }
}

fn push_marker(out: &mut String, name: &str) {
    out.push_str("[REDACTED:");
    out.push_str(name);
    out.push(']');
}

/// Largest char boundary of `s` at or below `i`.
fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// KMP failure function: `fail[i]` is the length of the longest proper prefix of
/// `pattern[..=i]` that is also its suffix.
fn failure_function(pattern: &[u8]) -> Vec<usize> {
    let mut fail = vec![0; pattern.len()];
    let mut k = 0;
    for i in 1..pattern.len() {
        while k > 0 && pattern[i] != pattern[k] {
            k = fail[k - 1];
        }
        if pattern[i] == pattern[k] {
            k += 1;
        }
        fail[i] = k;
    }
    fail
}

/// Length of the longest suffix of `text` that is a proper prefix of `pattern`.
fn suffix_prefix_len(text: &[u8], pattern: &[u8], fail: &[usize]) -> usize {
    let mut k = 0;
    for &b in text {
        while k > 0 && (k == pattern.len() || pattern[k] != b) {
            k = fail[k - 1];
        }
        if pattern[k] == b {
            k += 1;
        }
    }
    if k == pattern.len() {
        fail[k - 1]
    } else {
        k
    }
}

#[cfg(test)]
mod tests;
