//! `kfop`: scaffold, regenerate and run training-job operators.
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use kfop::commands;

#[derive(Debug, Parser)]
#[command(
    name = "kfop",
    version,
    about = "Build and run distributed-training operators on Kubernetes"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start, inspect or stop the local control plane (etcd, kube-apiserver,
    /// kube-controller-manager, kube-scheduler and kwok on loopback)
    #[command(subcommand)]
    Cluster(commands::cluster::ClusterCommand),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Cluster(cmd) => commands::cluster::run(cmd),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kfop: {e}");
            ExitCode::FAILURE
        }
    }
}
