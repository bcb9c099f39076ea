#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::print_stdout)]
//! kfop's jobs queued by Kueue as pod groups (`--kueue-pod-groups`), with Kueue's Kubeflow job
//! integrations switched off: Kueue v0.19.2 (built from its Go module, run out of cluster by
//! `kfop_testenv::Peer`) with `integrations.frameworks: [pod]` alone, as Kueue will run once it
//! removes its Kubeflow integrations. Every pod of a job labelled `kueue.x-k8s.io/queue-name`
//! carries the job's pod group (`kueue.x-k8s.io/pod-group-name`, `…/pod-group-total-count`);
//! Kueue's pod webhook gates each one (`kueue.x-k8s.io/admission`), builds the group's Workload
//! once all exist, and ungates them when it admits the Workload.
//!
//! * Every bundled kind (MXJob too, which Kueue never integrated) and a kind registered at run
//!   time (a Framework) queue, wait while the quota is used (gated pods, none bound; the job's
//!   Running condition False, reason `<Kind>WaitingForAdmission`), are admitted whole and run
//!   to Succeeded, which finishes their Workloads.
//! * A low-priority job preempted by a high-priority one loses its pods, says it waits, and
//!   resumes once the quota is back, with its start time, conditions and replica counts intact.
//! * A job whose LocalQueue does not exist, and one whose pods fit no flavor, stay queued with
//!   Kueue's reason in their condition; none of their pods is ever bound.
//!
//! `KFOP_KUEUE_PEER=kueue-v0.17.0` runs the same against Kueue v0.17.0.
mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use kfop_operator::samples;
use kfop_operator::schemes::{self, Scheme};
use kfop_runtime::api::{ConditionStatus, JobConditionType, JobStatus};
use kfop_runtime::dynamic::Framework;
use kfop_runtime::gang;
use kfop_runtime::k8s_openapi::api::core::v1::{Node, Pod};
use kfop_runtime::kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kfop_runtime::kube::{Client, CustomResourceExt, ResourceExt};
use kfop_runtime::serde_json::{self, Value, json};
use kfop_runtime::testing::Operator;
use kfop_testenv::peer::{KUEUE_POD_INTEGRATION, KUEUE_V0_19_2};
use kfop_testenv::{Peer, PeerOptions, TestEnv, TestNamespace, pods, wait};

use common::{
    LOCAL_QUEUE, QUEUE_LABEL, job_pods, kueue_resource, object, pod_count, queues_with, running_pods, status,
    until_succeeded,
};

/// A kind registered at run time: one Worker role, pod 0 the coordinator.
const MANIFEST: &str = "apiVersion: kfop.dev/v1alpha1
kind: Framework
metadata:
  name: kqjax
spec:
  group: kueue-test.kfop.dev
  version: v1
  kind: KqJaxJob
  container:
    name: jax
    portName: jaxjob-port
    port: 6666
  roles:
    - name: Worker
      restartPolicy: Never
  masterPods: indexZero
  env:
    - name: PROCESS_ID
      value: \"{index}\"
  status:
    rule: leaderOrFollowers
    followers: Worker
";

const PRIORITY_LABEL: &str = "kueue.x-k8s.io/priority-class";

/// Kueue v0.19.2 with only its pod integration, and kfop with pod groups on (every bundled kind
/// and run-time Frameworks), both on `ns`.
async fn start(env: &TestEnv, ns: &TestNamespace) -> (Peer, Operator) {
    let all = schemes::parse(&[]).unwrap();
    let mut crds: Vec<_> = all.iter().map(|s| s.crd_without_conversion()).collect();
    crds.push(Framework::crd());
    env.install_crds(crds).await.unwrap();
    let peer = std::env::var("KFOP_KUEUE_PEER").unwrap_or_else(|_| KUEUE_V0_19_2.to_owned());
    let options = PeerOptions {
        peer,
        operator_namespace: "kueue-system".to_owned(),
        enable_schemes: vec![KUEUE_POD_INTEGRATION.to_owned()],
        ..PeerOptions::default()
    };
    let kueue = Peer::start(env.kubeconfig(), ns.name(), options).await.unwrap();
    let operator = Operator::start_with(
        ns.client(),
        ns.name(),
        |c| c.kueue_pod_groups = true,
        move |m| {
            kfop_operator::load_frameworks(
                kfop_operator::register(m, &all, &Default::default()).unwrap(),
                true,
            )
        },
    );
    (kueue, operator)
}

