//! The `kfop` command as a library: the manifest, the generator and the commands, so tests
//! drive them without a process.
pub mod cli;
pub mod commands;
pub mod generate;
pub mod manifest;
