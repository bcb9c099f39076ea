// Scaffolded by kfop 0.1.0. This file is yours: `kfop gen` never changes it.
#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The operator against a real control plane (started by kfop-testenv, or the cluster named by
//! KFOP_TEST_KUBECONFIG): a TFJob gets its pods with the manifest's environment and
//! succeeds when they do. This file is yours: `kfop gen` never touches it.
use kfop_runtime::api::JobConditionType;
use kfop_runtime::k8s_openapi::api::core::v1::Pod;
use kfop_runtime::kube::api::{Api, PostParams};
use kfop_runtime::kube::{CustomResourceExt, ResourceExt};
use kfop_runtime::testing::Operator;
use kfop_testenv::{TestEnv, pods, wait};
use tensorflow_operator::{TFJob, Tensorflow};

/// Pods of the test job and the environment variables each must carry.
const EXPECTED: &[(&str, &[&str])] = &[
    ("test-chief-0", &[]),
    ("test-evaluator-0", &[]),
    ("test-evaluator-1", &[]),
    ("test-ps-0", &[]),
    ("test-ps-1", &[]),
    ("test-worker-0", &[]),
    ("test-worker-1", &[]),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_gets_its_pods_and_succeeds() {
    let env = TestEnv::shared().unwrap();
    env.install_crds([TFJob::crd()]).await.unwrap();
    let ns = env.namespace("tensorflow").await.unwrap();
    let operator = Operator::start(ns.client(), ns.name(), |m| m.register(Tensorflow));

    let job: TFJob = serde_json::from_value(serde_json::json!({
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": { "name": "test", "namespace": ns.name() },
        "spec": { "tfReplicaSpecs": {
            "Chief": { "replicas": 1, "template": { "spec": { "containers": [
                { "name": "tensorflow", "image": "busybox" }
            ] } } },
            "Evaluator": { "replicas": 2, "template": { "spec": { "containers": [
                { "name": "tensorflow", "image": "busybox" }
            ] } } },
            "PS": { "replicas": 2, "template": { "spec": { "containers": [
                { "name": "tensorflow", "image": "busybox" }
            ] } } },
            "Worker": { "replicas": 2, "template": { "spec": { "containers": [
                { "name": "tensorflow", "image": "busybox" }
            ] } } },
        } },
    }))
    .unwrap();
    ns.api::<TFJob>()
        .create(&PostParams::default(), &job)
        .await
        .unwrap();

    let pods_api: Api<Pod> = ns.api();
    for (name, vars) in EXPECTED {
        let pod = wait::until(
            &format!("pod {name} Running"),
            wait::default_timeout(),
            || async {
                Ok(pods_api
                    .get_opt(name)
                    .await
                    .unwrap()
                    .filter(|p| pods::phase(p) == "Running"))
            },
        )
        .await
        .unwrap();
        let container = pod
            .spec
            .unwrap()
            .containers
            .into_iter()
            .find(|c| c.name == "tensorflow")
            .unwrap();
        let set: Vec<String> = container
            .env
            .unwrap_or_default()
            .into_iter()
            .map(|e| e.name)
            .collect();
        for var in *vars {
            assert!(set.iter().any(|s| s == var), "{name} lacks {var}: {set:?}");
        }
    }
    for (name, _) in EXPECTED {
        pods::finish(&pods_api, name, 0, 0).await.unwrap();
    }
    let jobs: Api<TFJob> = ns.api();
    wait::until("the job to succeed", wait::default_timeout(), || async {
        let status = jobs.get("test").await.unwrap().status.unwrap_or_default();
        Ok(status.is(JobConditionType::Succeeded).then_some(()))
    })
    .await
    .unwrap();
    assert_eq!(jobs.get("test").await.unwrap().name_any(), "test");
    operator.stop().await;
}