/// The queues of [`queues_with`] covering memory as well as CPU (plenty of it): a pod group's
/// Workload counts what its pods request, init containers too (a PyTorchJob worker's, which
/// waits for the master, asks for memory), where a job's Workload counts its templates.
async fn pod_queues(client: &Client, ns: &str, cpus: usize, spec: Value) {
    let mut spec = spec;
    spec["resourceGroups"] = json!([{
        "coveredResources": ["cpu", "memory"],
        "flavors": [{ "name": format!("flavor-{ns}"), "resources": [
            { "name": "cpu", "nominalQuota": cpus.to_string() },
            { "name": "memory", "nominalQuota": "1Ti" },
        ] }],
    }]);
    queues_with(client, ns, cpus, None, spec).await;
}

/// `scheme`'s sample job named `name`, each pod requesting `cpu`, labelled for `queue`.
fn job(scheme: Scheme, name: &str, queue: &str, cpu: &str, priority: Option<&str>) -> DynamicObject {
    let (_, mut job) = samples::sample(scheme).unwrap();
    job.metadata.name = Some(name.to_owned());
    let mut labels = std::collections::BTreeMap::from([(QUEUE_LABEL.to_owned(), queue.to_owned())]);
    if let Some(priority) = priority {
        labels.insert(PRIORITY_LABEL.to_owned(), priority.to_owned());
    }
    job.metadata.labels = Some(labels);
    for spec in samples::replica_specs_mut(&mut job).unwrap().values_mut() {
        for container in spec["template"]["spec"]["containers"].as_array_mut().unwrap() {
            container["resources"] = json!({ "requests": { "cpu": cpu } });
        }
    }
    job
}

fn jobs(ns: &TestNamespace, kind: &ApiResource) -> Api<DynamicObject> {
    Api::namespaced_with(ns.client(), ns.name(), kind)
}

/// Creates the job; returns its pod group's name (its Workload's).
async fn create(api: &Api<DynamicObject>, job: &DynamicObject) -> String {
    let created = api.create(&PostParams::default(), job).await.unwrap();
    assert!(
        created.data["spec"]["runPolicy"]["suspend"] != json!(true),
        "{}: suspended at creation, so Kueue's Kubeflow integration is on",
        created.name_any()
    );
    gang::group_name(&created.name_any(), &created.uid().unwrap())
}

fn workloads(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &kueue_resource("Workload", "workloads"))
}

