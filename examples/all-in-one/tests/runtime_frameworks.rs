#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Frameworks registered at run time (issue #15): a manifest applied as a `Framework` resource
//! to a running all-in-one operator becomes a job kind whose jobs run to Succeeded, with no Rust
//! and no restart, gang-scheduled like a compiled kind; an invalid one is refused with the
//! validator's field-named error.
use std::collections::BTreeSet;
use std::time::Duration;

use kfop_runtime::dynamic::{Framework, FrameworkStatus};
use kfop_runtime::gang::{self, GangScheduler};
use kfop_runtime::k8s_openapi::api::core::v1::Pod;
use kfop_runtime::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kfop_runtime::kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams,
};
use kfop_runtime::kube::{CustomResourceExt, ResourceExt};
use kfop_runtime::serde_json::{self, json};
use kfop_runtime::testing::Operator;
use kfop_testenv::{TestEnv, pods, wait};

mod common;
use common::{running_pods, until_succeeded};

/// A JAX-like framework in 26 manifest lines: one Worker role, pod 0 the coordinator.
const MANIFEST: &str = "apiVersion: kfop.dev/v1alpha1
kind: Framework
metadata:
  name: rtjax
spec:
  group: runtime-test.kfop.dev
  version: v1
  kind: RtJaxJob
  container:
    name: jax
    portName: jaxjob-port
    port: 6666
  roles:
    - name: Worker
      restartPolicy: Never
  masterPods: indexZero
  env:
    - name: COORDINATOR_ADDRESS
      value: \"{host.Worker.0}:{port.Worker}\"
    - name: NUM_PROCESSES
      value: \"{total_replicas}\"
    - name: PROCESS_ID
      value: \"{index}\"
  status:
    rule: leaderOrFollowers
    followers: Worker
";

fn framework_object(text: &str) -> Framework {
    let value: serde_json::Value = serde_saphyr::from_str(text).unwrap();
    serde_json::from_value(value).unwrap()
}

/// Applies the Framework and waits until its conditions say `ready` (or an Accepted=False).
async fn apply(api: &Api<Framework>, framework: &Framework) -> FrameworkStatus {
    let name = framework.name_any();
    api.patch(
        &name,
        &PatchParams::apply("test").force(),
        &Patch::Apply(framework),
    )
    .await
    .unwrap();
    wait::until(
        &format!("Framework {name} judged"),
        Duration::from_secs(60),
        || async {
            let current = api.get(&name).await.ok();
            Ok(current
                .filter(|f| f.status.as_ref().and_then(|s| s.observed_generation) == f.metadata.generation)
                .and_then(|f| f.status))
        },
    )
    .await
    .unwrap()
}

fn condition<'a>(status: &'a FrameworkStatus, type_: &str) -> (&'a str, &'a str) {
    let c = status.conditions.iter().find(|c| c.type_ == type_).unwrap();
    (c.status.as_str(), c.message.as_str())
}

