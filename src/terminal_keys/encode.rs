//! tmux-style key names to the bytes an xterm-compatible terminal would send.

use super::KeyError;

const ESC: u8 = 0x1b;

/// Modifier keys held with a key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Mods {
    shift: bool,
    alt: bool,
    ctrl: bool,
}

impl Mods {
    fn any(self) -> bool {
        self.shift || self.alt || self.ctrl
    }

    /// The xterm modifier parameter: 1 + shift(1) + alt(2) + ctrl(4).
    fn xterm_param(self) -> u8 {
        1 + u8::from(self.shift) + 2 * u8::from(self.alt) + 4 * u8::from(self.ctrl)
    }
}

/// What a key name stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Named {
    Enter,
    Tab,
    BackTab,
    Escape,
    Space,
    Backspace,
    /// Arrows, Home and End: `ESC [ x`, `ESC O x` in application cursor mode, or
    /// `ESC [ 1 ; m x` with modifiers.
    Cursor(u8),
    /// Keys sent as `ESC [ n ~`, or `ESC [ n ; m ~` with modifiers.
    Tilde(u8),
    /// F1–F4: `ESC O x`, or `ESC [ 1 ; m x` with modifiers.
    Ss3Function(u8),
    /// Keypad keys in application keypad mode: `ESC O x`.
    Keypad(u8),
}

/// Looks up a key name (already lowercased).
fn lookup(name: &str) -> Option<Named> {
    use Named::*;
    let key = match name {
        "enter" | "return" => Enter,
        "tab" => Tab,
        "btab" => BackTab,
        "escape" | "esc" => Escape,
        "space" => Space,
        "bspace" | "backspace" => Backspace,
        "up" => Cursor(b'A'),
        "down" => Cursor(b'B'),
        "right" => Cursor(b'C'),
        "left" => Cursor(b'D'),
        "home" => Cursor(b'H'),
        "end" => Cursor(b'F'),
        "insert" | "ic" => Tilde(2),
        "delete" | "del" | "dc" => Tilde(3),
        "pageup" | "pgup" | "ppage" => Tilde(5),
        "pagedown" | "pgdn" | "npage" => Tilde(6),
        "f1" => Ss3Function(b'P'),
        "f2" => Ss3Function(b'Q'),
        "f3" => Ss3Function(b'R'),
        "f4" => Ss3Function(b'S'),
        "f5" => Tilde(15),
        "f6" => Tilde(17),
        "f7" => Tilde(18),
        "f8" => Tilde(19),
        "f9" => Tilde(20),
        "f10" => Tilde(21),
        "f11" => Tilde(23),
        "f12" => Tilde(24),
        "kp/" => Keypad(b'o'),
        "kp*" => Keypad(b'j'),
        "kp-" => Keypad(b'm'),
        "kp+" => Keypad(b'k'),
        "kp." => Keypad(b'n'),
        "kpenter" => Keypad(b'M'),
        _ => {
            let digit = name.strip_prefix("kp")?;
            let d = match digit.as_bytes() {
                [d @ b'0'..=b'9'] => *d,
                _ => return None,
            };
            Keypad(b'p' + (d - b'0'))
        }
    };
    Some(key)
}

/// Encodes a list of keys, in order, into the bytes to write to the terminal.
///
/// `app_cursor` is the program's cursor key mode (DECCKM): when set, unmodified arrows, Home
/// and End are sent in their `ESC O x` form.
///
/// # Errors
///
/// The first key that [`encode_key`] rejects.
pub fn encode_keys(keys: &[String], app_cursor: bool) -> Result<Vec<u8>, KeyError> {
    let mut out = Vec::new();
    for key in keys {
        out.extend(encode_key(key, app_cursor)?);
    }
    Ok(out)
}

/// Encodes one key.
///
/// Accepted forms: a single character (sent as is), a key name such as `Enter`, `Up` or `F5`
/// (case-insensitive), `^X` for a control character, and modifier prefixes `C-` (ctrl),
/// `M-` (alt/meta) and `S-` (shift) in any order and combination, e.g. `C-M-x` or `S-F5`.
///
/// # Errors
///
/// An empty or unknown key name, or a modifier the key cannot carry (such as `C-1` or
/// `S-Enter`).
pub fn encode_key(key: &str, app_cursor: bool) -> Result<Vec<u8>, KeyError> {
    let mut out = Vec::new();
    if let Some(c) = single_char(key) {
        push_char(c, &mut out);
        return Ok(out);
    }
    let token = key.trim();
    if token.is_empty() {
        return Err(KeyError::Empty {
            key: key.to_owned(),
        });
    }
    if let Some(c) = single_char(token) {
        push_char(c, &mut out);
        return Ok(out);
    }
    if let Some(c) = token.strip_prefix('^').and_then(single_char) {
        let mods = Mods {
            ctrl: true,
            ..Mods::default()
        };
        encode_char(key, c, mods, &mut out)?;
        return Ok(out);
    }
    let (mods, base) = split_modifiers(token);
    if let Some(c) = single_char(base) {
        encode_char(key, c, mods, &mut out)?;
        return Ok(out);
    }
    let named = lookup(&base.to_ascii_lowercase()).ok_or_else(|| KeyError::Unknown {
        key: key.to_owned(),
    })?;
    encode_named(key, base, named, mods, app_cursor, &mut out)?;
    Ok(out)
}