fn has_condition(object: &Value, type_: &str, want: bool) -> bool {
    let wanted = if want { "True" } else { "False" };
    object["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == type_ && c["status"] == wanted)
}

/// The Workload named `group` (`None`: there is none) once `done` accepts it; a failed look is
/// no answer, and the next one is made.
async fn workload_where(
    client: &Client,
    ns: &str,
    group: &str,
    what: &str,
    done: impl Fn(Option<&Value>) -> bool,
) -> Option<Value> {
    let api = workloads(client, ns);
    let found = wait::until(
        &format!("Workload {group} {what}"),
        wait::default_timeout(),
        || {
            let (api, done) = (api.clone(), &done);
            async move {
                let Ok(w) = api.get_opt(group).await else {
                    return Ok(None);
                };
                let w = w.map(|w| serde_json::to_value(w).unwrap());
                Ok(done(w.as_ref()).then_some(w))
            }
        },
    )
    .await;
    match found {
        Ok(w) => w,
        Err(error) => {
            let w = api.get(group).await.ok();
            panic!(
                "{error}; the Workload: {:?}",
                w.map(|w| w.data.get("status").cloned())
            );
        }
    }
}

/// The Workload named `group` once it has condition `type_` True or False.
async fn workload(client: &Client, ns: &str, group: &str, type_: &str, want: bool) -> Value {
    let with = |w: Option<&Value>| w.is_some_and(|w| has_condition(w, type_, want));
    workload_where(client, ns, group, &format!("with {type_}={want}"), with)
        .await
        .expect("accepted only when it exists")
}

/// Waits until the group's Workload is Finished or gone. Kueue makes a pod group's Workload owned
/// by its pods and drops their finalizers once the group finished, so the garbage collector
/// removes the Workload as soon as the pods are deleted, which can come before a look sees it
/// Finished; either way the group's quota is released.
async fn workload_finished(client: &Client, ns: &str, group: &str) {
    let finished = |w: Option<&Value>| w.is_none_or(|w| has_condition(w, "Finished", true));
    workload_where(client, ns, group, "Finished or gone", finished).await;
}

/// Waits until the job says it waits for Kueue (Running False, `<Kind>WaitingForAdmission`) with
/// a message containing `why`; returns the message.
async fn waits_for_admission(api: &Api<DynamicObject>, name: &str, why: &str) -> String {
    let found = wait::until(
        &format!("{name} waiting for admission ({why})"),
        wait::default_timeout(),
        || {
            let api = api.clone();
            async move {
                let job = api.get(name).await.ok();
                Ok(job.and_then(|j| {
                    let s = status(&j);
                    let c = s.condition(JobConditionType::Running)?.clone();
                    (c.status == ConditionStatus::False
                        && c.reason.ends_with("WaitingForAdmission")
                        && c.message.contains(why))
                    .then_some(c.message)
                }))
            }
        },
    )
    .await;
    match found {
        Ok(message) => message,
        Err(error) => {
            let job = api.get(name).await.unwrap();
            panic!("{error}; the job's status: {:?}", job.data.get("status"));
        }
    }
}

/// The job's status once its Running condition is True.
async fn running(api: &Api<DynamicObject>, name: &str) -> JobStatus {
    let found = wait::until(&format!("{name} Running"), wait::default_timeout(), || {
        let api = api.clone();
        async move {
            let job = api.get(name).await.ok();
            Ok(job
                .map(|j| status(&j))
                .filter(|s| s.is(JobConditionType::Running)))
        }
    })
    .await;
    match found {
        Ok(s) => s,
        Err(error) => {
            let job = api.get(name).await.unwrap();
            panic!("{error}; the job's status: {:?}", job.data.get("status"));
        }
    }
}

/// Every pod of `job` (`count` of them) exists, gated by Kueue and bound to no node.
async fn all_gated(ns: &TestNamespace, job: &str, count: usize) -> Vec<Pod> {
    let pods = wait::until(
        &format!("{count} gated pods of {job}"),
        wait::default_timeout(),
        || async move {
            let pods = job_pods(ns, job).await;
            Ok((pods.len() == count).then_some(pods))
        },
    )
    .await
    .unwrap();
    for pod in &pods {
        let spec = pod.spec.as_ref().unwrap();
        let gates: Vec<&str> = spec
            .scheduling_gates
            .iter()
            .flatten()
            .map(|g| g.name.as_str())
            .collect();
        assert!(
            gates.contains(&gang::ADMISSION_GATE),
            "{}: not gated by Kueue: {gates:?}",
            pod.name_any()
        );
        assert!(
            spec.node_name.is_none(),
            "{}: bound before admission",
            pod.name_any()
        );
    }
    pods
}

/// The pod-group marks kfop put on `pod` of a job of `count` pods in `group`.
fn assert_group_member(pod: &Pod, group: &str, count: usize) {
    let labels = pod.labels();
    let annotations = pod.annotations();
    let name = pod.name_any();
    assert_eq!(
        labels.get(QUEUE_LABEL).map(String::as_str),
        Some(LOCAL_QUEUE),
        "{name}"
    );
    assert_eq!(
        labels.get(gang::POD_GROUP_NAME_LABEL).map(String::as_str),
        Some(group),
        "{name}"
    );
    assert_eq!(
        annotations.get(gang::POD_GROUP_TOTAL_COUNT_ANNOTATION),
        Some(&count.to_string()),
        "{name}"
    );
    // An MPIJob's launcher (its batch Job's pod) has a job-role but no replica type or index.
    let role = labels
        .get("training.kubeflow.org/replica-type")
        .or_else(|| labels.get("training.kubeflow.org/job-role"))
        .unwrap();
    assert_eq!(annotations.get(gang::ROLE_HASH_ANNOTATION), Some(role), "{name}");
    assert_eq!(
        labels.get("kueue.x-k8s.io/managed").map(String::as_str),
        Some("true"),
        "{name}"
    );
}

/// Ends every pod of the job with exit code 0, the ones that decide success (master) last.
async fn finish(ns: &TestNamespace, pods_of_job: Vec<Pod>) {
    let mut pods_of_job = pods_of_job;
    let decides = |p: &Pod| {
        let role = p.labels().get("training.kubeflow.org/replica-type").cloned();
        matches!(role.as_deref(), Some("master" | "launcher"))
    };
    pods_of_job.sort_by_key(|p| decides(p));
    let pod_api: Api<Pod> = ns.api();
    for pod in &pods_of_job {
        pods::finish(&pod_api, &pod.name_any(), 0, 0).await.unwrap();
    }
}

/// The job's pods once `count` of them run, after Kueue admitted its group.
async fn admitted_and_running(ns: &TestNamespace, name: &str, group: &str, count: usize) -> Vec<Pod> {
    workload(&ns.client(), ns.name(), group, "Admitted", true).await;
    let running = running_pods(ns, name, count).await;
    for pod in &running {
        assert_group_member(pod, group, count);
    }
    running
}

#[tokio::test]
async fn every_kind_queues_as_a_kueue_pod_group() {
    let started = Instant::now();
    let env = TestEnv::shared().unwrap();
    let ns = env.namespace("kqpg").await.unwrap();
    let (kueue, _operator) = start(env, &ns).await;
    let client = ns.client();

    // The first four fill the quota exactly; the rest wait until they are done.
    let first = [Scheme::PyTorchJob, Scheme::TfJob, Scheme::MpiJob, Scheme::MxJob];
    let waiting = [Scheme::XgBoostJob, Scheme::PaddleJob, Scheme::JaxJob];
    let quota: usize = first.iter().map(|s| pod_count(*s)).sum();
    let later: usize = waiting.iter().map(|s| pod_count(*s)).sum();
    assert!(
        later + 2 <= quota,
        "the waiting jobs and the run-time kind's must fit together"
    );
    pod_queues(&client, ns.name(), quota, json!({})).await;

    let name = |s: Scheme| format!("pg-{}", format!("{s:?}").to_lowercase());
    let mut groups = std::collections::BTreeMap::new();
    let mut admission = Vec::new();
    for scheme in first {
        let api = jobs(&ns, &samples::api_resource(scheme));
        let at = Instant::now();
        let group = create(&api, &job(scheme, &name(scheme), LOCAL_QUEUE, "1", None)).await;
        groups.insert(scheme, group);
        admission.push((scheme, at));
    }
    let mut running = Vec::new();
    for (scheme, at) in admission {
        let pods = admitted_and_running(&ns, &name(scheme), &groups[&scheme], pod_count(scheme)).await;
        println!(
            "{scheme:?}: created to all {} pods running {:.2} s",
            pods.len(),
            at.elapsed().as_secs_f64()
        );
        running.push((scheme, pods));
    }

    // With the quota used, the next ones wait: pods created and gated, none bound, and the job
    // says why.
    for scheme in waiting {
        let api = jobs(&ns, &samples::api_resource(scheme));
        let group = create(&api, &job(scheme, &name(scheme), LOCAL_QUEUE, "1", None)).await;
        groups.insert(scheme, group);
    }
    for scheme in waiting {
        let api = jobs(&ns, &samples::api_resource(scheme));
        workload(&client, ns.name(), &groups[&scheme], "QuotaReserved", false).await;
        let message = waits_for_admission(&api, &name(scheme), &groups[&scheme]).await;
        println!("{scheme:?} waiting: {message}");
        all_gated(&ns, &name(scheme), pod_count(scheme)).await;
    }

    // Succeeded jobs finish their Workloads, which frees the quota for the waiting ones.
    for (scheme, pods_of_job) in running {
        finish(&ns, pods_of_job).await;
        until_succeeded(
            &jobs(&ns, &samples::api_resource(scheme)),
            &name(scheme),
            "as a pod group",
        )
        .await;
        workload_finished(&client, ns.name(), &groups[&scheme]).await;
    }
    for scheme in waiting {
        let pods = admitted_and_running(&ns, &name(scheme), &groups[&scheme], pod_count(scheme)).await;
        finish(&ns, pods).await;
        until_succeeded(
            &jobs(&ns, &samples::api_resource(scheme)),
            &name(scheme),
            "once admitted",
        )
        .await;
        workload_finished(&client, ns.name(), &groups[&scheme]).await;
    }

    // A kind registered at run time queues the same way.
    let framework: Framework = {
        let value: Value = serde_saphyr::from_str(MANIFEST).unwrap();
        serde_json::from_value(value).unwrap()
    };
    let frameworks: Api<Framework> = Api::all(client.clone());
    frameworks
        .patch(
            "kqjax",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&framework),
        )
        .await
        .unwrap();
    let kind = ApiResource {
        group: "kueue-test.kfop.dev".to_owned(),
        version: "v1".to_owned(),
        api_version: "kueue-test.kfop.dev/v1".to_owned(),
        kind: "KqJaxJob".to_owned(),
        plural: "kqjaxjobs".to_owned(),
    };
    let api = jobs(&ns, &kind);
    let rt: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kueue-test.kfop.dev/v1", "kind": "KqJaxJob",
        "metadata": {"name": "pg-runtime", "labels": {QUEUE_LABEL: LOCAL_QUEUE}},
        "spec": {"kqjaxReplicaSpecs": {"Worker": {"replicas": 2, "template": {"spec": {"containers": [
            {"name": "jax", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
        ]}}}}},
    }))
    .unwrap();
    // The kind's CRD and controller come up a moment after the Framework is applied.
    let group = wait::until("the run-time kind serving", Duration::from_secs(60), || {
        let (api, rt) = (api.clone(), rt.clone());
        async move {
            match api.create(&PostParams::default(), &rt).await {
                Ok(created) => Ok(Some(gang::group_name(
                    &created.name_any(),
                    &created.uid().unwrap(),
                ))),
                Err(_) => Ok(None),
            }
        }
    })
    .await
    .unwrap();
    let pods = admitted_and_running(&ns, "pg-runtime", &group, 2).await;
    finish(&ns, pods).await;
    until_succeeded(&api, "pg-runtime", "as a pod group").await;
    workload_finished(&client, ns.name(), &group).await;
    frameworks.delete("kqjax", &Default::default()).await.unwrap();
    println!("every kind: {:.1} s", started.elapsed().as_secs_f64());
    drop(kueue);
}

