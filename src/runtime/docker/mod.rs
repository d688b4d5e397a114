//! [`Engine`](super::Engine) and [`Executor`](super::Executor) over the Docker Engine API (bollard).

mod build;
mod client;
mod containers;
mod exec;
mod freezer;
mod hijack;
mod host_firewall;
mod networks;
mod stats;

pub use client::DockerRuntime;
