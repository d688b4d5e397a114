//! Tests of the friendly process ids.

use super::*;
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::cell::RefCell;
use std::collections::HashSet;

fn is_plain_id(id: &str) -> bool {
    match id.split_once('-') {
        Some((a, n)) => ADJECTIVES.contains(&a) && NOUNS.contains(&n),
        None => false,
    }
}

#[test]
fn word_lists() {
    for (name, list) in [("adjectives", &ADJECTIVES), ("nouns", &NOUNS)] {
        let unique: HashSet<&str> = list.iter().copied().collect();
        assert_eq!(unique.len(), 64, "{name} has duplicates");
        for w in list.iter() {
            assert!(
                !w.is_empty() && w.len() <= 8 && w.bytes().all(|b| b.is_ascii_lowercase()),
                "{name}: {w:?}"
            );
        }
        let mut sorted = list.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, list.to_vec(), "{name} not sorted");
    }
}

#[test]
fn format() {
    for _ in 0..200 {
        let id = generate(|_| false);
        assert!(is_plain_id(&id), "{id}");
    }
}

#[test]
fn reproducible_with_seed() {
    let a = generate_with(&mut StdRng::seed_from_u64(7), |_| false);
    let b = generate_with(&mut StdRng::seed_from_u64(7), |_| false);
    assert_eq!(a, b);
}

#[test]
fn avoids_taken_ids() {
    let taken: RefCell<HashSet<String>> = RefCell::new(HashSet::new());
    let mut rng = StdRng::seed_from_u64(1);
    // More ids than adjective-noun pairs, so numbered ids must appear too.
    for _ in 0..5_000 {
        let id = generate_with(&mut rng, |s| taken.borrow().contains(s));
        assert!(taken.borrow_mut().insert(id.clone()), "duplicate {id}");
    }
    let taken = taken.into_inner();
    assert!(taken.iter().any(|id| id.ends_with("-2")));
    for id in &taken {
        let parts: Vec<&str> = id.split('-').collect();
        assert!(parts.len() == 2 || parts.len() == 3, "{id}");
        assert!(is_plain_id(&format!("{}-{}", parts[0], parts[1])), "{id}");
        if let Some(n) = parts.get(2) {
            assert!(n.parse::<u64>().unwrap() >= 2, "{id}");
        }
    }
}

#[test]
fn numbered_fallback() {
    let rows: &[(&str, usize)] = &[
        // (first free suffix, how many numbered ids are taken).
        ("-2", 0),
        ("-3", 1),
        ("-7", 5),
    ];
    for (suffix, numbered_taken) in rows {
        let id = generate(|s| match s.rsplit_once('-') {
            Some((head, n)) if head.contains('-') => {
                n.parse::<usize>().is_ok_and(|n| n < 2 + numbered_taken)
            }
            _ => true,
        });
        assert!(id.ends_with(suffix), "{id}");
        assert!(is_plain_id(id.strip_suffix(suffix).unwrap()), "{id}");
    }
}