#[tokio::test]
async fn a_preempted_pod_group_resumes_where_it_was() {
    let started = Instant::now();
    let env = TestEnv::shared().unwrap();
    let ns = env.namespace("kqpre").await.unwrap();
    let (kueue, _operator) = start(env, &ns).await;
    let client = ns.client();
    let scheme = Scheme::PyTorchJob;
    let count = pod_count(scheme);
    let priorities: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &kueue_resource("WorkloadPriorityClass", "workloadpriorityclasses"),
    );
    for (class, value) in [("kq-low", 100), ("kq-high", 1000)] {
        let wpc = object(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
            "metadata": {"name": class}, "value": value,
        }));
        // Left by an earlier run on the same plane: the same values.
        let _ = priorities.create(&PostParams::default(), &wpc).await;
    }
    pod_queues(
        &client,
        ns.name(),
        count,
        json!({"preemption": {"withinClusterQueue": "LowerPriority"}}),
    )
    .await;
    let api = jobs(&ns, &samples::api_resource(scheme));

    let low = create(&api, &job(scheme, "low", LOCAL_QUEUE, "1", Some("kq-low"))).await;
    let low_pods = admitted_and_running(&ns, "low", &low, count).await;
    let before = running(&api, "low").await;

    let preempting = Instant::now();
    let high = create(&api, &job(scheme, "high", LOCAL_QUEUE, "1", Some("kq-high"))).await;
    workload(&client, ns.name(), &low, "Evicted", true).await;
    let message = waits_for_admission(&api, "low", &low).await;
    println!("low preempted: {message}");
    // Its old pods went (Kueue deleted them); kfop made new ones, which wait gated.
    let old: BTreeSet<String> = low_pods.iter().filter_map(|p| p.uid()).collect();
    wait::until("low's pods replaced", wait::default_timeout(), || {
        let (ns, old) = (&ns, &old);
        async move {
            let now = job_pods(ns, "low").await;
            Ok((now.len() == count && now.iter().all(|p| !old.contains(&p.uid().unwrap()))).then_some(()))
        }
    })
    .await
    .unwrap();
    all_gated(&ns, "low", count).await;
    let high_pods = admitted_and_running(&ns, "high", &high, count).await;
    println!(
        "high created to running (preempting low): {:.2} s",
        preempting.elapsed().as_secs_f64()
    );

    let resuming = Instant::now();
    finish(&ns, high_pods).await;
    until_succeeded(&api, "high", "after preempting low").await;
    let low_pods = admitted_and_running(&ns, "low", &low, count).await;
    running(&api, "low").await;
    println!(
        "low re-admitted and running {:.2} s after high's pods ended",
        resuming.elapsed().as_secs_f64()
    );
    let resumed = status(&api.get("low").await.unwrap());
    assert_eq!(resumed.start_time, before.start_time, "the start time was reset");
    assert_eq!(
        resumed
            .condition(JobConditionType::Created)
            .map(|c| &c.last_transition_time),
        before
            .condition(JobConditionType::Created)
            .map(|c| &c.last_transition_time)
    );
    assert!(!resumed.is(JobConditionType::Failed), "{resumed:?}");
    let failed: i32 = resumed.replica_statuses.values().map(|r| r.failed).sum();
    assert_eq!(failed, 0, "the preemption counted as a failure: {resumed:?}");
    finish(&ns, low_pods).await;
    until_succeeded(&api, "low", "after resuming").await;
    workload_finished(&client, ns.name(), &low).await;
    println!("preemption: {:.1} s", started.elapsed().as_secs_f64());
    drop(kueue);
}

