//! Streaming sanitizer that turns raw process output into plain, safe text.
//!
//! Input arrives in arbitrary byte chunks. The sanitizer decodes UTF-8 (invalid bytes become
//! U+FFFD, a character split across chunks is reassembled), strips ANSI escape sequences with a
//! VT-style state machine that survives chunk boundaries, and removes control and format
//! characters other than `\t` and line breaks. Its state is a handful of bytes: nothing is
//! buffered except at most three bytes of an unfinished UTF-8 character.
//!
//! Two rules keep a hostile stream from deceiving whoever reads the text (docs/security.md,
//! "Operator-facing text"):
//!
//! - **Line breaks.** A carriage return that does not end a line would send a terminal back to
//!   the start of the line, so that later text overwrites earlier text (`safe-looking\rEVIL`
//!   shows as `EVILlooking`). Every carriage return therefore becomes a line feed: a run of
//!   line breaks made of `\r` and `\n` gives one `\n` per `\n` in it, or one `\n` if it has
//!   none (`\r\n` → `\n`, `\r` → `\n`, `\n\r` → `\n`, `\r\n\r\n` → `\n\n`). Nothing is overwritten;
//!   progress output shows each state on its own line.
//! - **Bounded sequences.** An escape sequence never outlives its line: a line break abandons
//!   it (and is kept), and so does reaching [`MAX_CONTROL_SEQUENCE_BYTES`] or
//!   [`MAX_STRING_SEQUENCE_BYTES`]. An unterminated `ESC [` or `ESC ]` swallows at most the rest
//!   of its line, never what follows.

/// Longest body of an OSC, DCS, SOS, PM or APC string (in bytes) that is swallowed before the
/// sequence is abandoned and the rest is treated as text again. Room for a hyperlink (OSC 8)
/// with a long URL; a longer string (a big OSC 52 clipboard payload) shows as text.
pub const MAX_STRING_SEQUENCE_BYTES: u32 = 4 * 1024;

/// Longest run of parameter and intermediate bytes of a CSI or escape sequence that is swallowed
/// before the sequence is abandoned. Real sequences need a few dozen (`ESC [38;2;R;G;Bm`).
pub const MAX_CONTROL_SEQUENCE_BYTES: u32 = 256;

const ESC: char = '\u{1b}';
const BEL: char = '\u{07}';
const CAN: char = '\u{18}';
const SUB: char = '\u{1a}';
const DEL: char = '\u{7f}';

/// Which terminator a string sequence accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StrKind {
    /// OSC: ended by BEL or ST.
    Osc,
    /// DCS, SOS, PM and APC: ended by ST only.
    Other,
}

/// Position of the escape-sequence parser.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Plain text.
    Ground,
    /// After ESC.
    Escape,
    /// After ESC and one or more intermediate bytes (0x20–0x2F), e.g. `ESC ( B`.
    EscapeIntermediate,
    /// Inside a CSI sequence (`ESC [` or U+009B), before its final byte.
    Csi,
    /// Inside the body of a string sequence.
    Str(StrKind),
    /// ESC seen inside a string body: `\` completes ST, anything else aborts the string.
    StrEscape,
}

/// What the text emitted last ended with, for the line-break rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LineEnd {
    /// Anything else (or nothing yet): a `\r` here becomes a line break.
    Text,
    /// A `\n` emitted for a `\r`: a `\n` that follows belongs to the same line break.
    Cr,
    /// A `\n` emitted for a `\n`: a `\r` that follows has nothing left to overwrite.
    Lf,
}

/// Streaming output sanitizer; feed it chunks with [`Sanitizer::push`] and end with
/// [`Sanitizer::finish`].
#[derive(Clone, Debug)]
pub struct Sanitizer {
    /// Where the escape-sequence parser stands, so sequences split across chunks are still
    /// recognised.
    state: State,
    /// Bytes swallowed by the current sequence, so a hostile or broken stream cannot hide all
    /// later output inside one endless sequence.
    seq_len: u32,
    /// Leading bytes of a UTF-8 character cut by a chunk boundary, so it decodes correctly
    /// once the next chunk arrives instead of turning into U+FFFD.
    pending: [u8; 4],
    /// How many bytes of `pending` are in use; kept apart so the state stays a fixed size.
    pending_len: u8,
    /// How the text emitted so far ends, so a `\r\n` split across chunks is still one line
    /// break and a bare `\r` becomes one.
    line_end: LineEnd,
}

