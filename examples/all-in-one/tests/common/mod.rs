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
use kfop_runtime::kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use kfop_runtime::kube::{Client, ResourceExt};
use kfop_runtime::serde_json::{Value, json};
use kfop_testenv::peer::OperatorProcess;
use kfop_testenv::{TestEnv, TestNamespace, pods, wait};

pub const QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";
pub const LOCAL_QUEUE: &str = "team";

/// A Kueue kind (`kueue.x-k8s.io/v1beta2`).
pub fn kueue_resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "kueue.x-k8s.io".to_owned(),
        version: "v1beta2".to_owned(),
        api_version: "kueue.x-k8s.io/v1beta2".to_owned(),
        kind: kind.to_owned(),
        plural: plural.to_owned(),
    }
}

/// A JSON object as a dynamic object to create.
pub fn object(value: Value) -> DynamicObject {
    kfop_runtime::serde_json::from_value(value).unwrap()
}

/// The Workload Kueue made for the job named `job` (it owns it), once it has condition `type_`
/// True (`Some(true)`), False (`Some(false)`), or exists (`None`).
pub async fn workload(client: &Client, ns: &str, job: &str, condition: Option<(&str, bool)>) -> Value {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &kueue_resource("Workload", "workloads"));
    let what = format!("the Workload of {job} with {condition:?}");
    let found = wait::until(&what, wait::default_timeout(), || {
        let api = api.clone();
        async move {
            let list = api.list(&ListParams::default()).await.ok();
            let owned = list.into_iter().flat_map(|l| l.items).find(|w| {
                w.owner_references()
                    .iter()
                    .any(|o| o.name == job && o.api_version.starts_with("kubeflow.org/"))
            });
            Ok(owned
                .map(|w| kfop_runtime::serde_json::to_value(w).unwrap())
                .filter(|w| {
                    condition.is_none_or(|(type_, want)| {
                        let wanted = if want { "True" } else { "False" };
                        w["status"]["conditions"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .any(|c| c["type"] == type_ && c["status"] == wanted)
                    })
                }))
        }
    })
    .await;
    match found {
        Ok(w) => w,
        Err(error) => {
            let all = api.list(&ListParams::default()).await.unwrap();
            let statuses: Vec<_> = all
                .items
                .iter()
                .map(|w| (w.name_any(), w.data.get("status")))
                .collect();
            panic!("{error}; Workloads: {statuses:?}");
        }
    }
}

/// Queue objects for one namespace `ns`: a ResourceFlavor, a ClusterQueue of `cpus` CPUs for
/// that namespace (its jobs also pass `admission_check` when given, e.g. MultiKueue's), and the
/// LocalQueue [`LOCAL_QUEUE`] in it. Returns once the ClusterQueue is active.
pub async fn queues(client: &Client, ns: &str, cpus: usize, admission_check: Option<&str>) {
    queues_with(client, ns, cpus, admission_check, Value::Null).await;
}

/// [`queues`] with `spec` merged into the ClusterQueue's spec (key by key, e.g. a
/// `preemption` policy).
pub async fn queues_with(client: &Client, ns: &str, cpus: usize, admission_check: Option<&str>, spec: Value) {
    let flavor = format!("flavor-{ns}");
    let cluster_queue = format!("cq-{ns}");
    let pp = PostParams::default();
    let flavors: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &kueue_resource("ResourceFlavor", "resourceflavors"),
    );
    flavors
        .create(
            &pp,
            &object(json!({
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                "metadata": { "name": flavor },
            })),
        )
        .await
        .unwrap();
    let cqs: Api<DynamicObject> =
        Api::all_with(client.clone(), &kueue_resource("ClusterQueue", "clusterqueues"));
    let mut cq = json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": { "name": cluster_queue },
        "spec": {
            "namespaceSelector": { "matchLabels": { "kubernetes.io/metadata.name": ns } },
            "resourceGroups": [{
                "coveredResources": ["cpu"],
                "flavors": [{ "name": flavor, "resources": [{ "name": "cpu", "nominalQuota": cpus.to_string() }] }],
            }],
        },
    });
    if let Some(check) = admission_check {
        cq["spec"]["admissionChecksStrategy"] = json!({ "admissionChecks": [{ "name": check }] });
    }
    if let Value::Object(extra) = spec {
        for (key, value) in extra {
            cq["spec"][key] = value;
        }
    }
    cqs.create(&pp, &object(cq)).await.unwrap();
    let lqs: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &kueue_resource("LocalQueue", "localqueues"));
    lqs.create(
        &pp,
        &object(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": { "name": LOCAL_QUEUE, "namespace": ns },
            "spec": { "clusterQueue": cluster_queue },
        })),
    )
    .await
    .unwrap();
    wait::until("the ClusterQueue active", wait::default_timeout(), || {
        let cqs = cqs.clone();
        let cluster_queue = cluster_queue.clone();
        async move {
            let cq = cqs.get(&cluster_queue).await.ok();
            let active = cq.is_some_and(|cq| {
                cq.data["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Active" && c["status"] == "True")
            });
            Ok(active.then_some(()))
        }
    })
    .await
    .unwrap();
}

/// A loopback address free now (the caller binds it soon after).
pub fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

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
    start_operator_on(env.kubeconfig(), args, metrics, extra_env).await
}

/// [`start_operator`] on the plane of `kubeconfig` (a plane of the test's own, not the shared one).
pub async fn start_operator_on(
    kubeconfig: &Path,
    args: &[String],
    metrics: SocketAddr,
    extra_env: &[(&str, String)],
) -> OperatorProcess {
    let mut vars = vec![("KUBECONFIG", kubeconfig.display().to_string())];
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