#[tokio::test]
async fn a_job_kueue_cannot_admit_stays_queued_and_says_why() {
    let env = TestEnv::shared().unwrap();
    let ns = env.namespace("kqbad").await.unwrap();
    let (kueue, _operator) = start(env, &ns).await;
    let client = ns.client();
    pod_queues(&client, ns.name(), 4, json!({})).await;
    let scheme = Scheme::PyTorchJob;
    let count = pod_count(scheme);
    let api = jobs(&ns, &samples::api_resource(scheme));

    let no_queue = create(&api, &job(scheme, "no-queue", "missing", "1", None)).await;
    let too_big = create(&api, &job(scheme, "too-big", LOCAL_QUEUE, "100", None)).await;
    let message = waits_for_admission(&api, "no-queue", "doesn't exist").await;
    println!("no-queue: {message}");
    assert!(message.contains(&no_queue), "{message}");
    let message = waits_for_admission(&api, "too-big", "flavor").await;
    println!("too-big: {message}");
    // Given time to go wrong, neither has a bound pod.
    tokio::time::sleep(Duration::from_secs(3)).await;
    all_gated(&ns, "no-queue", count).await;
    all_gated(&ns, "too-big", count).await;
    let _ = too_big;
    for name in ["no-queue", "too-big"] {
        let s: JobStatus = status(&api.get(name).await.unwrap());
        assert!(
            !s.is(JobConditionType::Running) && !s.is(JobConditionType::Failed),
            "{name}: {s:?}"
        );
    }
    drop(kueue);
}

