//! Skills (`[skills.NAME]`): a named set of binaries an agent skill needs. While a skill is
//! enabled (in config, or switched with `moat skills enable`) and `policy.auto_allow_skills`
//! is on, its binaries are allowlisted by their resolved path, and explain names the skill.

use crate::config::Config;
use crate::policy::Resolver;
use crate::store::{Store, StoreError};

/// A skill and whether it is in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillState {
    pub name: String,
    pub bins: Vec<String>,
    pub enabled: bool,
    /// `config` or `operator` (switched at run time).
    pub source: &'static str,
}

/// Every configured skill with its effective state; a run-time switch wins over config.
pub fn states(config: &Config, store: &Store) -> Result<Vec<SkillState>, StoreError> {
    let switched = store.skill_states()?;
    Ok(config
        .skills
        .iter()
        .map(|(name, s)| {
            let over = switched.iter().find(|(n, _)| n == name).map(|(_, e)| *e);
            SkillState {
                name: name.clone(),
                bins: s.bins.clone(),
                enabled: over.unwrap_or(s.enabled),
                source: if over.is_some() { "operator" } else { "config" },
            }
        })
        .collect())
}

/// Bare binary names of enabled skills, for the caller to resolve along with the command.
pub fn names(skills: &[SkillState]) -> Vec<String> {
    skills
        .iter()
        .filter(|s| s.enabled)
        .flat_map(|s| s.bins.iter().filter(|b| !b.contains('/')).cloned())
        .collect()
}

/// Labeled allowlist entries: each enabled skill binary's resolved path, with the rule text
/// `skill: <name> (<path>)`. A binary that does not resolve adds nothing.
pub fn entries(skills: &[SkillState], resolver: &dyn Resolver) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for s in skills.iter().filter(|s| s.enabled) {
        for bin in &s.bins {
            let path = if bin.starts_with('/') {
                Some(bin.clone())
            } else {
                resolver.resolve(bin)
            };
            if let Some(path) = path {
                let rule = format!("skill: {} ({path})", s.name);
                out.push((path, rule));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SkillConfig;
    use crate::policy::MapResolver;

    #[test]
    fn enabled_skills_give_resolved_entries() {
        let mut c = Config::default();
        c.skills.insert(
            "json".into(),
            SkillConfig {
                bins: vec!["jq".into(), "/opt/yq".into(), "missing".into()],
                enabled: false,
            },
        );
        let store = Store::in_memory().unwrap();
        let r = MapResolver::new().with("jq", "/usr/bin/jq");
        assert!(entries(&states(&c, &store).unwrap(), &r).is_empty());
        store.set_skill("json", true, "cli:alice").unwrap();
        let s = states(&c, &store).unwrap();
        assert_eq!(s[0].source, "operator");
        assert_eq!(names(&s), ["jq", "missing"]);
        assert_eq!(
            entries(&s, &r),
            [
                ("/usr/bin/jq".into(), "skill: json (/usr/bin/jq)".into()),
                ("/opt/yq".into(), "skill: json (/opt/yq)".into())
            ]
        );
    }
}
