{{ header }}
#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The operator against a real control plane (started by kfop-testenv, or the cluster named by
//! KFOP_TEST_KUBECONFIG): a {{ m.kind }} gets its pods with the manifest's environment and
//! succeeds when they do.
use kfop_runtime::kube::CustomResourceExt;
use kfop_runtime::testing::Operator;
use kfop_testenv::TestEnv;
use kfop_testenv::lifecycle::{JobCheck, job_succeeds};
use {{ m.crate_ident() }}::{{ "{" }}{{ m.kind }}, framework};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_gets_its_pods_and_succeeds() {
    let check = JobCheck {
        crd: {{ m.kind }}::crd(),
        job: serde_json::json!({
            "apiVersion": "{{ m.group }}/{{ m.version }}",
            "kind": "{{ m.kind }}",
            "metadata": { "name": "test" },
            "spec": { "{{ m.replica_specs_field }}": {
{%- for (role, replicas) in test_replicas %}
                "{{ role }}": { "replicas": {{ replicas }}, "template": { "spec": { "containers": [
                    { "name": "{{ m.container }}", "image": "busybox" }
                ] } } },
{%- endfor %}
            }{% for (field, value) in m.test_job %}, "{{ field }}": {{ value|safe }}{% endfor %} },
        }),
        container: "{{ m.container }}",
        pods: &[
{%- for (pod, names) in expected_env %}
            ("{{ pod }}", &[{% for n in names %}"{{ n }}", {% endfor %}]),
{%- endfor %}
        ],
    };
    let framework = || framework(Default::default()).unwrap();
    let start = |client, ns: &str| Operator::start(client, ns, |m| m.register(framework()));
    job_succeeds(TestEnv::shared().unwrap(), "{{ m.name }}", check, start).await.unwrap();
}
