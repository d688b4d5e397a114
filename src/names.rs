//! Friendly process ids such as `warm-river`.

use rand::Rng;

/// First halves of ids: short, lowercase, inoffensive.
pub const ADJECTIVES: [&str; 64] = [
    "amber", "azure", "bold", "brave", "breezy", "bright", "brisk", "calm", "cheerful", "clever",
    "cosmic", "crisp", "curious", "dapper", "eager", "early", "fancy", "fleet", "fresh", "gentle",
    "glad", "golden", "grand", "green", "happy", "hidden", "humble", "jolly", "keen", "kind",
    "lively", "lucky", "mellow", "merry", "misty", "nimble", "noble", "patient", "polite", "proud",
    "quick", "quiet", "rapid", "rustic", "shiny", "silent", "silver", "sleek", "smooth", "snowy",
    "solar", "spry", "steady", "sunny", "swift", "tidy", "tranquil", "velvet", "vivid", "warm",
    "wise", "witty", "young", "zesty",
];

/// Second halves of ids: short, lowercase, concrete nouns.
pub const NOUNS: [&str; 64] = [
    "badger", "beacon", "breeze", "brook", "canyon", "cedar", "cliff", "cloud", "comet", "coral",
    "crane", "creek", "delta", "dune", "ember", "falcon", "fern", "field", "fjord", "forest",
    "garden", "glacier", "grove", "harbor", "harvest", "heron", "hill", "island", "lagoon", "lake",
    "lantern", "maple", "marsh", "meadow", "mesa", "moon", "nebula", "oak", "ocean", "orchard",
    "otter", "pebble", "pine", "planet", "pond", "prairie", "quartz", "reef", "ridge", "river",
    "robin", "sparrow", "spring", "star", "stone", "stream", "summit", "sun", "thunder", "tide",
    "trail", "valley", "willow", "wind",
];

/// Random `adjective-noun` ids tried before falling back to numbered ones.
const PLAIN_TRIES: usize = 12;

/// Returns an id for which `is_taken` is false: `adjective-noun`, or when a dozen random picks
/// are all taken, the last pick with `-2`, `-3`, … appended. Terminates as long as only finitely
/// many ids are taken.
pub fn generate(is_taken: impl Fn(&str) -> bool) -> String {
    generate_with(&mut rand::rng(), is_taken)
}

/// Like [`generate`], drawing from `rng` (for reproducible tests).
pub fn generate_with<R: Rng + ?Sized>(rng: &mut R, is_taken: impl Fn(&str) -> bool) -> String {
    let mut base = String::new();
    for _ in 0..PLAIN_TRIES {
        base = format!(
            "{}-{}",
            ADJECTIVES[rng.random_range(0..ADJECTIVES.len())],
            NOUNS[rng.random_range(0..NOUNS.len())]
        );
        if !is_taken(&base) {
            return base;
        }
    }
    let mut n: u64 = 2;
    loop {
        let candidate = format!("{base}-{n}");
        if !is_taken(&candidate) {
            return candidate;
        }
        n += 1;
    }
}

#[cfg(test)]
mod tests;