/// Kwok nodes of this test alone: labelled with `pool` (the flavor's node label), a block and a
/// rack, tainted so that only pods given the flavor's toleration land there; 2 CPUs each.
async fn tas_nodes(client: &Client, pool: &str, racks: &[(&str, &[&str])]) -> Vec<String> {
    let api: Api<Node> = Api::all(client.clone());
    let mut names = Vec::new();
    for (rack, nodes) in racks {
        for node in *nodes {
            let name = format!("{pool}-{node}");
            let object: Node = serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {
                    "name": name,
                    "annotations": { "kwok.x-k8s.io/node": "fake" },
                    "labels": {
                        "type": "kwok", "kubernetes.io/hostname": name,
                        "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                        TAS_POOL: pool, TAS_BLOCK: "b0", TAS_RACK: rack,
                    },
                },
                "spec": { "taints": [{ "key": TAS_POOL, "value": pool, "effect": "NoSchedule" }] },
            }))
            .unwrap();
            api.create(&PostParams::default(), &object).await.unwrap();
            let resources = json!({ "cpu": "2", "memory": "8Gi", "pods": "110" });
            let status = json!({ "status": { "capacity": resources, "allocatable": resources } });
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await
                .unwrap();
            names.push(name);
        }
    }
    names
}

const TAS_POOL: &str = "kfop.dev/tas-pool";
const TAS_BLOCK: &str = "kfop.dev/tas-block";
const TAS_RACK: &str = "kfop.dev/tas-rack";
const REQUIRED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-required-topology";

/// The rack of the node `pod` is bound to.
async fn rack_of(client: &Client, pod: &Pod) -> String {
    let node = pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap();
    let api: Api<Node> = Api::all(client.clone());
    api.get(&node).await.unwrap().labels()[TAS_RACK].clone()
}

