//! Pairing tokens (docs/nodes.md, "Pairing"): a node's operator issues one per gateway; the
//! node keeps only its SHA-256, so its state database never holds a token that works.

use rand::Rng;
use sha2::{Digest, Sha256};

/// The prefix every pairing token starts with, so one pasted in the wrong place is known.
pub const PREFIX: &str = "moatnode_";

/// A new token: the prefix and 32 random bytes in hex (256 bits: never guessable).
pub fn new_token() -> String {
    let bytes: [u8; 32] = rand::rng().random();
    format!("{PREFIX}{}", hex::encode(bytes))
}

/// What the node stores and looks a presented token up by.
pub fn hash_token(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_new_each_time_and_hash_stably() {
        let (a, b) = (new_token(), new_token());
        assert_ne!(a, b);
        assert!(a.starts_with(PREFIX) && a.len() == PREFIX.len() + 64);
        assert_eq!(hash_token(&a), hash_token(&a));
        assert_ne!(hash_token(&a), hash_token(&b));
        assert_eq!(hash_token(&a).len(), 64);
    }
}
