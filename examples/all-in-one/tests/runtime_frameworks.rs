#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::print_stdout)]
//! Frameworks registered at run time (issue #15), through every step of a `Framework`'s life
//! that docs/frameworks.md promises, on one plane: a manifest applied to a running all-in-one
//! operator becomes a job kind whose jobs run to Succeeded, with no Rust and no restart,
//! gang-scheduled like a compiled kind; an invalid one is refused with the validator's
//! field-named error; a change restarts the controller with the new manifest; an invalid change
//! leaves the previous generation serving and says so; a delete stops the controller and keeps
//! the CRD and its jobs, or removes the CRD when annotated; and `kfop-operator
//! --runtime-frameworks=false` refuses every Framework.
use std::collections::BTreeSet;
use std::net::TcpListener;
use std::time::{Duration, Instant};

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
use kfop_testenv::{TestEnv, TestNamespace, pods, wait};

mod common;
use common::{job_pods, running_pods, until_succeeded};

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

fn reason<'a>(status: &'a FrameworkStatus, type_: &str) -> &'a str {
    let c = status.conditions.iter().find(|c| c.type_ == type_).unwrap();
    c.reason.as_str()
}

/// The manifest as another Framework: `name` serving `kind` (`<Kind>Job`, plural `<kind>jobs`)
/// in the same group.
fn renamed(text: &str, name: &str, kind: &str) -> String {
    text.replace("name: rtjax", &format!("name: {name}"))
        .replace("RtJaxJob", kind)
}

/// An `RtJaxJob` of `replicas` workers.
fn rtjax_job(name: &str, replicas: u32) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "runtime-test.kfop.dev/v1",
        "kind": "RtJaxJob",
        "metadata": {"name": name},
        "spec": {"rtjaxReplicaSpecs": {"Worker": {"replicas": replicas, "template": {"spec": {"containers": [
            {"name": "jax", "image": "busybox"}
        ]}}}}},
    }))
    .unwrap()
}

fn env_of(pod: &Pod, name: &str) -> Option<String> {
    let container = &pod.spec.as_ref().unwrap().containers[0];
    container
        .env
        .iter()
        .flatten()
        .find(|e| e.name == name)
        .and_then(|e| e.value.clone())
}

/// Creates a one-worker `RtJaxJob` and returns the `COORDINATOR_ADDRESS` its pod was created
/// with: which manifest the controller that made it runs.
async fn coordinator_of_new_job(ns: &TestNamespace, jobs: &Api<DynamicObject>, name: &str) -> String {
    jobs.create(&PostParams::default(), &rtjax_job(name, 1))
        .await
        .unwrap();
    let pods = wait::until(&format!("a pod of {name}"), wait::default_timeout(), || async {
        Ok(Some(job_pods(ns, name).await).filter(|p| !p.is_empty()))
    })
    .await
    .unwrap();
    env_of(&pods[0], "COORDINATOR_ADDRESS").unwrap()
}

/// Fails if `job` has a pod after `window`: no controller serves its kind.
async fn has_no_pods_after(ns: &TestNamespace, job: &str, window: Duration, why: &str) {
    tokio::time::sleep(window).await;
    let pods: Vec<String> = job_pods(ns, job)
        .await
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    assert!(pods.is_empty(), "{job} got pods {pods:?} {why}");
}

/// How long a new job of a served kind may take to get its pods: a kind with no controller
/// shows none for this long (they come in well under a second when one runs).
const NO_CONTROLLER_WINDOW: Duration = Duration::from_secs(2);

