//! The all-in-one training operator: every bundled framework in one process, with one client
//! and one shared pod and service watch.
//!
//! * `kfop-operator [--enable-scheme KIND]... [flags]` runs it against `$KUBECONFIG`/in-cluster;
//! * `kfop-operator crds` prints every CRD;
//! * `kfop-operator deploy` prints everything to install it (CRDs, RBAC, a Deployment).
//!
//! The demo (a local control plane, one sample job per framework driven to Succeeded) is the
//! separate `kfop-demo` crate (`examples/demo`), so this binary does not link `kfop-testenv`.
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use kfop_operator::{Flags, crds, deploy, load_frameworks, register, say, schemes};
use kfop_runtime::operator::run;

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
    flags: Flags,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the CustomResourceDefinitions of the enabled kinds as YAML
    Crds,
    /// Print everything to install the operator: CRDs, RBAC, a non-root Deployment
    Deploy,
}

fn main() -> ExitCode {
    kfop_runtime::operator::block_on(operator_main())
}

async fn operator_main() -> ExitCode {
    kfop_runtime::operator::init_logging("warn");
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
            .map(|text| say(text.trim_end()))
            .map_err(|e| e.to_string()),
        Some(Command::Deploy) => deploy::manifests(&enabled)
            .map(|text| say(text.trim_end()))
            .map_err(|e| e.to_string()),
        None => {
            cli.flags.configure_frameworks();
            let runtime_frameworks = cli.flags.runtime_frameworks;
            run(&cli.flags.operator, "kfop-operator", |m| {
                load_frameworks(register(m, &enabled), runtime_frameworks)
            })
            .await
            .map_err(|e| e.to_string())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kfop-operator: {e}");
            ExitCode::FAILURE
        }
    }
}
