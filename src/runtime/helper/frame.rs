//! The helper protocol's frames: one codec, shared word for word by moat and `moat-helper`
//! (the helper includes this file), so both ends read the same bytes the same way.
//!
//! It uses `std` only: the helper is built without crates (docs/helper.md, "The binary"), so
//! the error type implements `Display` by hand instead of through `thiserror`.
//!
//! ```text
//! frame = len:u32be  kind:u8  id:u32be  payload      (len counts kind, id and payload)
//! ```
//! Strings and byte strings in a payload are `u32be` length + bytes; lists are a `u32be`
//! count + items. Every length is checked against what is left of the frame before anything is
//! allocated, and a frame longer than [`MAX_FRAME`] is refused from its header alone, so a
//! peer can make the reader hold at most one maximal frame (docs/helper.md, "Protocol").

use std::fmt;

/// The protocol version both ends speak; the handshake refuses any other.
pub const VERSION: u32 = 3;
/// Opens every `Hello`, so a stray program on the socket is told apart from a helper.
pub const MAGIC: &[u8] = b"moat-helper";
/// Largest frame body either end accepts (a spawn with its argv and env, or one output chunk).
pub const MAX_FRAME: usize = 1 << 20;
/// Largest output or input chunk one frame carries: room to spare under [`MAX_FRAME`].
pub const MAX_CHUNK: usize = 64 * 1024;
/// Most argv or env entries one spawn may carry.
pub const MAX_ITEMS: usize = 8192;
/// Header bytes before the payload: length, kind, id.
const HEADER: usize = 4 + 1 + 4;

/// One message, either way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Msg {
    /// Both ways, first on a connection: the sender's protocol version.
    Hello { version: u32 },
    /// moat → helper: start a command; its request id names it in every later frame.
    Spawn(Spawn),
    /// moat → helper: bytes for a PTY command's terminal.
    Input { id: u32, data: Vec<u8> },
    /// moat → helper: a PTY command's terminal size.
    Resize { id: u32, rows: u16, cols: u16 },
    /// moat → helper: a signal for the command's whole process group.
    Signal { id: u32, signal: i32 },
    /// moat → helper: count what a finished command left in the container: the live
    /// processes of group `pgid`, and those whose environment carries `MOAT_PROCESS=<process>`
    /// (docs/helper.md, "What a command left"). Answered by `Seen`.
    Look { id: u32, pgid: u32, process: String },
    /// helper → moat: the command runs, as this pid (in the container's pid namespace).
    Started { id: u32, pid: u32 },
    /// helper → moat: terminal output (PTY) or captured stdout+stderr (capture).
    Output { id: u32, data: Vec<u8> },
    /// helper → moat: the command ended; its status as the engine reports one (128 + n for a
    /// signal n). Nothing follows for this id.
    Exited { id: u32, status: i32 },
    /// helper → moat: the request failed (the command could not start, or the frame was
    /// refused). Nothing follows for this id.
    Failed { id: u32, message: String },
    /// helper → moat: the counts a `Look` asked for, each `None` where the helper could not
    /// tell (a process it may not read). Nothing follows for this id.
    Seen {
        id: u32,
        group: Option<u32>,
        marked: Option<u32>,
    },
}

/// How to start one command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Spawn {
    /// The request id moat chose; unique among the connection's requests in flight.
    pub id: u32,
    /// Run in a new pseudo-terminal the helper allocates (the command leads its session).
    pub tty: bool,
    /// Send stdout+stderr back as `Output` (short helper commands); otherwise they go to
    /// /dev/null, as the wrapper writes its command's output to the log itself.
    pub capture: bool,
    /// Initial terminal size for `tty` (0: leave the kernel's default).
    pub rows: u16,
    pub cols: u16,
    /// Working directory; empty for the helper's own (the container's).
    pub workdir: String,
    pub argv: Vec<String>,
    /// `KEY=VALUE` entries laid over the helper's own environment, as the engine lays an
    /// exec's env over the container's.
    pub env: Vec<String>,
    /// Non-empty: the id of a moat process whose run files the helper keeps itself, doing the
    /// wrapper's work (docs/helper.md, "The wrapper in the helper"); `argv` is then the login
    /// shell's own (`sh -lc SCRIPT`). Empty: `argv` runs as given.
    pub wrap: String,
    /// With `wrap`: the command's stderr goes to its own run file (`<id>.err`), not the log.
    pub split: bool,
}

/// Why bytes are not a frame. Any of these ends the connection they came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// The header announces more than [`MAX_FRAME`].
    TooLarge(usize),
    /// The header announces less than a kind and an id.
    TooShort(usize),
    /// A kind no version of the protocol has.
    UnknownKind(u8),
    /// A field runs past the frame, a list is too long, text is not UTF-8, or bytes are left.
    Malformed(&'static str),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::TooLarge(n) => {
                write!(f, "frame of {n} bytes is over the {MAX_FRAME} limit")
            }
            FrameError::TooShort(n) => write!(f, "frame of {n} bytes has no header"),
            FrameError::UnknownKind(k) => write!(f, "unknown frame kind {k}"),
            FrameError::Malformed(what) => write!(f, "malformed frame: {what}"),
        }
    }
}

