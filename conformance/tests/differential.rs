//! Kubeflow as the oracle: every case of the corpus (the job examples of the training-operator
//! modules, v1.8.1's and v1.9.0's JAXJob ones, mpi-operator v0.6.0's MPIJob ones, and the
//! generated variants, `cases/`) runs under Kubeflow (the release judging its kind) and under kfop
//! on one private plane, and the snapshots after every step must agree but for the differences
//! declared in `allowed-differences.yaml`. Prints the report (and writes it, with every difference and every
//! snapshot as JSON, under the target's tmp dir); `KFOP_CONFORMANCE_CASES=glob,glob` runs a
//! subset.
use std::time::Instant;

use kfop_conformance::runner::{self, Options};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kfop_behaves_as_kubeflow_but_for_declared_differences() {
    let started = Instant::now();
    let only: Vec<String> = std::env::var("KFOP_CONFORMANCE_CASES")
        .map(|v| {
            v.split(',')
                .map(str::to_owned)
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let options = Options {
        only,
        ..Options::default()
    };
    let report = runner::run(&options).await.unwrap();
    let text = report.render();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    std::fs::write(dir.join("differential.md"), &text).unwrap();
    std::fs::write(
        dir.join("differential.json"),
        serde_json::to_string_pretty(&report.json()).unwrap(),
    )
    .unwrap();
    std::fs::write(
        dir.join("differential-snapshots.json"),
        serde_json::to_string(&report.snapshots_json()).unwrap(),
    )
    .unwrap();
    eprintln!(
        "{text}\n{} cases in {:.0}s; report in {}",
        report.records.len(),
        started.elapsed().as_secs_f64(),
        dir.display()
    );
    assert_eq!(
        report.failures(),
        0,
        "undeclared differences or failed cases: see the report above"
    );
}
