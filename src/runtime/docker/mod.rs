//! [`Runtime`](super::Runtime) over the Docker Engine API (bollard).

mod build;
mod client;
mod containers;
mod exec;
mod hijack;

pub use client::DockerRuntime;
