{{ header }}
#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The operator against a real control plane (started by kfop-testenv, or the cluster named by
//! KFOP_TEST_KUBECONFIG): a {{ m.kind }} gets its pods with the manifest's environment and
//! succeeds when they do. This file is yours: `kfop gen` never touches it.
use kfop_runtime::api::JobConditionType;
use kfop_runtime::k8s_openapi::api::core::v1::Pod;
use kfop_runtime::kube::api::{Api, PostParams};
use kfop_runtime::kube::{CustomResourceExt, ResourceExt};
use kfop_runtime::testing::Operator;
use kfop_testenv::{TestEnv, pods, wait};
use {{ m.crate_ident() }}::{{ "{" }}{{ m.framework_type() }}, {{ m.kind }}};

/// Pods of the test job and the environment variables each must carry.
const EXPECTED: &[(&str, &[&str])] = &[
{%- for (pod, names) in expected_env %}
    ("{{ pod }}", &[{% for n in names %}"{{ n }}", {% endfor %}]),
{%- endfor %}
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_gets_its_pods_and_succeeds() {
    let env = TestEnv::shared().unwrap();
    env.install_crds([{{ m.kind }}::crd()]).await.unwrap();
    let ns = env.namespace("{{ m.name }}").await.unwrap();
    let operator = Operator::start(ns.client(), ns.name(), |m| m.register({{ m.framework_type() }}));

    let job: {{ m.kind }} = serde_json::from_value(serde_json::json!({
        "apiVersion": "{{ m.group }}/{{ m.version }}",
        "kind": "{{ m.kind }}",
        "metadata": { "name": "test", "namespace": ns.name() },
        "spec": { "{{ m.replica_specs_field }}": {
{%- for (role, replicas) in test_replicas %}
            "{{ role }}": { "replicas": {{ replicas }}, "template": { "spec": { "containers": [
                { "name": "{{ m.container }}", "image": "busybox" }
            ] } } },
{%- endfor %}
        } },
    }))
    .unwrap();
    ns.api::<{{ m.kind }}>().create(&PostParams::default(), &job).await.unwrap();

    let pods_api: Api<Pod> = ns.api();
    for (name, vars) in EXPECTED {
        let pod = wait::until(&format!("pod {name} Running"), wait::default_timeout(), || async {
            Ok(pods_api.get_opt(name).await.unwrap().filter(|p| pods::phase(p) == "Running"))
        })
        .await
        .unwrap();
        let container = pod.spec.unwrap().containers.into_iter().find(|c| c.name == "{{ m.container }}").unwrap();
        let set: Vec<String> = container.env.unwrap_or_default().into_iter().map(|e| e.name).collect();
        for var in *vars {
            assert!(set.iter().any(|s| s == var), "{name} lacks {var}: {set:?}");
        }
    }
    for (name, _) in EXPECTED {
        pods::finish(&pods_api, name, 0, 0).await.unwrap();
    }
    let jobs: Api<{{ m.kind }}> = ns.api();
    wait::until("the job to succeed", wait::default_timeout(), || async {
        let status = jobs.get("test").await.unwrap().status.unwrap_or_default();
        Ok(status.is(JobConditionType::Succeeded).then_some(()))
    })
    .await
    .unwrap();
    assert_eq!(jobs.get("test").await.unwrap().name_any(), "test");
    operator.stop().await;
}
