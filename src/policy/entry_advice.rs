//! What an allowlist entry trusts, said to the operator when they write one: `moat allowlist
//! add` and `moat doctor` print these (docs/policy.md, "What an entry trusts").
//!
//! Pure: the callers hand in the entry and which policy it is for.

use super::gadgets;
use super::known_safe;
use super::paths::basename;
use super::settings::Policy;

/// Where an entry applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryPlace {
    /// `[policy.sandbox]`: an allowlisted program runs with any argv but its gadget options.
    Sandbox,
    /// `[policy.host]`: an allowlisted program runs unasked only with an argv that fits a
    /// profile.
    Host,
}

/// The warning for `entry` (an allowlist entry as written) under `policy`, if it deserves one.
pub fn entry_warning(entry: &str, policy: &Policy, place: EntryPlace) -> Option<String> {
    let name = basename(entry);
    let glob = name.contains(['*', '?', '[']);
    let profiled = policy.argv_profiles.contains_key(name);
    match place {
        EntryPlace::Host if glob => Some(format!(
            "{entry}: on the host an allowlist entry runs a command unasked only with an argv \
             profile; a glob covers programs by path, and those without a profile (built-in or \
             [policy.host.argv_profiles.NAME]) ask every time"
        )),
        EntryPlace::Host if !profiled && !known_safe::has_profile(name) => Some(format!(
            "{entry}: {name} has no argv profile, so on the host it asks every time (or is \
             refused with ask = off): an executable is only as safe as its options; write \
             [policy.host.argv_profiles.{name}] listing the options it may take \
             (docs/policy.md, \"Argv profiles\")"
        )),
        EntryPlace::Host => None,
        EntryPlace::Sandbox if profiled || glob => None,
        EntryPlace::Sandbox => gadgets::program(name).map(|program| {
            let options: Vec<&str> = program.gadgets.iter().map(|g| g.option).collect();
            format!(
                "{entry}: {name} has options that run, load or write something else ({}); \
                 moat treats them as misses, and any other option passes: to allow only \
                 what you expect, write [policy.sandbox.argv_profiles.{name}] \
                 (docs/policy.md, \"Gadget options\")",
                options.join(", ")
            )
        }),
    }
}

/// The warnings for every configured entry of `policy`.
pub fn policy_warnings(policy: &Policy, place: EntryPlace) -> Vec<String> {
    policy
        .allowlist
        .iter()
        .filter_map(|entry| entry_warning(entry, policy, place))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::BinProfile;

    #[test]
    fn warnings_table() {
        let mut policy = Policy::default();
        policy.argv_profiles.insert(
            "make".into(),
            BinProfile {
                max_positional: 1,
                ..BinProfile::default()
            },
        );
        let rows: &[(&str, EntryPlace, Option<&str>)] = &[
            (
                "/usr/bin/tar",
                EntryPlace::Host,
                Some("tar has no argv profile"),
            ),
            (
                "/usr/bin/*",
                EntryPlace::Host,
                Some("a glob covers programs"),
            ),
            ("/usr/bin/ls", EntryPlace::Host, None),
            ("/usr/bin/make", EntryPlace::Host, None),
            (
                "/usr/bin/tar",
                EntryPlace::Sandbox,
                Some("--checkpoint-action"),
            ),
            ("rg", EntryPlace::Sandbox, Some("--pre")),
            ("/usr/bin/ls", EntryPlace::Sandbox, None),
            ("/usr/bin/*", EntryPlace::Sandbox, None),
        ];
        for (entry, place, want) in rows {
            let got = entry_warning(entry, &policy, *place);
            match (got.as_deref(), want) {
                (None, None) => {}
                (Some(got), Some(want)) => assert!(got.contains(want), "{entry}: {got}"),
                (got, want) => panic!("{entry} {place:?}: got {got:?}, want {want:?}"),
            }
        }
    }
}
