//! Helpers shared by the integration tests that run jobs through the all-in-one operator
//! (`stranded.rs`, `kueue.rs`, ...). Each test binary uses only some of them.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use kfop_operator::samples;
use kfop_operator::schemes::Scheme;
use kfop_runtime::api::{JobConditionType, JobStatus};
use kfop_runtime::k8s_openapi::api::core::v1::Pod;
use kfop_runtime::kube::api::{Api, DynamicObject, ListParams};
use kfop_testenv::peer::OperatorProcess;
use kfop_testenv::{TestEnv, TestNamespace, pods, wait};

/// How many pods `scheme`'s sample job runs.
pub fn pod_count(scheme: Scheme) -> usize {
    let (_, mut sample) = samples::sample(scheme).unwrap();
    samples::replica_specs_mut(&mut sample)
        .unwrap()
        .values()
        .map(|s| s["replicas"].as_u64().unwrap_or(1) as usize)
        .sum()
}

/// The job's status as kfop writes it (default when it has none).
pub fn status(job: &DynamicObject) -> JobStatus {
    job.data
        .get("status")
        .cloned()
        .and_then(|s| kfop_runtime::serde_json::from_value(s).ok())
        .unwrap_or_default()
}

fn job_selector(job: &str) -> ListParams {
    ListParams::default().labels(&format!("training.kubeflow.org/job-name={job}"))
}

/// The pods of the job named `job`, now.
pub async fn job_pods(ns: &TestNamespace, job: &str) -> Vec<Pod> {
    ns.api::<Pod>().list(&job_selector(job)).await.unwrap().items
}

/// The job's pods once there are `count` of them, all Running.
pub async fn running_pods(ns: &TestNamespace, job: &str, count: usize) -> Vec<Pod> {
    wait::until(
        &format!("{count} running pods of {job}"),
        wait::default_timeout(),
        || async move {
            // A failed list is retried, not a failure.
            let pods = ns.api::<Pod>().list(&job_selector(job)).await.ok();
            Ok(pods
                .map(|l| l.items)
                .filter(|pods| pods.len() == count && pods.iter().all(|p| pods::phase(p) == "Running")))
        },
    )
    .await
    .unwrap()
}

/// Waits a minute for `name` to succeed; fails with its status.
pub async fn until_succeeded(api: &Api<DynamicObject>, name: &str, how: &str) {
    let succeeded = wait::until(
        &format!("{name} Succeeded {how}"),
        Duration::from_secs(60),
        || {
            let api = api.clone();
            async move {
                let job = api.get(name).await.ok();
                Ok(job.filter(|j| status(j).is(JobConditionType::Succeeded)))
            }
        },
    )
    .await;
    if let Err(error) = succeeded {
        let job = api.get(name).await.unwrap();
        panic!("{error}; the job's status: {:?}", job.data.get("status"));
    }
}

/// The all-in-one binary out of cluster on `env`'s plane with `args` (`--metrics-bind-address`
/// among them: `metrics`) and `KUBECONFIG` plus `extra_env`, none of the in-cluster variables;
/// returned once `/readyz` answers.
pub async fn start_operator(
    env: &TestEnv,
    args: &[String],
    metrics: SocketAddr,
    extra_env: &[(&str, String)],
) -> OperatorProcess {
    let mut vars = vec![("KUBECONFIG", env.kubeconfig().display().to_string())];
    vars.extend(extra_env.iter().cloned());
    let mut operator = OperatorProcess::spawn(
        "kfop-operator",
        Path::new(env!("CARGO_BIN_EXE_kfop-operator")),
        args,
        &vars,
        &[
            "KUBEFLOW_NAMESPACE",
            "MY_POD_NAMESPACE",
            "KUBERNETES_SERVICE_HOST",
        ],
    )
    .unwrap();
    operator
        .wait_http_ok(metrics, "/readyz", wait::default_timeout())
        .await
        .unwrap();
    operator
}
