//! The command line: `kfop new`, `kfop gen`, `kfop apply`, `kfop katib-template`, `kfop cluster`.
use clap::{Parser, Subcommand};

use crate::commands;

#[derive(Debug, Parser)]
#[command(
    name = "kfop",
    version,
    about = "Build and run distributed-training operators on Kubernetes"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Scaffold a complete operator crate for a new framework from a manifest (with --no-code,
    /// only the manifest)
    New(commands::codegen::NewArgs),
    /// Re-render the files kfop owns from kfop.yaml (never touches your files)
    Gen(commands::codegen::GenArgs),
    /// Apply a manifest-only framework (kfop.yaml) to a cluster running the all-in-one
    /// operator, which loads it as a run-time framework
    Apply(commands::apply::ApplyArgs),
    /// Print the trialTemplate of a Katib Experiment whose Trials are jobs of a kind (a bundled
    /// one, or the one a kfop.yaml declares), or check an Experiment's trialTemplate
    KatibTemplate(commands::katib::KatibTemplateArgs),
    /// Start, inspect or stop the local control plane (etcd, kube-apiserver,
    /// kube-controller-manager, kube-scheduler and kwok on loopback)
    #[command(subcommand)]
    Cluster(commands::cluster::ClusterCommand),
}
