//! `moat skills …`: switch configured skills on and off at run time.

use super::term::say;
use std::process::ExitCode;

use anyhow::bail;
use moat::home::Home;
use serde_json::json;

use super::approvals::{open, operator};
use super::args::SkillsCommand;

pub fn run(home: Home, cmd: SkillsCommand) -> anyhow::Result<ExitCode> {
    let a = open(&home)?;
    let (config, _) = moat::config::load(&home.config_file())?;
    let store = a.store();
    match cmd {
        SkillsCommand::List { json } => {
            let states = moat::skills::states(&config, store)?;
            if json {
                let v: Vec<_> = states
                    .iter()
                    .map(|s| json!({"name": s.name, "bins": s.bins, "enabled": s.enabled, "source": s.source}))
                    .collect();
                super::term::json_pretty(&v)?;
            } else if states.is_empty() {
                say!("no skills configured ([skills.NAME] in moat.toml)");
            } else {
                for s in states {
                    let state = if s.enabled { "enabled" } else { "disabled" };
                    say!(
                        "{:<16}  {state:<8} ({})  {}",
                        s.name,
                        s.source,
                        s.bins.join(" ")
                    );
                }
                if !config.policy.auto_allow_skills {
                    say!("note: policy.auto_allow_skills = false, so no skill allowlists anything");
                }
            }
        }
        SkillsCommand::Enable { name } | SkillsCommand::Disable { name }
            if !config.skills.contains_key(&name) =>
        {
            bail!(
                "switch skill `{}`: no [skills.{}] in the config",
                moat::output::escape_display(&name),
                name.escape_debug()
            );
        }
        SkillsCommand::Enable { name } => {
            let d = operator(&a, &format!("skills enable {name}"), None)?;
            store.set_skill(&name, true, &d.label())?;
            store.audit("skill", None, None, &d.label(), &format!("enable {name}"))?;
            say!("enabled skill {name}");
        }
        SkillsCommand::Disable { name } => {
            let d = operator(&a, &format!("skills disable {name}"), None)?;
            store.set_skill(&name, false, &d.label())?;
            store.audit("skill", None, None, &d.label(), &format!("disable {name}"))?;
            say!("disabled skill {name}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