impl std::error::Error for FrameError {}

mod kind {
    pub const HELLO: u8 = 1;
    pub const SPAWN: u8 = 2;
    pub const INPUT: u8 = 3;
    pub const RESIZE: u8 = 4;
    pub const SIGNAL: u8 = 5;
    pub const LOOK: u8 = 6;
    pub const STARTED: u8 = 16;
    pub const OUTPUT: u8 = 17;
    pub const EXITED: u8 = 18;
    pub const FAILED: u8 = 19;
    pub const SEEN: u8 = 20;
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u32(out, b.len() as u32);
    out.extend_from_slice(b);
}

fn put_list(out: &mut Vec<u8>, items: &[String]) {
    put_u32(out, items.len() as u32);
    for s in items {
        put_bytes(out, s.as_bytes());
    }
}

/// The frame for `msg`. The caller keeps chunks under [`MAX_CHUNK`]; a spawn too large for one
/// frame is refused by the reader, not cut here.
pub fn encode(msg: &Msg) -> Vec<u8> {
    let mut out = vec![0u8; 4];
    let (k, id) = match msg {
        Msg::Hello { .. } => (kind::HELLO, 0),
        Msg::Spawn(s) => (kind::SPAWN, s.id),
        Msg::Input { id, .. } => (kind::INPUT, *id),
        Msg::Resize { id, .. } => (kind::RESIZE, *id),
        Msg::Signal { id, .. } => (kind::SIGNAL, *id),
        Msg::Look { id, .. } => (kind::LOOK, *id),
        Msg::Started { id, .. } => (kind::STARTED, *id),
        Msg::Output { id, .. } => (kind::OUTPUT, *id),
        Msg::Exited { id, .. } => (kind::EXITED, *id),
        Msg::Failed { id, .. } => (kind::FAILED, *id),
        Msg::Seen { id, .. } => (kind::SEEN, *id),
    };
    out.push(k);
    put_u32(&mut out, id);
    match msg {
        Msg::Hello { version } => {
            put_bytes(&mut out, MAGIC);
            put_u32(&mut out, *version);
        }
        Msg::Spawn(s) => {
            out.push(u8::from(s.tty) | (u8::from(s.capture) << 1) | (u8::from(s.split) << 2));
            out.extend_from_slice(&s.rows.to_be_bytes());
            out.extend_from_slice(&s.cols.to_be_bytes());
            put_bytes(&mut out, s.workdir.as_bytes());
            put_list(&mut out, &s.argv);
            put_list(&mut out, &s.env);
            put_bytes(&mut out, s.wrap.as_bytes());
        }
        Msg::Input { data, .. } | Msg::Output { data, .. } => put_bytes(&mut out, data),
        Msg::Resize { rows, cols, .. } => {
            out.extend_from_slice(&rows.to_be_bytes());
            out.extend_from_slice(&cols.to_be_bytes());
        }
        Msg::Signal { signal, .. } => put_u32(&mut out, *signal as u32),
        Msg::Look { pgid, process, .. } => {
            put_u32(&mut out, *pgid);
            put_bytes(&mut out, process.as_bytes());
        }
        Msg::Started { pid, .. } => put_u32(&mut out, *pid),
        Msg::Exited { status, .. } => put_u32(&mut out, *status as u32),
        Msg::Failed { message, .. } => put_bytes(&mut out, message.as_bytes()),
        Msg::Seen { group, marked, .. } => {
            out.push(u8::from(group.is_some()) | (u8::from(marked.is_some()) << 1));
            put_u32(&mut out, group.unwrap_or(0));
            put_u32(&mut out, marked.unwrap_or(0));
        }
    }
    let len = (out.len() - 4) as u32;
    out[..4].copy_from_slice(&len.to_be_bytes());
    out
}

