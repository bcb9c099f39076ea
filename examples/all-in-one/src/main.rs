//! The all-in-one training operator: every bundled framework in one process, with one client
//! and one shared pod and service watch.
//!
//! * `kfop-operator [--enable-scheme KIND]... [flags]` runs it against `$KUBECONFIG`/in-cluster;
//! * `kfop-operator crds` prints every CRD;
//! * `kfop-operator demo` starts a local control plane, runs the operator, submits one sample
//!   job per framework and shows each reach Succeeded.
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use kfop_operator::{crds, demo, deploy, register, schemes};
use kfop_runtime::operator::{OperatorArgs, run};

#[derive(Debug, Parser)]
#[command(
    name = "kfop-operator",
    version,
    about = "The all-in-one distributed-training operator"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Job kinds to run (repeatable, any letter case): tfjob, pytorchjob, xgboostjob, paddlejob,
    /// jaxjob, mxjob, mpijob. Default: all.
    #[arg(long = "enable-scheme", global = true)]
    enable_scheme: Vec<String>,
    #[command(flatten)]
    operator: OperatorArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the CustomResourceDefinitions of the enabled kinds as YAML
    Crds,
    /// Print everything to install the operator: CRDs, RBAC, a non-root Deployment
    Deploy,
    /// Start a local control plane, run the operator and drive one sample job per kind to Succeeded
    Demo(demo::DemoArgs),
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let enabled = match schemes::parse(&cli.enable_scheme) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("kfop-operator: {e}");
            return ExitCode::from(2);
        }
    };
    let result = match cli.command {
        Some(Command::Crds) => crds::yaml(&enabled)
            .map(|text| kfop_operator::demo::say(text.trim_end()))
            .map_err(|e| e.to_string()),
        Some(Command::Deploy) => deploy::manifests(&enabled)
            .map(|text| demo::say(text.trim_end()))
            .map_err(|e| e.to_string()),
        Some(Command::Demo(args)) => demo::run(&args, &enabled).await.map_err(|e| e.to_string()),
        None => run(&cli.operator, "kfop-operator", |m| register(m, &enabled))
            .await
            .map_err(|e| e.to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kfop-operator: {e}");
            ExitCode::FAILURE
        }
    }
}
