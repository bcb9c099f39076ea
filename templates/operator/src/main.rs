{{ header }}
//! The {{ m.kind }} operator: `{{ m.crate_name() }}` runs it, `{{ m.crate_name() }} crd` prints its CRD.
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use kfop_runtime::kube::CustomResourceExt;
use kfop_runtime::operator::{OperatorArgs, run};
use {{ m.crate_ident() }}::{{ "{" }}{{ m.framework_type() }}, {{ m.kind }}};

#[derive(Debug, Parser)]
#[command(version, about = "The {{ m.kind }} operator")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    operator: OperatorArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the {{ m.kind }} CustomResourceDefinition as YAML
    Crd,
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Crd) => kfop_runtime::crd_yaml(&{{ m.kind }}::crd()).map(|yaml| print!("{yaml}")),
        None => run(&cli.operator, "{{ m.controller_name }}", |m| m.register({{ m.framework_type() }})).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{{ m.crate_name() }}: {e}");
            ExitCode::FAILURE
        }
    }
}
