//! Bracketed paste.

/// Sent before pasted text so the program knows it is a paste, not typing.
pub const PASTE_START: &[u8] = b"\x1b[200~";
/// Sent after pasted text.
pub const PASTE_END: &[u8] = b"\x1b[201~";

/// The bytes to write for pasting `text`: wrapped in bracketed-paste markers when `bracketed`,
/// with every end marker inside the text removed so the paste cannot end early and have the
/// rest run as typed input.
pub fn paste(text: &str, bracketed: bool) -> Vec<u8> {
    if !bracketed {
        return text.as_bytes().to_vec();
    }
    let mut out = Vec::with_capacity(text.len() + PASTE_START.len() + PASTE_END.len());
    out.extend_from_slice(PASTE_START);
    let body_start = out.len();
    for &b in text.as_bytes() {
        out.push(b);
        // Checking after every byte also catches markers formed by removing an inner one.
        if out.len() - body_start >= PASTE_END.len() && out.ends_with(PASTE_END) {
            out.truncate(out.len() - PASTE_END.len());
        }
    }
    out.extend_from_slice(PASTE_END);
    out
}

#[cfg(test)]
mod tests;
