//! A char-capped view of a text stream: the first 10 % and the most recent rest, with an exact
//! count of what was cut between them.

/// Output cap used when none is configured.
pub const DEFAULT_MAX_CHARS: usize = 200_000;
/// Smallest output cap a configuration may set.
pub const MIN_MAX_CHARS: usize = 1_000;
/// Largest output cap a configuration may set.
pub const MAX_MAX_CHARS: usize = 200_000;

/// Returns the output cap for a configured value: the default when unset, else the value
/// clamped to [`MIN_MAX_CHARS`, `MAX_MAX_CHARS`].
pub fn clamp_max_chars(v: Option<usize>) -> usize {
    v.unwrap_or(DEFAULT_MAX_CHARS)
        .clamp(MIN_MAX_CHARS, MAX_MAX_CHARS)
}

/// Keeps the first 10 % and the last 90 % of `max_chars` characters of everything pushed, in
/// memory proportional to `max_chars`.
#[derive(Clone, Debug)]
pub struct CappedText {
    /// The cap, so `render` knows whether anything was cut.
    max_chars: usize,
    /// How many leading chars are kept, so the start of the output (often the most telling
    /// error) survives a flood.
    head_cap: usize,
    /// How many trailing chars are kept; `head_cap + tail_cap == max_chars`.
    tail_cap: usize,
    /// The first `head_chars` characters ever pushed.
    head: String,
    /// Characters in `head`, so it is never recounted.
    head_chars: usize,
    /// Most recent characters; only `tail[tail_start..]` is live. The dead prefix is dropped
    /// lazily so trimming is amortised O(1) per byte instead of a copy per push.
    tail: String,
    /// Byte offset of the first live character in `tail`.
    tail_start: usize,
    /// Characters in the live part of `tail`.
    tail_chars: usize,
    /// Every character ever pushed, so the truncation marker can give an exact count.
    total: u64,
}

impl CappedText {
    /// Creates an empty view that keeps at most `max_chars` characters.
    pub fn new(max_chars: usize) -> Self {
        let head_cap = max_chars / 10;
        Self {
            max_chars,
            head_cap,
            tail_cap: max_chars - head_cap,
            head: String::new(),
            head_chars: 0,
            tail: String::new(),
            tail_start: 0,
            tail_chars: 0,
            total: 0,
        }
    }

    /// Appends `s`.
    pub fn push_str(&mut self, s: &str) {
        if s.is_empty() {
            return;
        }
        let mut s = s;
        let mut n = count_chars(s);
        self.total += n as u64;
        if self.head_chars < self.head_cap {
            let want = self.head_cap - self.head_chars;
            if n <= want {
                self.head.push_str(s);
                self.head_chars += n;
                return;
            }
            let split = char_offset(s, want);
            self.head.push_str(&s[..split]);
            self.head_chars = self.head_cap;
            s = &s[split..];
            n -= want;
        }
        if n >= self.tail_cap {
            // `s` alone fills the tail: keep only its end.
            let keep_from = char_offset(s, n - self.tail_cap);
            self.tail.clear();
            self.tail.push_str(&s[keep_from..]);
            self.tail_start = 0;
            self.tail_chars = self.tail_cap;
            return;
        }
        self.tail.push_str(s);
        self.tail_chars += n;
        if self.tail_chars > self.tail_cap {
            let excess = self.tail_chars - self.tail_cap;
            self.tail_start += char_offset(&self.tail[self.tail_start..], excess);
            self.tail_chars = self.tail_cap;
        }
        if self.tail_start > 4096 && self.tail_start > self.tail.len() / 2 {
            self.tail.drain(..self.tail_start);
            self.tail_start = 0;
        }
    }

    /// Number of characters ever pushed.
    pub fn total_chars(&self) -> u64 {
        self.total
    }

    /// Whether some characters were dropped.
    pub fn truncated(&self) -> bool {
        self.total > self.max_chars as u64
    }

    /// Everything pushed if it fits the cap, else the head, a marker
    /// `\n[… N chars truncated …]\n` with the exact number of dropped chars, and the tail.
    pub fn render(&self) -> String {
        let tail = self.live_tail();
        if !self.truncated() {
            let mut out = String::with_capacity(self.head.len() + tail.len());
            out.push_str(&self.head);
            out.push_str(tail);
            return out;
        }
        let dropped = self.total - (self.head_chars + self.tail_chars) as u64;
        format!("{}\n[… {dropped} chars truncated …]\n{tail}", self.head)
    }

    /// The last `n` retained characters (without the marker); useful for short previews.
    pub fn last_chars(&self, n: usize) -> String {
        let tail = self.live_tail();
        if n <= self.tail_chars {
            return tail[char_offset(tail, self.tail_chars - n)..].to_owned();
        }
        if self.truncated() {
            // The head is not adjacent to the tail; never join across the gap.
            return tail.to_owned();
        }
        let from_head = (n - self.tail_chars).min(self.head_chars);
        let start = char_offset(&self.head, self.head_chars - from_head);
        let mut out = String::with_capacity(self.head.len() - start + tail.len());
        out.push_str(&self.head[start..]);
        out.push_str(tail);
        out
    }

    /// Heap bytes this view holds (capacity, not length): what a record that keeps it costs.
    pub fn held_bytes(&self) -> usize {
        self.head.capacity() + self.tail.capacity()
    }

    /// Drops the dead prefix of the tail and any spare capacity, for a view nothing will be
    /// pushed to any more (a finished process's): it then holds its characters and no more.
    pub fn compact(&mut self) {
        if self.tail_start > 0 {
            self.tail.drain(..self.tail_start);
            self.tail_start = 0;
        }
        self.head.shrink_to_fit();
        self.tail.shrink_to_fit();
    }

    fn live_tail(&self) -> &str {
        &self.tail[self.tail_start..]
    }
}

fn is_char_start(b: u8) -> bool {
    b & 0xc0 != 0x80
}

/// Number of chars in `s`.
fn count_chars(s: &str) -> usize {
    // The standard library counts chars a word at a time.
    s.chars().count()
}

/// Byte offset of the `k`-th char of `s` (`s.len()` if `s` has `k` chars or fewer).
fn char_offset(s: &str, k: usize) -> usize {
    let bytes = s.as_bytes();
    if k >= bytes.len() {
        return bytes.len();
    }
    if bytes[..k].is_ascii() {
        return k;
    }
    const BLOCK: usize = 64;
    let mut seen = 0;
    let mut i = 0;
    while i + BLOCK <= bytes.len() {
        // Summing into a byte (at most 64) lets the compiler vectorise the count.
        let starts: u8 = bytes[i..i + BLOCK]
            .iter()
            .map(|b| u8::from(is_char_start(*b)))
            .sum();
        let starts = usize::from(starts);
        if seen + starts > k {
            break;
        }
        seen += starts;
        i += BLOCK;
    }
    while i < bytes.len() {
        if is_char_start(bytes[i]) {
            if seen == k {
                return i;
            }
            seen += 1;
        }
        i += 1;
    }
    bytes.len()
}

#[cfg(test)]
mod tests;