#[tokio::test]
async fn topology_aware_scheduling_places_a_pod_group_by_rack() {
    let started = Instant::now();
    let env = TestEnv::shared().unwrap();
    let ns = env.namespace("kqtas").await.unwrap();
    let (kueue, _operator) = start(env, &ns).await;
    let client = ns.client();
    let pool = ns.name().to_owned();
    // Two racks of two 2-CPU nodes: a rack holds 4 one-CPU pods.
    let nodes = tas_nodes(&client, &pool, &[("r0", &["n0", "n1"]), ("r1", &["n2", "n3"])]).await;
    let topology = format!("tas-{pool}");
    let topologies: Api<DynamicObject> =
        Api::all_with(client.clone(), &kueue_resource("Topology", "topologies"));
    topologies
        .create(
            &PostParams::default(),
            &object(json!({
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
                "metadata": {"name": topology},
                "spec": {"levels": [
                    {"nodeLabel": TAS_BLOCK}, {"nodeLabel": TAS_RACK}, {"nodeLabel": "kubernetes.io/hostname"},
                ]},
            })),
        )
        .await
        .unwrap();
    let flavors: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &kueue_resource("ResourceFlavor", "resourceflavors"),
    );
    let flavor = format!("flavor-{pool}");
    flavors
        .create(
            &PostParams::default(),
            &object(json!({
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                "metadata": {"name": flavor},
                "spec": {
                    "nodeLabels": {TAS_POOL: pool},
                    "topologyName": topology,
                    "tolerations": [{"key": TAS_POOL, "operator": "Equal", "value": pool, "effect": "NoSchedule"}],
                },
            })),
        )
        .await
        .unwrap();
    let cluster_queue = format!("cq-{pool}");
    let cqs: Api<DynamicObject> =
        Api::all_with(client.clone(), &kueue_resource("ClusterQueue", "clusterqueues"));
    cqs.create(
        &PostParams::default(),
        &object(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": cluster_queue},
            "spec": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": pool}},
                "resourceGroups": [{
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [{"name": flavor, "resources": [
                        {"name": "cpu", "nominalQuota": "8"}, {"name": "memory", "nominalQuota": "32Gi"},
                    ]}],
                }],
            },
        })),
    )
    .await
    .unwrap();
    let lqs: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &pool,
        &kueue_resource("LocalQueue", "localqueues"),
    );
    lqs.create(
        &PostParams::default(),
        &object(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": LOCAL_QUEUE, "namespace": pool},
            "spec": {"clusterQueue": cluster_queue},
        })),
    )
    .await
    .unwrap();

    // A PyTorchJob of a master and three workers, the workers required within one rack; a
    // worker that fails with a retryable exit code is replaced (restart policy ExitCode).
    let scheme = Scheme::PyTorchJob;
    let mut tas = job(scheme, "tas", LOCAL_QUEUE, "1", None);
    let specs = samples::replica_specs_mut(&mut tas).unwrap();
    specs["Worker"]["replicas"] = json!(3);
    specs["Worker"]["restartPolicy"] = json!("ExitCode");
    specs["Worker"]["template"]["metadata"]["annotations"] = json!({ REQUIRED_TOPOLOGY: TAS_RACK });
    let api = jobs(&ns, &samples::api_resource(scheme));
    let at = Instant::now();
    let group = create(&api, &tas).await;
    let w = workload(&client, &pool, &group, "Admitted", true).await;
    let pods = admitted_and_running(&ns, "tas", &group, 4).await;
    println!(
        "TAS: created to all 4 pods running {:.2} s",
        at.elapsed().as_secs_f64()
    );
    let assignments = &w["status"]["admission"]["podSetAssignments"];
    println!("TAS admission: {assignments}");
    let workers: Vec<&Pod> = pods
        .iter()
        .filter(|p| p.labels()["training.kubeflow.org/replica-type"] == "worker")
        .collect();
    let mut racks = BTreeSet::new();
    for pod in &pods {
        let name = pod.name_any();
        let spec = pod.spec.as_ref().unwrap();
        // Kueue's flavor toleration and its node selector were merged in on admission.
        let tolerated = spec
            .tolerations
            .iter()
            .flatten()
            .any(|t| t.key.as_deref() == Some(TAS_POOL));
        assert!(
            tolerated,
            "{name}: no toleration of the flavor: {:?}",
            spec.tolerations
        );
        assert!(
            nodes.contains(spec.node_name.as_ref().unwrap()),
            "{name} off the pool"
        );
        // The template's annotation reached the pod, and the rank label Kueue orders by.
        let labels = pod.labels();
        assert_eq!(
            labels.get("kueue.x-k8s.io/pod-group-pod-index"),
            labels.get("training.kubeflow.org/replica-index"),
            "{name}"
        );
    }
    for worker in &workers {
        assert_eq!(
            worker.annotations().get(REQUIRED_TOPOLOGY).map(String::as_str),
            Some(TAS_RACK)
        );
        racks.insert(rack_of(&client, worker).await);
    }
    assert_eq!(racks.len(), 1, "workers spread over racks {racks:?}");

    // A worker fails (retryable): kfop replaces it, gated, and Kueue places the new pod in the
    // admitted domain again, with the same toleration.
    let failing = workers[1].name_any();
    let old_uid = workers[1].uid().unwrap();
    pods::finish(&ns.api(), &failing, 137, 0).await.unwrap();
    let replaced = wait::until(
        &format!("{failing} replaced and running"),
        wait::default_timeout(),
        || {
            let (ns, failing, old_uid) = (&ns, &failing, &old_uid);
            async move {
                let pod = ns.api::<Pod>().get(failing).await.ok();
                Ok(pod.filter(|p| p.uid().as_ref() != Some(old_uid) && pods::phase(p) == "Running"))
            }
        },
    )
    .await
    .unwrap();
    let spec = replaced.spec.as_ref().unwrap();
    assert!(
        spec.tolerations
            .iter()
            .flatten()
            .any(|t| t.key.as_deref() == Some(TAS_POOL))
    );
    let rack = rack_of(&client, &replaced).await;
    assert!(
        racks.contains(&rack),
        "the replacement went to rack {rack}, not {racks:?}"
    );
    println!("TAS: the replaced worker runs in rack {rack}");

    let pods = running_pods(&ns, "tas", 4).await;
    finish(&ns, pods).await;
    until_succeeded(&api, "tas", "under topology-aware scheduling").await;
    workload_finished(&client, &pool, &group).await;
    drop(kueue);
    let node_api: Api<Node> = Api::all(client.clone());
    for node in &nodes {
        let _ = node_api.delete(node, &Default::default()).await;
    }
    println!("TAS: {:.1} s", started.elapsed().as_secs_f64());
}

