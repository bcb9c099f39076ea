//! An operator for the test framework (`TestJob`), for measuring the runtime on its own:
//! `cargo run -p kfop-runtime --features testing --example test_operator -- --metrics-bind-address 127.0.0.1:8080`
use clap::Parser;
use kfop_runtime::operator::{OperatorArgs, run};
use kfop_runtime::testing::TestFramework;

#[derive(Debug, Parser)]
struct Cli {
    #[command(flatten)]
    operator: OperatorArgs,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let cli = Cli::parse();
    match run(&cli.operator, "testjob-operator", |m| {
        Ok(m.register(TestFramework::default().loaded()))
    })
    .await
    {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "operator failed");
            std::process::ExitCode::FAILURE
        }
    }
}