/// Reads fields off a frame body, never past its end.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], FrameError> {
        if self.rest.len() < n {
            return Err(FrameError::Malformed(what));
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    fn u8(&mut self, what: &'static str) -> Result<u8, FrameError> {
        Ok(self.take(1, what)?[0])
    }

    fn u16(&mut self, what: &'static str) -> Result<u16, FrameError> {
        let b = self.take(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, FrameError> {
        let b = self.take(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn bytes(&mut self, what: &'static str) -> Result<&'a [u8], FrameError> {
        let n = self.u32(what)? as usize;
        self.take(n, what)
    }

    fn text(&mut self, what: &'static str) -> Result<String, FrameError> {
        let b = self.bytes(what)?;
        let s = std::str::from_utf8(b).map_err(|_| FrameError::Malformed(what))?;
        Ok(s.to_string())
    }

    fn list(&mut self, what: &'static str) -> Result<Vec<String>, FrameError> {
        let n = self.u32(what)? as usize;
        // Each item costs at least its 4-byte length: a count the frame cannot hold is refused
        // before anything is reserved for it.
        if n > MAX_ITEMS || n > self.rest.len() / 4 {
            return Err(FrameError::Malformed(what));
        }
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            items.push(self.text(what)?);
        }
        Ok(items)
    }

    fn done(self) -> Result<(), FrameError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(FrameError::Malformed("bytes after the last field"))
        }
    }
}

/// Whether `id` may name a moat process in a frame: letters, digits and `-`, at most 64 bytes
/// (moat's generated ids; a wrapped spawn pastes it into file names).
fn plain_id(id: &str) -> bool {
    id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// The length a frame header announces, checked: `Ok(None)` while fewer than 4 bytes are in.
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, FrameError> {
    let Some(head) = buf.get(..4) else {
        return Ok(None);
    };
    let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
    if len > MAX_FRAME {
        return Err(FrameError::TooLarge(len));
    }
    if len < HEADER - 4 {
        return Err(FrameError::TooShort(len));
    }
    Ok(Some(len))
}

/// The first frame in `buf`: the message and the bytes it used, `Ok(None)` while it is
/// incomplete.
pub fn decode(buf: &[u8]) -> Result<Option<(Msg, usize)>, FrameError> {
    let Some(len) = frame_len(buf)? else {
        return Ok(None);
    };
    let Some(body) = buf.get(4..4 + len) else {
        return Ok(None);
    };
    Ok(Some((decode_body(body)?, 4 + len)))
}

/// A frame body (kind, id, payload) as a message.
pub fn decode_body(body: &[u8]) -> Result<Msg, FrameError> {
    let mut r = Reader { rest: body };
    let k = r.u8("kind")?;
    let id = r.u32("id")?;
    let msg = match k {
        kind::HELLO => {
            if r.bytes("magic")? != MAGIC {
                return Err(FrameError::Malformed("magic"));
            }
            Msg::Hello {
                version: r.u32("version")?,
            }
        }
        kind::SPAWN => {
            let flags = r.u8("flags")?;
            if flags & !0b111 != 0 {
                return Err(FrameError::Malformed("flags"));
            }
            let rows = r.u16("rows")?;
            let cols = r.u16("cols")?;
            let workdir = r.text("workdir")?;
            let argv = r.list("argv")?;
            let env = r.list("env")?;
            let wrap = r.text("wrap")?;
            if argv.is_empty() {
                return Err(FrameError::Malformed("argv"));
            }
            // A wrapped command's id names files: moat's own ids only (letters, digits, `-`).
            let plain = plain_id(&wrap);
            let split = flags & 4 != 0;
            if !plain || (split && wrap.is_empty()) || (!wrap.is_empty() && flags & 3 != 0) {
                return Err(FrameError::Malformed("wrap"));
            }
            Msg::Spawn(Spawn {
                id,
                tty: flags & 1 != 0,
                capture: flags & 2 != 0,
                rows,
                cols,
                workdir,
                argv,
                env,
                wrap,
                split,
            })
        }
        kind::INPUT => Msg::Input {
            id,
            data: r.bytes("data")?.to_vec(),
        },
        kind::RESIZE => Msg::Resize {
            id,
            rows: r.u16("rows")?,
            cols: r.u16("cols")?,
        },
        kind::SIGNAL => Msg::Signal {
            id,
            signal: r.u32("signal")? as i32,
        },
        kind::LOOK => {
            let pgid = r.u32("pgid")?;
            let process = r.text("process")?;
            // The id is matched as `MOAT_PROCESS=<id>`: one of moat's own, never empty.
            if process.is_empty() || !plain_id(&process) {
                return Err(FrameError::Malformed("process"));
            }
            Msg::Look { id, pgid, process }
        }
        kind::STARTED => Msg::Started {
            id,
            pid: r.u32("pid")?,
        },
        kind::OUTPUT => Msg::Output {
            id,
            data: r.bytes("data")?.to_vec(),
        },
        kind::EXITED => Msg::Exited {
            id,
            status: r.u32("status")? as i32,
        },
        kind::FAILED => Msg::Failed {
            id,
            message: r.text("message")?,
        },
        kind::SEEN => {
            let known = r.u8("known")?;
            if known & !0b11 != 0 {
                return Err(FrameError::Malformed("known"));
            }
            let group = r.u32("group")?;
            let marked = r.u32("marked")?;
            Msg::Seen {
                id,
                group: (known & 1 != 0).then_some(group),
                marked: (known & 2 != 0).then_some(marked),
            }
        }
        other => return Err(FrameError::UnknownKind(other)),
    };
    r.done()?;
    Ok(msg)
}