#[tokio::test]
async fn a_job_that_succeeds_with_pods_still_running_frees_its_quota() {
    let env = TestEnv::shared().unwrap();
    let ns = env.namespace("kqdone").await.unwrap();
    let (kueue, _operator) = start(env, &ns).await;
    let client = ns.client();
    let scheme = Scheme::PyTorchJob;
    let count = pod_count(scheme);
    pod_queues(&client, ns.name(), count, json!({})).await;
    let api = jobs(&ns, &samples::api_resource(scheme));

    // The master succeeds while the worker runs: the job is Succeeded and kfop deletes the
    // running worker (cleanPodPolicy Running). Kueue's group would wait for all pods to
    // succeed; kfop marks them not retriable, so the Workload finishes and frees the quota.
    let mut early = job(scheme, "early", LOCAL_QUEUE, "1", None);
    early.data["spec"]["runPolicy"] = json!({ "cleanPodPolicy": "Running" });
    let group = create(&api, &early).await;
    let pods = admitted_and_running(&ns, "early", &group, count).await;
    let master = pods
        .iter()
        .find(|p| p.labels()["training.kubeflow.org/replica-type"] == "master")
        .unwrap();
    pods::finish(&ns.api(), &master.name_any(), 0, 0).await.unwrap();
    until_succeeded(&api, "early", "with its worker still running").await;
    let finished = Instant::now();
    workload_finished(&client, ns.name(), &group).await;
    println!(
        "early: Workload finished {:.2} s after the job succeeded",
        finished.elapsed().as_secs_f64()
    );
    // The quota is free: a job of the same size runs.
    let next = create(&api, &job(scheme, "next", LOCAL_QUEUE, "1", None)).await;
    let pods = admitted_and_running(&ns, "next", &next, count).await;
    finish(&ns, pods).await;
    until_succeeded(&api, "next", "after early freed the quota").await;
    drop(kueue);
}
