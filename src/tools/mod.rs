//! The agent-facing tools, one folder each (its request, the tool, the shape of its results):
//! `exec_tool`, `process_tool`, `files_tool`. Each call is orchestrated here: validate, choose
//! where to run, check policy, make sure the container exists, start the process, shape the
//! result.

mod exec_tool;
mod files_tool;
mod process_tool;

pub use exec_tool::{
    analyse, analyse_within, real_path, Caller, ExecError, ExecRequest, ExecTool, ExplainRequest,
    Explained, NodeHost, RequestError,
};
pub use files_tool::{
    FileCall, FilesError, FilesTool, ListRequest, PatchRequest, ReadRequest, WriteRequest,
};
pub use process_tool::{
    CallError, ProcessAction, ProcessCall, ProcessRequest, ProcessTool, ACTIONS,
};

#[cfg(test)]
mod wire_tests;
