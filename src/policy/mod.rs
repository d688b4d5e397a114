//! The policy engine: decides whether a command runs, needs an operator, or is refused.
//!
//! Pure and synchronous: no I/O, no async. The caller resolves command names through PATH
//! (see [`command_names`]) and hands the results over through a [`Resolver`].

mod allowlist;
mod analysis;
mod bin_profiles;
mod bounds;
mod command_words;
mod compose;
mod entry_advice;
mod env;
pub(crate) mod env_names;
mod error;
mod evaluate;
mod explain;
mod gadgets;
mod git;
mod inline_eval;
pub(crate) mod interpreters;
mod ir;
mod judge;
mod known_safe;
mod levels;
mod options;
mod parse;
mod paths;
mod patterns;
mod plan;
mod probe;
mod resolve;
mod safe_bins;
mod settings;
mod verdict;
mod word;
mod workdir;
mod wrappers;

#[cfg(test)]
mod tests;

pub use allowlist::{Allowlist, Candidate};
pub use analysis::{analyse, Parsed};
pub use bin_profiles::BinProfile;
pub use bounds::{check as check_bounds, Bounds, BoundsError, BOUNDS};
pub use compose::{compose, reads_entries, with_entries, Layers, RequestLevels, SessionOverride};
pub use entry_advice::{entry_warning, policy_warnings, EntryPlace};
pub use env::findings as env_findings;
pub(crate) use env::{forbidden as env_forbidden, is_valid_name as is_env_name};
pub use error::PolicyError;
pub use evaluate::{command_names, evaluate, evaluate_parsed, pattern_words, source_words};
pub use explain::{explain_json, explain_text};
pub(crate) use inline_eval::unreviewed_source;
#[cfg(test)]
pub(crate) use inline_eval::{
    label as inline_eval_label, program_path as program_path_of, source_word as source_word_of,
};
pub use ir::{Joiner, Redirect, Script, Segment, TimeKeyword};
pub use judge::{covered, judge, must_ask, Standing};
pub use levels::{Ask, Security};
#[cfg(test)]
pub(crate) use parse::counted as parse_count;
pub use parse::parse_script;
pub use patterns::{ArgvPattern, PatternSet};
pub use plan::{render, Plan, PlannedSegment};
pub(crate) use resolve::check_trusted;
pub use resolve::{MapResolver, Resolver};
pub use settings::{Policy, DEFAULT_SAFE_BINS, DEFAULT_TRUSTED_DIRS};
pub use verdict::{Decision, Evaluation, Request, SegmentOutcome, SegmentReport, NO_ENV};
/// The argv itself, then each command it runs through wrappers (`env`, `nice`, `sudo`, `xargs`,
/// `find -exec`): best effort, never fails. The host executor uses it to find the files a
/// plan runs.
pub use wrappers::pattern_layers as command_layers;
