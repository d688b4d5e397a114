//! The agent-facing tools. Each call is orchestrated here: validate, choose where to run,
//! check policy, make sure the container exists, start the process, shape the result.

mod exec_tool;
mod process_tool;

pub use exec_tool::{
    analyse, analyse_within, real_path, ExecError, ExecTool, ExplainRequest, Explained,
};
pub use process_tool::{
    CallError, ProcessAction, ProcessCall, ProcessRequest, ProcessTool, ACTIONS,
};

#[cfg(test)]
mod wire_tests;
