//! `kfop`: scaffold, regenerate and run training-job operators.
use std::process::ExitCode;

use clap::Parser;
use kfop::cli::{Cli, Command};
use kfop::commands;
use kfop::commands::codegen::Created;

/// The command's output proper (logs go to stderr).
fn say(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout(), "{text}");
}

/// What `kfop new` made and what to do with it.
fn next_steps(created: &Created) -> String {
    match created {
        Created::Crate(dir) => {
            let dir = dir.display();
            format!(
                "created {dir}\n\
                 next:\n  \
                 cd {dir}\n  \
                 cargo test            # the operator runs a job to Succeeded on a local control plane\n  \
                 $EDITOR kfop.yaml     # roles, env, status rule; `hooks: true` for Rust hooks\n  \
                 kfop gen              # regenerate src/generated/, deploy/ and the tests\n  \
                 cargo run -- crd      # the CRD; `cargo run` runs the operator against $KUBECONFIG"
            )
        }
        Created::Manifest(path) => {
            let path = path.display();
            format!(
                "created {path}\n\
                 next, on a cluster running the all-in-one operator:\n  \
                 $EDITOR {path}     # roles, env, status rule (no hooks without a crate)\n  \
                 kfop apply -f {path}     # add `--wait 60` to wait until the operator serves it"
            )
        }
    }
}

fn main() -> ExitCode {
    kfop_runtime::operator::init_logging("info,kube_client::client::builder=off");
    let cli = Cli::parse();
    // Each command has its own error type; here they only need printing.
    let result: Result<(), Box<dyn std::error::Error>> = match cli.command {
        Command::New(args) => commands::codegen::new(&args)
            .map(|created| say(&next_steps(&created)))
            .map_err(Into::into),
        Command::Gen(args) => commands::codegen::gen_crate(&args)
            .map(|report| {
                for path in &report.written {
                    say(&format!("wrote {path}"));
                }
                for path in &report.removed {
                    say(&format!("removed {path}"));
                }
            })
            .map_err(Into::into),
        Command::Apply(args) => commands::apply::run(&args).map_err(Into::into),
        Command::KatibTemplate(args) => commands::katib::run(&args)
            .map(|text| say(&text))
            .map_err(Into::into),
        Command::Cluster(cmd) => commands::cluster::run(cmd).map_err(Into::into),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kfop: {e}");
            ExitCode::FAILURE
        }
    }
}
