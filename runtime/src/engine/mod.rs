//! The engine: the pure planner ([`plan`]) and the controller that feeds it from watches and
//! caches and applies its plans ([`controller`]), with the client, metrics, the metrics and
//! webhook servers, and the crate's error. It uses the author's kit, never the process layer.
pub(crate) mod cache;
pub mod child_index;
pub mod client;
pub mod compact;
pub mod controller;
pub(crate) mod error;
pub mod metrics;
pub mod packed;
pub mod plan;
pub mod relist;
pub mod server;
pub mod webhook;
pub mod wire;