#[tokio::test]
async fn a_framework_lives_through_apply_change_refusal_and_delete() {
    let started = Instant::now();
    let mut step = Instant::now();
    let mut lap = |what: &str| {
        println!("{what}: {:.1} s", step.elapsed().as_secs_f64());
        step = Instant::now();
    };
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
    let start = |gang: GangScheduler| {
        Operator::start_with(
            ns.client(),
            ns.name(),
            move |c| c.gang = gang,
            |m| {
                kfop_operator::load_frameworks(
                    kfop_operator::register(m, &BTreeSet::new(), &Default::default()).unwrap(),
                    true,
                )
            },
        )
    };
    let mut operator = start(gang.clone());
    let frameworks: Api<Framework> = Api::all(ns.client());
    let crds: Api<CustomResourceDefinition> = Api::all(ns.client());
    lap("plane and operator");

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
    lap("refused and taken");

    // Apply, as a user would: `kfop apply -f kfop.yaml --wait 60`.
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
    let job = rtjax_job("one", 2);
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
    let worker1 = running.iter().find(|p| p.name_any() == "one-worker-1").unwrap();
    assert_eq!(
        env_of(worker1, "COORDINATOR_ADDRESS").as_deref(),
        Some("one-worker-0:6666")
    );
    assert_eq!(env_of(worker1, "NUM_PROCESSES").as_deref(), Some("2"));
    assert_eq!(env_of(worker1, "PROCESS_ID").as_deref(), Some("1"));
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
    lap("apply and a job to Succeeded");

    // Change: the controller restarts with the new manifest, so a new job's pods carry the new
    // port in their coordinator address.
    let changed = MANIFEST.replace("port: 6666", "port: 7777");
    let status = apply(&frameworks, &framework_object(&changed)).await;
    let served = status.observed_generation.unwrap();
    assert_eq!(
        condition(&status, "Ready"),
        (
            "True",
            "rtjaxjobs.runtime-test.kfop.dev is served and its controller runs"
        )
    );
    assert_eq!(
        coordinator_of_new_job(&ns, &jobs, "two").await,
        "two-worker-0:7777"
    );
    lap("change");

    // An invalid change: refused with the field named, while the previous generation serves on.
    let invalid = changed.replace("{host.Worker.0}", "{host.Chief.0}");
    let status = apply(&frameworks, &framework_object(&invalid)).await;
    let refused = status.observed_generation.unwrap();
    assert!(refused > served, "{status:?}");
    let (accepted, message) = condition(&status, "Accepted");
    assert_eq!(accepted, "False");
    assert!(
        message.contains("spec.env[0].value: unknown role `Chief` in `{host.Chief.0}`"),
        "{message}"
    );
    assert_eq!(reason(&status, "Ready"), "PreviousGeneration");
    assert_eq!(
        condition(&status, "Ready"),
        (
            "True",
            format!(
                "generation {refused} was refused; rtjaxjobs.runtime-test.kfop.dev is still served as generation {served} defined it"
            )
            .as_str()
        )
    );
    assert_eq!(
        coordinator_of_new_job(&ns, &jobs, "three").await,
        "three-worker-0:7777",
        "a job created after the invalid change runs as the previous generation says"
    );
    lap("invalid change");

    // A restart while the current generation is refused: the new operator runs the generation
    // last served (recorded on the Framework), not nothing.
    operator.stop().await;
    operator = start(gang.clone());
    assert_eq!(
        coordinator_of_new_job(&ns, &jobs, "three-after-restart").await,
        "three-after-restart-worker-0:7777",
        "after a restart the last served generation runs"
    );
    // The status is written once the recorded generation serves: poll briefly for it.
    let mut ready = String::new();
    for _ in 0..50 {
        let status = frameworks.get_status("rtjax").await.unwrap().status.unwrap();
        ready = reason(&status, "Ready").to_owned();
        if ready == "PreviousGeneration" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(ready, "PreviousGeneration");
    lap("restart while refused");

    // Delete: the controller stops; the CRD and the jobs stay. The loader handles Frameworks in
    // the order the watch delivers them, so once a Framework applied after the delete is judged,
    // the delete has been handled. That one is annotated: deleting it removes its CRD.
    frameworks
        .delete("rtjax", &DeleteParams::default())
        .await
        .unwrap();
    let annotated = renamed(MANIFEST, "rttemp", "RtTempJob").replace(
        "  name: rttemp\n",
        "  name: rttemp\n  annotations:\n    kfop.dev/remove-crd-on-delete: \"true\"\n",
    );
    let status = apply(&frameworks, &framework_object(&annotated)).await;
    assert_eq!(
        condition(&status, "Ready"),
        (
            "True",
            "rttempjobs.runtime-test.kfop.dev is served and its controller runs"
        )
    );
    jobs.create(&PostParams::default(), &rtjax_job("four", 1))
        .await
        .unwrap();
    has_no_pods_after(
        &ns,
        "four",
        NO_CONTROLLER_WINDOW,
        "after its Framework was deleted",
    )
    .await;
    assert!(
        crds.get_opt("rtjaxjobs.runtime-test.kfop.dev")
            .await
            .unwrap()
            .is_some()
    );
    let names: Vec<String> = jobs
        .list(&Default::default())
        .await
        .unwrap()
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    assert_eq!(names, ["four", "one", "three", "three-after-restart", "two"]);
    lap("delete");

    frameworks
        .delete("rttemp", &DeleteParams::default())
        .await
        .unwrap();
    wait::until("the CRD rttempjobs removed", wait::default_timeout(), || async {
        Ok(crds
            .get_opt("rttempjobs.runtime-test.kfop.dev")
            .await
            .unwrap()
            .is_none()
            .then_some(()))
    })
    .await
    .unwrap();
    lap("delete with remove-crd-on-delete");

    // `kfop-operator --runtime-frameworks=false` (the binary, its flag as users pass it) in
    // place of the in-process operator: every Framework is refused, no CRD is installed and no
    // controller starts, not even for a kind whose CRD is still there.
    operator.stop().await;
    let jax = kfop_operator::schemes::parse(&["jaxjob".to_owned()]).unwrap();
    env.install_crds(jax.iter().map(|s| s.crd_without_conversion()))
        .await
        .unwrap();
    let metrics = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let args = [
        format!("--namespace={}", ns.name()),
        "--enable-scheme=jaxjob".to_owned(),
        format!("--metrics-bind-address={metrics}"),
        "--runtime-frameworks=false".to_owned(),
    ];
    let mut binary = common::start_operator(env, &args, metrics, &[]).await;
    let disabled = "this operator runs with --runtime-frameworks=false: it installs no CRDs for Frameworks";
    for (name, kind) in [("rtoff", "RtOffJob"), ("rtjax", "RtJaxJob")] {
        let status = apply(&frameworks, &framework_object(&renamed(MANIFEST, name, kind))).await;
        assert_eq!(condition(&status, "Accepted"), ("False", disabled), "{name}");
        assert_eq!(reason(&status, "Accepted"), "Disabled", "{name}");
        assert_eq!(condition(&status, "Ready"), ("False", disabled), "{name}");
    }
    assert!(
        crds.get_opt("rtoffjobs.runtime-test.kfop.dev")
            .await
            .unwrap()
            .is_none()
    );
    has_no_pods_after(
        &ns,
        "four",
        NO_CONTROLLER_WINDOW,
        "under --runtime-frameworks=false",
    )
    .await;
    binary.check_alive().unwrap();
    for name in ["rtoff", "rtjax"] {
        frameworks.delete(name, &DeleteParams::default()).await.unwrap();
    }
    lap("--runtime-frameworks=false");
    println!("whole lifecycle: {:.1} s", started.elapsed().as_secs_f64());
}