impl Default for Sanitizer {
    fn default() -> Self {
        Self::new()
    }
}

impl Sanitizer {
    /// Creates a sanitizer in its initial (plain text) state.
    pub fn new() -> Self {
        Self {
            state: State::Ground,
            seq_len: 0,
            pending: [0; 4],
            pending_len: 0,
            line_end: LineEnd::Text,
        }
    }

    /// Sanitizes `chunk` and appends the resulting text to `out`.
    pub fn push(&mut self, chunk: &[u8], out: &mut String) {
        let mut rest = chunk;
        if self.pending_len > 0 {
            rest = self.complete_pending(rest, out);
        }
        if rest.is_empty() {
            return;
        }
        loop {
            // `from_utf8` has a fast path for valid text that `utf8_chunks` lacks.
            let err = match std::str::from_utf8(rest) {
                Ok(s) => {
                    self.feed_str(s, out);
                    return;
                }
                Err(err) => err,
            };
            let (valid, after) = rest.split_at(err.valid_up_to());
            if let Ok(s) = std::str::from_utf8(valid) {
                self.feed_str(s, out);
            }
            match err.error_len() {
                Some(bad) => {
                    self.step('\u{FFFD}', out);
                    rest = &after[bad..];
                }
                None => {
                    // A character cut by the end of the chunk: keep its bytes for the next one.
                    self.pending[..after.len()].copy_from_slice(after);
                    self.pending_len = after.len() as u8;
                    return;
                }
            }
        }
    }

    /// Flushes the end of the stream: an unfinished UTF-8 character becomes U+FFFD and an
    /// unfinished escape sequence is dropped. The sanitizer can be reused afterwards.
    pub fn finish(&mut self, out: &mut String) {
        if self.pending_len > 0 {
            self.pending_len = 0;
            self.step('\u{FFFD}', out);
        }
        self.enter(State::Ground);
        self.line_end = LineEnd::Text;
    }