/// The only char of `s`, if it has exactly one.
fn single_char(s: &str) -> Option<char> {
    let mut chars = s.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) => Some(c),
        _ => None,
    }
}

/// Strips `C-`, `M-` and `S-` prefixes (case-insensitive) while a key name remains after them.
fn split_modifiers(token: &str) -> (Mods, &str) {
    let mut mods = Mods::default();
    let mut rest = token;
    loop {
        let b = rest.as_bytes();
        if b.len() <= 2 || b[1] != b'-' {
            break;
        }
        match b[0].to_ascii_lowercase() {
            b'c' => mods.ctrl = true,
            b'm' => mods.alt = true,
            b's' => mods.shift = true,
            _ => break,
        }
        rest = &rest[2..];
    }
    (mods, rest)
}

fn push_char(c: char, out: &mut Vec<u8>) {
    let mut buf = [0u8; 4];
    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
}

/// The control character for ctrl + `c`, as a terminal sends it.
fn ctrl_byte(c: char) -> Option<u8> {
    match c {
        'a'..='z' => Some(c as u8 - b'a' + 1),
        'A'..='Z' => Some(c as u8 - b'A' + 1),
        '@' | ' ' => Some(0),
        '[' => Some(0x1b),
        '\\' => Some(0x1c),
        ']' => Some(0x1d),
        '^' => Some(0x1e),
        '_' => Some(0x1f),
        '?' => Some(0x7f),
        _ => None,
    }
}

fn modifier_error(key: &str, modifier: &'static str, base: impl Into<String>) -> KeyError {
    KeyError::Modifier {
        key: key.to_owned(),
        modifier,
        base: base.into(),
    }
}

/// Encodes a single character with modifiers.
fn encode_char(key: &str, c: char, mods: Mods, out: &mut Vec<u8>) -> Result<(), KeyError> {
    if mods.alt {
        out.push(ESC);
    }
    if mods.ctrl {
        let b = ctrl_byte(c).ok_or_else(|| modifier_error(key, "ctrl", c))?;
        out.push(b);
    } else if mods.shift {
        push_char(c.to_ascii_uppercase(), out);
    } else {
        push_char(c, out);
    }
    Ok(())
}

/// Encodes a named key with modifiers.
fn encode_named(
    key: &str,
    base: &str,
    named: Named,
    mods: Mods,
    app_cursor: bool,
    out: &mut Vec<u8>,
) -> Result<(), KeyError> {
    let m = mods.xterm_param();
    match named {
        Named::Cursor(f) => {
            if mods.any() {
                out.extend_from_slice(format!("\x1b[1;{m}").as_bytes());
                out.push(f);
            } else {
                out.extend_from_slice(if app_cursor { b"\x1bO" } else { b"\x1b[" });
                out.push(f);
            }
        }
        Named::Tilde(n) => {
            let seq = if mods.any() {
                format!("\x1b[{n};{m}~")
            } else {
                format!("\x1b[{n}~")
            };
            out.extend_from_slice(seq.as_bytes());
        }
        Named::Ss3Function(f) => {
            if mods.any() {
                out.extend_from_slice(format!("\x1b[1;{m}").as_bytes());
            } else {
                out.extend_from_slice(b"\x1bO");
            }
            out.push(f);
        }
        Named::Tab if mods.shift => {
            refuse(key, base, mods.ctrl, "ctrl")?;
            alt_prefix(mods, out);
            out.extend_from_slice(b"\x1b[Z");
        }
        Named::Space if mods.ctrl => {
            alt_prefix(mods, out);
            out.push(0);
        }
        Named::Space => {
            alt_prefix(mods, out);
            out.push(b' ');
        }
        Named::BackTab => {
            refuse(key, base, mods.ctrl, "ctrl")?;
            alt_prefix(mods, out);
            out.extend_from_slice(b"\x1b[Z");
        }
        Named::Enter => plain(key, base, mods, b"\r", out)?,
        Named::Tab => plain(key, base, mods, b"\t", out)?,
        Named::Escape => plain(key, base, mods, &[ESC], out)?,
        Named::Backspace => plain(key, base, mods, &[0x7f], out)?,
        Named::Keypad(x) => plain(key, base, mods, &[ESC, b'O', x], out)?,
    }
    Ok(())
}

/// Encodes a key that only combines with alt (as an ESC prefix).
fn plain(
    key: &str,
    base: &str,
    mods: Mods,
    bytes: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), KeyError> {
    refuse(key, base, mods.ctrl, "ctrl")?;
    refuse(key, base, mods.shift, "shift")?;
    alt_prefix(mods, out);
    out.extend_from_slice(bytes);
    Ok(())
}

fn refuse(key: &str, base: &str, held: bool, modifier: &'static str) -> Result<(), KeyError> {
    if held {
        Err(modifier_error(key, modifier, base))
    } else {
        Ok(())
    }
}

fn alt_prefix(mods: Mods, out: &mut Vec<u8>) {
    if mods.alt {
        out.push(ESC);
    }
}

#[cfg(test)]
mod tests;
