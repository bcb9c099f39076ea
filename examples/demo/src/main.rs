//! `kfop-demo`: the README's main command. It starts a local control plane (or uses the cluster
//! of `--kubeconfig`), runs the all-in-one operator in process, submits one sample job per
//! enabled kind and shows each reach Succeeded.
//!
//! * `kfop-demo [--enable-scheme KIND]... [--train-seconds N] [--timeout-seconds N] [--kubeconfig PATH]`
//!
//! A crate of its own so that the production `kfop-operator` does not link `kfop-testenv`.
use std::process::ExitCode;

use clap::Parser;
use kfop_operator::schemes;

mod demo;

#[derive(Debug, Parser)]
#[command(
    name = "kfop-demo",
    version,
    about = "Start a local control plane, run the all-in-one operator and drive one sample job per kind to Succeeded"
)]
struct Cli {
    /// Job kinds to run (repeatable, any letter case): tfjob, pytorchjob, xgboostjob, paddlejob,
    /// jaxjob, mxjob, mpijob. Default: all.
    #[arg(long = "enable-scheme")]
    enable_scheme: Vec<String>,
    #[command(flatten)]
    demo: demo::DemoArgs,
}

#[tokio::main]
async fn main() -> ExitCode {
    kfop_runtime::operator::init_logging("warn");
    let cli = Cli::parse();
    let enabled = match schemes::parse(&cli.enable_scheme) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("kfop-demo: {e}");
            return ExitCode::from(2);
        }
    };
    match demo::run(&cli.demo, &enabled).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kfop-demo: {e}");
            ExitCode::FAILURE
        }
    }
}