#[tokio::test]
async fn a_framework_applied_at_run_time_runs_a_job_to_succeeded() {
    let env = TestEnv::shared().unwrap();
    let mut crds = kfop_testenv::crds::pod_groups().unwrap();
    crds.push(Framework::crd());
    env.install_crds(crds).await.unwrap();
    let ns = env.namespace("rtfw").await.unwrap();
    // Under gang scheduling (scheduler-plugins' PodGroups, which do not hold pods back): a
    // run-time kind's PodGroups come through the manager's one PodGroup watch.
    let gang: GangScheduler = "scheduler-plugins".parse().unwrap();
    let groups: Api<DynamicObject> =
        Api::namespaced_with(ns.client(), ns.name(), &gang.pod_group_api_resource().unwrap());
    let _operator = Operator::start_with(
        ns.client(),
        ns.name(),
        move |c| c.gang = gang,
        |m| kfop_operator::load_frameworks(kfop_operator::register(m, &BTreeSet::new()), true),
    );
    let frameworks: Api<Framework> = Api::all(ns.client());

    // A manifest the validator refuses: the error names the field, as `kfop gen` does.
    let bad = framework_object(
        &MANIFEST
            .replace("{host.Worker.0}", "{host.Chief.0}")
            .replace("rtjax", "rtjax-bad"),
    );
    let status = apply(&frameworks, &bad).await;
    let (accepted, message) = condition(&status, "Accepted");
    assert_eq!(accepted, "False");
    assert!(
        message.contains("spec.env") && message.contains("Chief"),
        "{message}"
    );
    assert_eq!(condition(&status, "Ready").0, "False");
    frameworks
        .delete("rtjax-bad", &DeleteParams::default())
        .await
        .unwrap();

    // A bundled kind cannot be taken over.
    let taken = framework_object(
        &MANIFEST
            .replace("runtime-test.kfop.dev", "kubeflow.org")
            .replace("RtJaxJob", "JAXJob")
            .replace("rtjax", "rtjax-taken"),
    );
    let status = apply(&frameworks, &taken).await;
    assert_eq!(condition(&status, "Accepted").0, "False");
    assert!(condition(&status, "Accepted").1.contains("jaxjobs.kubeflow.org"));
    frameworks
        .delete("rtjax-taken", &DeleteParams::default())
        .await
        .unwrap();

    // As a user would: `kfop apply -f kfop.yaml --wait 60`.
    let file = std::env::temp_dir().join(format!("rtjax-{}.yaml", std::process::id()));
    std::fs::write(&file, MANIFEST).unwrap();
    let cli = <kfop::cli::Cli as clap::Parser>::try_parse_from([
        "kfop".as_ref(),
        "apply".as_ref(),
        "-f".as_ref(),
        file.as_os_str(),
        "--kubeconfig".as_ref(),
        env.kubeconfig().as_os_str(),
        "--wait".as_ref(),
        "60".as_ref(),
    ])
    .unwrap();
    let kfop::cli::Command::Apply(args) = cli.command else {
        panic!("not an apply");
    };
    tokio::task::spawn_blocking(move || kfop::commands::apply::run(&args))
        .await
        .unwrap()
        .unwrap();
    let status = frameworks.get("rtjax").await.unwrap().status.unwrap();
    assert_eq!(
        condition(&status, "Ready"),
        (
            "True",
            "rtjaxjobs.runtime-test.kfop.dev is served and its controller runs"
        )
    );

    let kind = ApiResource {
        group: "runtime-test.kfop.dev".into(),
        version: "v1".into(),
        api_version: "runtime-test.kfop.dev/v1".into(),
        kind: "RtJaxJob".into(),
        plural: "rtjaxjobs".into(),
    };
    let jobs: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &kind);
    let job: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "runtime-test.kfop.dev/v1",
        "kind": "RtJaxJob",
        "metadata": {"name": "one"},
        "spec": {"rtjaxReplicaSpecs": {"Worker": {"replicas": 2, "template": {"spec": {"containers": [
            {"name": "jax", "image": "busybox"}
        ]}}}}},
    }))
    .unwrap();
    // The CRD's own admission rules apply: an unknown role is refused by the API server.
    let mut bad_job = job.clone();
    bad_job.data["spec"]["rtjaxReplicaSpecs"] = json!({"Chief": {"template": {"spec": {"containers": [
        {"name": "jax", "image": "busybox"}
    ]}}}});
    let refused = jobs
        .create(&PostParams::default(), &bad_job)
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("unknown replica type"), "{refused}");

    jobs.create(&PostParams::default(), &job).await.unwrap();
    let running = running_pods(&ns, "one", 2).await;
    let group = groups.get("one").await.unwrap();
    assert_eq!(group.data["spec"]["minMember"], 2, "{:?}", group.data);
    assert_eq!(group.owner_references()[0].kind, "RtJaxJob");
    assert_eq!(
        running[0]
            .labels()
            .get(gang::SCHEDULER_PLUGINS_POD_GROUP_LABEL)
            .map(String::as_str),
        Some("one")
    );
    let worker0 = running.iter().find(|p| p.name_any() == "one-worker-1").unwrap();
    let env_of = |pod: &Pod, name: &str| {
        let container = &pod.spec.as_ref().unwrap().containers[0];
        container
            .env
            .iter()
            .flatten()
            .find(|e| e.name == name)
            .and_then(|e| e.value.clone())
    };
    assert_eq!(
        env_of(worker0, "COORDINATOR_ADDRESS").as_deref(),
        Some("one-worker-0:6666")
    );
    assert_eq!(env_of(worker0, "NUM_PROCESSES").as_deref(), Some("2"));
    assert_eq!(env_of(worker0, "PROCESS_ID").as_deref(), Some("1"));
    let pod_api: Api<Pod> = ns.api();
    for pod in &running {
        pods::finish(&pod_api, &pod.name_any(), 0, 0).await.unwrap();
    }
    until_succeeded(&jobs, "one", "after its workers exited 0").await;
    // The controller sees its PodGroup in the shared cache, so it removes it once the job ends.
    wait::until("PodGroup one removed", wait::default_timeout(), || async {
        Ok(groups.get_opt("one").await.unwrap().is_none().then_some(()))
    })
    .await
    .unwrap();

    // Deleting the Framework stops its controller and leaves the CRD and its jobs.
    frameworks
        .delete("rtjax", &DeleteParams::default())
        .await
        .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(ns.client());
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(crds.get("rtjaxjobs.runtime-test.kfop.dev").await.is_ok());
    assert!(jobs.get("one").await.is_ok());
}
