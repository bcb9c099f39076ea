//! `kfop`: scaffold, regenerate and run training-job operators.
use std::process::ExitCode;

use clap::Parser;
use kfop::cli::{Cli, Command};
use kfop::commands;

/// The command's output proper (logs go to stderr).
fn say(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout(), "{text}");
}

fn main() -> ExitCode {
    kfop_runtime::operator::init_logging("info,kube_client::client::builder=off");
    let cli = Cli::parse();
    // Each command has its own error type; here they only need printing.
    let result: Result<(), Box<dyn std::error::Error>> = match cli.command {
        Command::New(args) => commands::codegen::new(&args)
            .map(|dir| {
                let dir = dir.display();
                say(&format!(
                    "created {dir}\n\
                 next:\n  \
                 cd {dir}\n  \
                 cargo test            # the operator runs a job to Succeeded on a local control plane\n  \
                 $EDITOR kfop.yaml     # roles, env, status rule; `hooks: true` for Rust hooks\n  \
                 kfop gen              # regenerate src/generated/, deploy/ and the tests\n  \
                 cargo run -- crd      # the CRD; `cargo run` runs the operator against $KUBECONFIG"
                ));
            })
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
