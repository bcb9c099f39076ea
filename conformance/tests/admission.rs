//! Kubeflow as the admission oracle: every job of Kubeflow v1.8.1's webhook test tables
//! (`cases/admission.yaml`) is judged by Kubeflow's CRDs and live webhook on one plane and by
//! kfop's CRDs on another. Fails on a decision of kfop's that differs from Kubeflow's without
//! being declared in `allowed-differences.yaml`, and on a Kubeflow decision that is not the one
//! its own test table expects. Prints the report and writes it under the target's tmp dir.
use kfop_conformance::admission::{self, Options};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kfop_admits_what_kubeflow_admits_but_for_declared_differences() {
    let report = admission::run(&Options::default()).await.unwrap();
    let text = report.render();
    let file = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("admission.md");
    std::fs::write(&file, &text).unwrap();
    eprintln!("{text}\nreport in {}", file.display());
    assert_eq!(
        report.failed(),
        0,
        "requests without a decision: see the report above"
    );
    assert_eq!(
        report.stale(),
        0,
        "Kubeflow decided otherwise than its test table expects"
    );
    assert_eq!(report.undeclared(), 0, "undeclared admission differences");
}