    /// Finishes a UTF-8 character whose first bytes arrived in an earlier chunk; returns the
    /// part of `chunk` still to be processed.
    fn complete_pending<'a>(&mut self, chunk: &'a [u8], out: &mut String) -> &'a [u8] {
        let have = usize::from(self.pending_len);
        let need = utf8_len(self.pending[0]).saturating_sub(have);
        let take = need.min(chunk.len());
        let mut buf = [0u8; 4];
        buf[..have].copy_from_slice(&self.pending[..have]);
        buf[have..have + take].copy_from_slice(&chunk[..take]);
        match std::str::from_utf8(&buf[..have + take]) {
            Ok(s) => {
                self.pending_len = 0;
                self.feed_str(s, out);
                &chunk[take..]
            }
            Err(e) => match e.error_len() {
                None => {
                    // Still unfinished: the chunk was shorter than the character.
                    self.pending = buf;
                    self.pending_len = (have + take) as u8;
                    &chunk[take..]
                }
                Some(bad) => {
                    self.pending_len = 0;
                    self.step('\u{FFFD}', out);
                    &chunk[bad.saturating_sub(have)..]
                }
            },
        }
    }

    /// Runs valid text through the state machine, using bulk copies for plain runs.
    fn feed_str(&mut self, s: &str, out: &mut String) {
        let bytes = s.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            match self.state {
                State::Ground => {
                    if self.line_end == LineEnd::Cr && bytes[i] == b'\n' {
                        // The `\n` of a `\r\n`: its line break was emitted for the `\r`.
                        self.line_end = LineEnd::Lf;
                        i += 1;
                        continue;
                    }
                    let start = i;
                    i = scan_ground(s, i);
                    if i > start {
                        out.push_str(&s[start..i]);
                        self.line_end = if bytes[i - 1] == b'\n' {
                            LineEnd::Lf
                        } else {
                            LineEnd::Text
                        };
                    }
                }
                State::Str(_) => i = self.skip_string_body(bytes, i),
                State::Csi => i = self.skip_csi_params(bytes, i),
                _ => {}
            }
            if i >= bytes.len() {
                break;
            }
            let b = bytes[i];
            let c = if b < 0x80 {
                char::from(b)
            } else {
                s[i..].chars().next().unwrap_or('\u{FFFD}')
            };
            i += c.len_utf8();
            self.step(c, out);
        }
    }

    /// Skips string-body bytes that cannot end the string; stops on a possible terminator, a
    /// line break, the first byte of a two-byte character that may be a C1 control, or on
    /// abandonment.
    fn skip_string_body(&mut self, bytes: &[u8], mut i: usize) -> usize {
        while i < bytes.len() {
            let b = bytes[i];
            if matches!(b, 0x07 | 0x0a | 0x0d | 0x18 | 0x1a | 0x1b | 0xc2) {
                break;
            }
            if self.seq_len >= MAX_STRING_SEQUENCE_BYTES && !is_continuation(b) {
                self.enter(State::Ground);
                break;
            }
            self.seq_len += 1;
            i += 1;
        }
        i
    }

    /// Skips CSI parameter and intermediate bytes up to the bound; the final byte and anything
    /// unusual go through [`Sanitizer::step`].
    fn skip_csi_params(&mut self, bytes: &[u8], mut i: usize) -> usize {
        while i < bytes.len()
            && (0x20..=0x3f).contains(&bytes[i])
            && self.seq_len < MAX_CONTROL_SEQUENCE_BYTES
        {
            self.seq_len += 1;
            i += 1;
        }
        i
    }

    /// Advances the state machine by one character.
    fn step(&mut self, c: char, out: &mut String) {
        // Transitions that apply in every state, as in a VT parser.
        match c {
            ESC => {
                let next = if let State::Str(_) = self.state {
                    State::StrEscape
                } else {
                    State::Escape
                };
                self.enter(next);
                return;
            }
            CAN | SUB => {
                self.enter(State::Ground);
                return;
            }
            // A line break ends whatever sequence is open: none may swallow the next line.
            '\n' | '\r' => {
                self.enter(State::Ground);
                self.emit(c, out);
                return;
            }
            '\u{80}'..='\u{9f}' => {
                let next = match c {
                    '\u{9b}' => State::Csi,
                    '\u{9d}' => State::Str(StrKind::Osc),
                    '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => State::Str(StrKind::Other),
                    _ => State::Ground,
                };
                self.enter(next);
                return;
            }
            _ => {}
        }
        match self.state {
            State::Ground => self.emit(c, out),
            State::Escape => match c {
                '[' => self.enter(State::Csi),
                ']' => self.enter(State::Str(StrKind::Osc)),
                'P' | 'X' | '^' | '_' => self.enter(State::Str(StrKind::Other)),
                ' '..='/' => {
                    self.enter(State::EscapeIntermediate);
                    self.seq_len = 1;
                }
                '0'..='~' => self.enter(State::Ground),
                _ => self.in_sequence_other(c, out),
            },
            State::EscapeIntermediate => match c {
                ' '..='/' => self.grow_control_sequence(c, out),
                '0'..='~' => self.enter(State::Ground),
                _ => self.in_sequence_other(c, out),
            },
            State::Csi => match c {
                ' '..='?' => self.grow_control_sequence(c, out),
                '@'..='~' => self.enter(State::Ground),
                _ => self.in_sequence_other(c, out),
            },
            State::Str(kind) => {
                if c == BEL && kind == StrKind::Osc {
                    self.enter(State::Ground);
                } else if self.seq_len >= MAX_STRING_SEQUENCE_BYTES {
                    self.enter(State::Ground);
                    self.emit(c, out);
                } else {
                    self.seq_len += c.len_utf8() as u32;
                }
            }
            State::StrEscape => {
                if c == '\\' {
                    self.enter(State::Ground);
                } else {
                    // The ESC aborted the string and starts a new sequence.
                    self.enter(State::Escape);
                    self.step(c, out);
                }
            }
        }
    }

    /// Handles a character inside an escape or CSI sequence that is neither a parameter,
    /// intermediate nor final byte.
    fn in_sequence_other(&mut self, c: char, out: &mut String) {
        if c == DEL {
            // Ignored inside sequences.
        } else if (c as u32) < 0x20 {
            // C0 controls are executed without ending the sequence (line breaks, which do end
            // it, never get here).
            self.emit(c, out);
        } else {
            // Anything beyond ASCII cannot belong to a sequence: abandon it.
            self.enter(State::Ground);
            self.emit(c, out);
        }
    }

    /// Swallows one more parameter or intermediate byte; past the bound the sequence is
    /// abandoned and the byte is treated as text.
    fn grow_control_sequence(&mut self, c: char, out: &mut String) {
        if self.seq_len >= MAX_CONTROL_SEQUENCE_BYTES {
            self.enter(State::Ground);
            self.emit(c, out);
        } else {
            self.seq_len += 1;
        }
    }

    fn enter(&mut self, state: State) {
        self.state = state;
        self.seq_len = 0;
    }

    /// Appends one character of text: line breaks by the line-break rule (module docs),
    /// removed characters not at all, anything else as it is.
    fn emit(&mut self, c: char, out: &mut String) {
        match (c, self.line_end) {
            ('\r', LineEnd::Text) => {
                out.push('\n');
                self.line_end = LineEnd::Cr;
            }
            ('\r', _) => {}
            ('\n', LineEnd::Cr) => self.line_end = LineEnd::Lf,
            ('\n', _) => {
                out.push('\n');
                self.line_end = LineEnd::Lf;
            }
            (c, _) if is_stripped_char(c) => {}
            (c, _) => {
                out.push(c);
                self.line_end = LineEnd::Text;
            }
        }
    }
}

