//! Tracks the terminal modes a program switches on through its output, and its requests for
//! the cursor position.

const ESC: u8 = 0x1b;

/// Where the scanner stands in the output stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Scan {
    #[default]
    Ground,
    Escape,
    Csi,
}

/// Watches a program's output for the modes that change what its input must look like.
#[derive(Clone, Debug, Default)]
pub struct TermModes {
    /// Cursor key mode (DECCKM) as last set; `None` until the program sets it, since until
    /// then the right form for arrow keys is a guess.
    app_cursor: Option<bool>,
    /// Bracketed paste mode, so callers can tell whether the program will see paste markers.
    bracketed_paste: bool,
    /// Position in the escape-sequence grammar, kept across chunks so a sequence split by a
    /// chunk boundary is still seen.
    scan: Scan,
    /// The current CSI started with the DEC private marker `?`; only private modes are tracked,
    /// since `ESC [ 1 h` (no marker) is an unrelated ANSI mode.
    private: bool,
    /// No parameter byte was seen yet in the current CSI, so a `?` there is a marker.
    at_start: bool,
    /// Value of the parameter being read, saturating so garbage cannot overflow.
    param: u32,
    /// Parameters completed so far, since a cursor position request has exactly one.
    count: u8,
    /// Value of the first parameter, which identifies a status request.
    first: u32,
    /// Parameter 1 (DECCKM) appeared in the current CSI; modes may be combined, as in
    /// `ESC [ ? 1 ; 1049 h`, so each parameter is checked.
    has_cursor_keys: bool,
    /// Parameter 2004 (bracketed paste) appeared in the current CSI, for the same reason.
    has_paste: bool,
    /// Intermediate byte of the current CSI: it changes the meaning of the final byte, e.g. `!`
    /// turns `p` into DECSTR (soft reset).
    intermediate: Option<u8>,
    /// The current CSI has a shape this tracker does not act on, so it must not change any
    /// state.
    odd: bool,
}

impl TermModes {
    /// A tracker that has seen no output yet: cursor key mode unknown, bracketed paste off.
    pub fn new() -> Self {
        Self::default()
    }

    /// Scans a chunk of output and returns how many cursor position requests (`ESC [ 6 n` or
    /// `ESC [ ? 6 n`) ended in it; answer each with [`cursor_position_report`].
    pub fn observe(&mut self, output: &[u8]) -> usize {
        let mut requests = 0;
        for &b in output {
            match self.scan {
                Scan::Ground => {
                    if b == ESC {
                        self.scan = Scan::Escape;
                    }
                }
                Scan::Escape => match b {
                    b'[' => self.begin_csi(),
                    ESC => {}
                    b'c' => {
                        // RIS: full reset.
                        self.app_cursor = Some(false);
                        self.bracketed_paste = false;
                        self.scan = Scan::Ground;
                    }
                    _ => self.scan = Scan::Ground,
                },
                Scan::Csi => match b {
                    b'0'..=b'9' => {
                        self.param = self
                            .param
                            .saturating_mul(10)
                            .saturating_add(u32::from(b - b'0'));
                        self.at_start = false;
                    }
                    b';' => {
                        self.end_param();
                        self.at_start = false;
                    }
                    b'?' if self.at_start => {
                        self.private = true;
                        self.at_start = false;
                    }
                    b':' | b'<'..=b'?' => {
                        self.odd = true;
                        self.at_start = false;
                    }
                    0x20..=0x2f => {
                        if self.intermediate.is_some() {
                            self.odd = true;
                        }
                        self.intermediate = Some(b);
                    }
                    0x40..=0x7e => {
                        self.end_param();
                        requests += self.dispatch(b);
                        self.scan = Scan::Ground;
                    }
                    ESC => self.scan = Scan::Escape,
                    0x18 | 0x1a => self.scan = Scan::Ground,
                    0x00..=0x1f | 0x7f => {}
                    _ => self.scan = Scan::Ground,
                },
            }
        }
        requests
    }

    /// Whether the program put the cursor keys in application mode (`ESC [ ? 1 h`); false
    /// while unknown.
    pub fn app_cursor(&self) -> bool {
        self.app_cursor.unwrap_or(false)
    }

    /// Whether the program has set or reset the cursor key mode yet.
    pub fn cursor_mode_known(&self) -> bool {
        self.app_cursor.is_some()
    }

    /// Whether the program enabled bracketed paste (`ESC [ ? 2004 h`).
    pub fn bracketed_paste(&self) -> bool {
        self.bracketed_paste
    }

    fn begin_csi(&mut self) {
        self.scan = Scan::Csi;
        self.private = false;
        self.at_start = true;
        self.param = 0;
        self.count = 0;
        self.first = 0;
        self.has_cursor_keys = false;
        self.has_paste = false;
        self.intermediate = None;
        self.odd = false;
    }

    fn end_param(&mut self) {
        if self.count == 0 {
            self.first = self.param;
        }
        match self.param {
            1 => self.has_cursor_keys = true,
            2004 => self.has_paste = true,
            _ => {}
        }
        self.count = self.count.saturating_add(1);
        self.param = 0;
    }

    /// Acts on a finished CSI; returns 1 for a cursor position request.
    fn dispatch(&mut self, final_byte: u8) -> usize {
        if self.odd {
            return 0;
        }
        match (final_byte, self.intermediate) {
            (b'h' | b'l', None) if self.private => {
                let on = final_byte == b'h';
                if self.has_cursor_keys {
                    self.app_cursor = Some(on);
                }
                if self.has_paste {
                    self.bracketed_paste = on;
                }
                0
            }
            (b'n', None) if self.count == 1 && self.first == 6 => 1,
            (b'p', Some(b'!')) if !self.private => {
                // DECSTR: soft reset.
                self.app_cursor = Some(false);
                self.bracketed_paste = false;
                0
            }
            _ => 0,
        }
    }
}

/// The answer to a cursor position request: `ESC [ row ; col R` (1-based).
pub fn cursor_position_report(row: u16, col: u16) -> Vec<u8> {
    format!("\x1b[{row};{col}R").into_bytes()
}

#[cfg(test)]
mod tests;
