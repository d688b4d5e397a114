//! moat: a container sandbox runner for AI agents.
//!
//! Layers, top to bottom (data flows down, only results and events flow back up):
//! `cli` → `tools` (exec, process) → `policy` → `process` (registry, output) →
//! `session` (containers) → `runtime` (the engine seam). `config`, `home` and `store` are
//! shared foundations.

pub mod config;
pub mod home;
pub mod runtime;