/// Whether `c` is removed from the output: C0 controls other than `\t` `\n` `\r` (a `\r` is
/// turned into a line break, see the module docs), DEL, C1 controls and invisible format
/// characters.
pub fn is_stripped_char(c: char) -> bool {
    match c {
        '\t' | '\n' | '\r' => false,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => true,
        _ => is_format_char(c),
    }
}

/// Unicode format characters (general category Cf), listed explicitly: zero-width characters,
/// bidi controls, invisible operators, tags and similar.
pub fn is_format_char(c: char) -> bool {
    matches!(
        c,
        '\u{00ad}'
            | '\u{0600}'..='\u{0605}'
            | '\u{061c}'
            | '\u{06dd}'
            | '\u{070f}'
            | '\u{0890}'..='\u{0891}'
            | '\u{08e2}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{110bd}'
            | '\u{110cd}'
            | '\u{13430}'..='\u{1343f}'
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0000}'..='\u{e007f}'
    )
}

/// Advances over characters that pass through unchanged in plain-text state.
fn scan_ground(s: &str, mut i: usize) -> usize {
    let bytes = s.as_bytes();
    loop {
        i = scan_plain_ascii(bytes, i);
        let Some(&lead) = bytes.get(i) else {
            return i;
        };
        if lead < 0x80 {
            return i;
        }
        if !may_be_removed(lead) {
            // No removed character starts with this byte: skip it undecoded.
            i += utf8_len(lead);
            continue;
        }
        let Some(c) = s[i..].chars().next() else {
            return i;
        };
        if is_stripped_char(c) {
            return i;
        }
        i += c.len_utf8();
    }
}

/// Whether a UTF-8 lead byte can start a character that [`is_stripped_char`] removes (C1 controls,
/// U+00AD and the format characters listed in [`is_format_char`]).
fn may_be_removed(lead: u8) -> bool {
    matches!(
        lead,
        0xc2 | 0xd8 | 0xd9 | 0xdb | 0xdc | 0xe0 | 0xe1 | 0xe2 | 0xef | 0xf0 | 0xf3
    )
}

/// Whether an ASCII byte passes through unchanged. Not `\r`: the line-break rule decides what
/// becomes of it.
fn is_plain_ascii(b: u8) -> bool {
    // Written with non-short-circuiting operators so block scans vectorise.
    (b.wrapping_sub(0x20) < 0x5f) | (b == b'\t') | (b == b'\n')
}

/// Advances over printable ASCII, `\t` and `\n`, a block at a time where possible.
fn scan_plain_ascii(bytes: &[u8], mut i: usize) -> usize {
    const BLOCK: usize = 32;
    // Short runs between special characters are common: check a few bytes singly first.
    let stop = (i + 8).min(bytes.len());
    while i < stop {
        if !is_plain_ascii(bytes[i]) {
            return i;
        }
        i += 1;
    }
    while let Some(block) = bytes.get(i..i + BLOCK) {
        // Branch-free over the block so the compiler can vectorise it.
        let mut special = 0u8;
        for &b in block {
            special |= u8::from(!is_plain_ascii(b));
        }
        if special != 0 {
            break;
        }
        i += BLOCK;
    }
    // The next block holds a special byte, or fewer than a block's bytes are left.
    while i < bytes.len() && is_plain_ascii(bytes[i]) {
        i += 1;
    }
    i
}

fn is_continuation(b: u8) -> bool {
    b & 0xc0 == 0x80
}

/// Length of the UTF-8 sequence a lead byte announces (1 for anything that is not a lead).
fn utf8_len(lead: u8) -> usize {
    match lead {
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => 1,
    }
}

#[cfg(test)]
mod tests;
