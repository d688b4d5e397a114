//! The encoded forms of a secret that the redactor also hides: a command that pipes a secret
//! through `base64`, `xxd -p`, `rev` or a URL encoder must not print it either
//! (docs/security.md, "Secrets and redaction").
//!
//! Every form is a fixed string derived from the value alone, so matching stays a plain
//! multi-string search. Base64 depends on where the value falls in the encoded stream: for each
//! of the three byte alignments only the characters computed from the value's bits alone are
//! fixed; one character at each end mixes in neighbouring bytes and may stay visible (at most
//! 4 bits of the value each). When the value ends the stream, its last character and padding
//! are fixed too and are hidden with it.

/// Derived forms shorter than this are not matched: a few characters occur in ordinary text
/// too often to hide them. The literal value is always matched, whatever its length.
pub const MIN_FORM_CHARS: usize = 8;

const STD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// The forms of `value` to hide besides the value itself: reversed, hex (lower and upper),
/// percent-encoded (the common encoders' choices) and base64 (standard and URL-safe, three
/// alignments, padded and unpadded). Without duplicates, without the value itself, and without
/// forms shorter than [`MIN_FORM_CHARS`].
pub fn encoded_forms(value: &str) -> Vec<String> {
    let bytes = value.as_bytes();
    let mut forms = vec![value.chars().rev().collect::<String>()];
    let hex = hex::encode(bytes);
    forms.push(hex.to_ascii_uppercase());
    forms.push(hex);
    for upper in [true, false] {
        // RFC 3986 (encodeURIComponent-like, Python's `quote(safe='')`), Python's default
        // `quote` that keeps `/`, `quote_plus`, and every byte escaped.
        forms.push(percent(bytes, upper, is_unreserved));
        forms.push(percent(bytes, upper, |b| is_unreserved(b) || b == b'/'));
        forms.push(percent(bytes, upper, |b| is_unreserved(b) || b == b' ').replace(' ', "+"));
        forms.push(percent(bytes, upper, |_| false));
    }
    for alphabet in [STD, URL] {
        for align in 0..3 {
            forms.extend(base64_forms(bytes, align, alphabet));
        }
    }
    let mut kept: Vec<String> = Vec::with_capacity(forms.len());
    for f in forms {
        if f != value && f.chars().count() >= MIN_FORM_CHARS && !kept.contains(&f) {
            kept.push(f);
        }
    }
    kept
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn percent(bytes: &[u8], upper: bool, keep: impl Fn(u8) -> bool) -> String {
    let mut out = String::with_capacity(bytes.len() * 3);
    for &b in bytes {
        if keep(b) {
            out.push(b as char);
        } else if upper {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push_str(&format!("%{b:02x}"));
        }
    }
    out
}

/// The value's base64 characters when `align` bytes (0–2) of other data precede it in its
/// 3-byte group: the fixed middle, and the ending with and without padding when the value ends
/// the stream.
fn base64_forms(bytes: &[u8], align: usize, alphabet: &[u8; 64]) -> Vec<String> {
    if bytes.is_empty() {
        return Vec::new();
    }
    let mut data = vec![0u8; align];
    data.extend_from_slice(bytes);
    let padded = encode_base64(&data, alphabet);
    // Characters whose 6 bits include a bit of the preceding bytes.
    let skip = (8 * align).div_ceil(6);
    // Characters made only of the value's bits; the next one mixes in what follows.
    let fixed = 8 * data.len() / 6;
    let unpadded = padded.trim_end_matches('=');
    let mut out = Vec::new();
    if fixed > skip {
        out.push(padded[skip..fixed].to_string());
    }
    if unpadded.len() > skip {
        out.push(unpadded[skip..].to_string());
        out.push(padded[skip..].to_string());
    }
    out
}

fn encode_base64(data: &[u8], alphabet: &[u8; 64]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(alphabet[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
