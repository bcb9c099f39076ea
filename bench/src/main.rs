//! `kfop-bench`: the scale benchmark of issue #8. It starts the local control plane with kwok
//! nodes, runs the all-in-one operator as a separate process, submits PyTorchJobs (all at once or
//! at a rate) whose pods kwok completes after a delay, and measures throughput, latency
//! percentiles, the operator's CPU, RSS and API requests per job; then a plain client creates the
//! same pods and services with the same concurrency (the ceiling). Results: results.md,
//! results.json, latency.svg and rss.svg in `--results`.
use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

mod burst;
mod ceiling;
mod chaos;
mod cli;
mod error;
#[cfg(test)]
mod figures;
mod frameworks;
mod identity;
mod observe;
mod operator;
mod player;
mod plot;
mod reaction;
mod report;
mod results;
mod retry;
mod run;
mod sample;
mod soak;
mod stats;
mod submit;
mod timeline;
mod wire;

#[tokio::main]
async fn main() -> ExitCode {
    kfop_runtime::operator::init_logging("info,kube_client=off,kube_runtime=warn");
    let args = cli::Args::parse();
    if let Some(count) = args.runtime_frameworks {
        return match frameworks::run(&args, count).await {
            Ok(steps) => {
                let _ = writeln!(std::io::stdout(), "{}", frameworks::markdown(&steps));
                ExitCode::SUCCESS
            }
            Err(e) => {
                tracing::error!(error = %e, "runtime-frameworks benchmark failed");
                ExitCode::FAILURE
            }
        };
    }
    if let Some(duration) = args.soak {
        let mut args = args.clone();
        if args.rate <= 0.0 {
            args.rate = 1.0;
        }
        return match soak::run(&args, duration).await {
            Ok(results) => {
                let _ = writeln!(std::io::stdout(), "{}", soak::markdown(&results));
                ExitCode::SUCCESS
            }
            Err(e) => {
                tracing::error!(error = %e, results = %args.results.display(), "soak failed");
                ExitCode::FAILURE
            }
        };
    }
    if let Some(jobs) = args.failure_reaction {
        return match reaction::run(&args, jobs).await {
            Ok(results) => {
                let _ = writeln!(std::io::stdout(), "{}", reaction::markdown(&results));
                ExitCode::SUCCESS
            }
            Err(e) => {
                tracing::error!(error = %e, "failure-reaction benchmark failed");
                ExitCode::FAILURE
            }
        };
    }
    if let Some(pairs) = args.wire_ab {
        return match wire::run(&args, pairs).await {
            Ok(run) => {
                let _ = writeln!(std::io::stdout(), "{}", wire::markdown(&run));
                ExitCode::SUCCESS
            }
            Err(e) => {
                tracing::error!(error = %e, "wire A/B benchmark failed");
                ExitCode::FAILURE
            }
        };
    }
    match run::run(&args).await {
        Ok(run) => {
            let _ = writeln!(std::io::stdout(), "{}", report::markdown(&run));
            tracing::info!(results = %args.results.display(), "wrote results.md, results.json, latency.svg, rss.svg");
            ExitCode::SUCCESS
        }
        Err(e) => {
            tracing::error!(error = %e, "benchmark failed");
            ExitCode::FAILURE
        }
    }
}
