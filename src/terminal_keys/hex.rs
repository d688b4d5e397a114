//! Raw bytes given as hex, for `send-keys` input that has no key name.

use super::KeyError;

/// Decodes hex items into bytes, in order.
///
/// Each item holds one or more hex bytes: `"1b"`, `"0x1b"`, `"1b5b41"`, `"1b 5b 41"` or
/// `"0x1b,0x5b"`. A lone digit (`"a"`) is one byte.
///
/// # Errors
///
/// [`KeyError::Hex`] naming the first item that is empty or not made of hex bytes.
pub fn decode_hex(hex: &[String]) -> Result<Vec<u8>, KeyError> {
    let mut out = Vec::new();
    for item in hex {
        decode_item(item, &mut out).ok_or_else(|| KeyError::Hex { item: item.clone() })?;
    }
    Ok(out)
}

/// Appends the bytes of one item, or returns `None` if it is malformed.
fn decode_item(item: &str, out: &mut Vec<u8>) -> Option<()> {
    let mut any = false;
    for token in item
        .split(|c: char| c.is_ascii_whitespace() || c == ',')
        .filter(|t| !t.is_empty())
    {
        any = true;
        let digits = token
            .strip_prefix("0x")
            .or_else(|| token.strip_prefix("0X"))
            .or_else(|| token.strip_prefix("\\x"))
            .unwrap_or(token)
            .as_bytes();
        match digits.len() {
            0 => return None,
            1 => out.push(hex_digit(digits[0])?),
            n if n % 2 == 0 => {
                for pair in digits.chunks(2) {
                    out.push(hex_digit(pair[0])? << 4 | hex_digit(pair[1])?);
                }
            }
            _ => return None,
        }
    }
    any.then_some(())
}

fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
