#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Kubeflow training-operator's JAXJob (v1.9) behaviour (reference §2.8, §3.2) against the
//! real control plane: resources and the coordinator environment, success when every worker
//! succeeds, failure, the ExitCode policy, suspend and resume.
use std::collections::BTreeMap;
use std::time::Duration;

use jax_operator::{JAXJob as Job, Jax};
use kfop_runtime::api::{ConditionStatus as S, JobConditionType as C, JobStatus};
use kfop_runtime::k8s_openapi::api::core::v1::{Event, Pod, Service};
use kfop_runtime::k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kfop_runtime::kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kfop_runtime::kube::{CustomResourceExt, ResourceExt};
use kfop_runtime::testing::Operator;
use kfop_testenv::{TestEnv, TestNamespace, pods, wait};
use serde_json::{Value, json};

const FRAMEWORK: Jax = Jax;
const KIND: &str = "JAXJob";
const CONTROLLER: &str = "jaxjob-controller";
const SPECS: &str = "jaxReplicaSpecs";
const CONTAINER: &str = "jax";
const PORT_NAME: &str = "jaxjob-port";
const JOB: &str = "test-job";

struct Fixture {
    ns: TestNamespace,
    jobs: Api<Job>,
    pods: Api<Pod>,
    services: Api<Service>,
    _operator: Operator,
}

async fn fixture(prefix: &str) -> Fixture {
    let env = TestEnv::shared().unwrap();
    env.install_crds([Job::crd()]).await.unwrap();
    let ns = env.namespace(prefix).await.unwrap();
    let operator = Operator::start(ns.client(), ns.name(), |m| m.register(FRAMEWORK));
    Fixture {
        jobs: ns.api(),
        pods: ns.api(),
        services: ns.api(),
        ns,
        _operator: operator,
    }
}

/// A replica of `n` pods running the framework's container (`extra` merged into the replica).
fn replica(n: i32, extra: Value) -> Value {
    let mut r = json!({ "replicas": n, "template": { "spec": { "containers": [
        { "name": CONTAINER, "image": "test-image" }
    ] } } });
    r.as_object_mut()
        .unwrap()
        .extend(extra.as_object().cloned().unwrap_or_default());
    r
}

/// The job `test-job` with these replica specs; `extra` is merged into its spec.
fn new_job(roles: &[(&str, Value)], extra: Value) -> Job {
    let specs: serde_json::Map<String, Value> =
        roles.iter().map(|(r, v)| ((*r).to_owned(), v.clone())).collect();
    let mut spec = json!({ SPECS: specs });
    spec.as_object_mut()
        .unwrap()
        .extend(extra.as_object().cloned().unwrap_or_default());
    let job =
        json!({ "apiVersion": "kubeflow.org/v1", "kind": KIND, "metadata": { "name": JOB }, "spec": spec });
    serde_json::from_value(job).unwrap()
}

impl Fixture {
    async fn create(&self, job: Job) -> Job {
        self.jobs.create(&PostParams::default(), &job).await.unwrap()
    }

    async fn wait_status(&self, what: &str, ok: impl Fn(&JobStatus) -> bool) -> JobStatus {
        let got = wait::until(what, wait::default_timeout(), || async {
            let s = self.jobs.get(JOB).await.unwrap().status.unwrap_or_default();
            Ok(ok(&s).then_some(s))
        })
        .await;
        match got {
            Ok(status) => status,
            Err(e) => panic!("{e}: {:#?}", self.jobs.get(JOB).await.unwrap().status),
        }
    }

    async fn condition(&self, type_: C) -> JobStatus {
        self.wait_status(&format!("{type_:?}"), |s| s.is(type_)).await
    }

    /// Waits until exactly the pods `names` exist, all in `phase`.
    async fn wait_pods(&self, names: &[&str], phase: &str) -> BTreeMap<String, Pod> {
        wait::until(
            &format!("pods {names:?} {phase}"),
            wait::default_timeout(),
            || async {
                let list = self.pods.list(&ListParams::default()).await.unwrap().items;
                let ok = list.len() == names.len()
                    && list
                        .iter()
                        .all(|p| names.contains(&p.name_any().as_str()) && pods::phase(p) == phase);
                Ok(ok.then(|| list.into_iter().map(|p| (p.name_any(), p)).collect()))
            },
        )
        .await
        .unwrap()
    }

    /// Waits until exactly the services `names` exist.
    async fn wait_services(&self, names: &[&str]) -> BTreeMap<String, Service> {
        wait::until(
            &format!("services {names:?}"),
            wait::default_timeout(),
            || async {
                let list = self.services.list(&ListParams::default()).await.unwrap().items;
                let ok =
                    list.len() == names.len() && list.iter().all(|s| names.contains(&s.name_any().as_str()));
                Ok(ok.then(|| list.into_iter().map(|s| (s.name_any(), s)).collect()))
            },
        )
        .await
        .unwrap()
    }

    async fn patch_spec(&self, patch: Value) {
        let patch = Patch::Merge(json!({ "spec": patch }));
        self.jobs
            .patch(JOB, &PatchParams::default(), &patch)
            .await
            .unwrap();
    }

    async fn event(&self, reason: &str) -> Event {
        let events: Api<Event> = self.ns.api();
        wait::until(&format!("event {reason}"), wait::default_timeout(), || async {
            let list = events.list(&ListParams::default()).await.unwrap().items;
            Ok(list.into_iter().find(|e| e.reason.as_deref() == Some(reason)))
        })
        .await
        .unwrap()
    }

    /// Makes pod `name` exit with `code` and waits for a new pod under that name, which a
    /// node selector no node matches keeps Pending (so the job's Restarting stays observable).
    async fn fail_and_replace(&self, role: &str, name: &str, code: i32) -> Pod {
        let old = self.pods.get(name).await.unwrap().uid();
        let hold = json!({ "kfop.dev/pool": format!("none-{}", self.ns.name()) });
        let template = json!({ "template": { "spec": { "nodeSelector": hold } } });
        self.patch_spec(json!({ SPECS: { role: template } })).await;
        pods::finish(&self.pods, name, code, 0).await.unwrap();
        wait::until(&format!("{name} replaced"), wait::default_timeout(), || async {
            let pod = self.pods.get_opt(name).await.unwrap();
            Ok(pod.filter(|p| p.uid() != old))
        })
        .await
        .unwrap()
    }
}

type Cond = (C, S, String, String);

fn conditions(status: &JobStatus) -> Vec<Cond> {
    let c = status.conditions.iter();
    c.map(|c| (c.type_, c.status, c.reason.clone(), c.message.clone()))
        .collect()
}

/// A condition with reason `<Kind><reason>`.
fn cond(type_: C, status: S, reason: &str, message: &str) -> Cond {
    (type_, status, format!("{KIND}{reason}"), message.to_owned())
}

/// The first container's environment; a fieldRef reads as `<fieldPath>`.
fn env(pod: &Pod) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for e in pod.spec.as_ref().unwrap().containers[0].env.iter().flatten() {
        let field = || {
            format!(
                "<{}>",
                e.value_from
                    .as_ref()
                    .unwrap()
                    .field_ref
                    .as_ref()
                    .unwrap()
                    .field_path
            )
        };
        let value = e.value.clone().unwrap_or_else(field);
        assert!(
            map.insert(e.name.clone(), value).is_none(),
            "{} set twice",
            e.name
        );
    }
    map
}

fn strings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn owner(job: &Job) -> Option<Vec<OwnerReference>> {
    Some(vec![OwnerReference {
        api_version: "kubeflow.org/v1".into(),
        kind: KIND.into(),
        name: JOB.into(),
        uid: job.uid().unwrap(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }])
}

/// Kubeflow's labels of replica `index` of `role` (lower-case); `job-role` only on the master pod.
fn labels(role: &str, index: i32, master: bool) -> BTreeMap<String, String> {
    let index = index.to_string();
    let mut l = strings(&[
        ("training.kubeflow.org/operator-name", CONTROLLER),
        ("training.kubeflow.org/job-name", JOB),
        ("training.kubeflow.org/replica-type", role),
        ("training.kubeflow.org/replica-index", index.as_str()),
    ]);
    if master {
        l.insert("training.kubeflow.org/job-role".into(), "master".into());
    }
    l
}

/// Pods and services `<job>-<role>-<i>` with Kubeflow's labels, ownerRefs and service port;
/// `master` names the pod labelled `job-role=master`.
async fn check_resources(
    f: &Fixture,
    job: &Job,
    names: &[&str],
    master: &str,
    port: i32,
) -> BTreeMap<String, Pod> {
    let pods = f.wait_pods(names, "Running").await;
    let services = f.wait_services(names).await;
    for name in names {
        let (role, index) = name.strip_prefix("test-job-").unwrap().rsplit_once('-').unwrap();
        let index: i32 = index.parse().unwrap();
        let pod = &pods[*name];
        assert_eq!(pod.labels(), &labels(role, index, *name == master), "{name}");
        assert_eq!(pod.metadata.owner_references, owner(job), "{name}");
        let svc = &services[*name];
        assert_eq!(svc.labels(), &labels(role, index, false), "service {name}");
        assert_eq!(svc.metadata.owner_references, owner(job), "service {name}");
        let spec = svc.spec.clone().unwrap();
        assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
        assert_eq!(
            spec.selector.unwrap(),
            labels(role, index, false),
            "service {name}"
        );
        let svc_port = &spec.ports.unwrap()[0];
        assert_eq!(
            (svc_port.name.as_deref(), svc_port.port),
            (Some(PORT_NAME), port),
            "{name}"
        );
    }
    pods
}

/// §3.2 case 4: Running, then suspended (pods and services deleted, startTime kept), then
/// resumed (new pods, startTime reset). `running` is Kubeflow's Running message, when the
/// reference documents it.
async fn suspend_then_resume(f: &Fixture, names: &[&str], running: Option<&str>) {
    let before = f.wait_pods(names, "Running").await;
    let created = cond(
        C::Created,
        S::True,
        "Created",
        &format!("{KIND} {JOB} is created."),
    );
    let status = f.condition(C::Running).await;
    let message = status.condition(C::Running).unwrap().message.clone();
    let running = cond(C::Running, S::True, "Running", running.unwrap_or(&message));
    assert_eq!(conditions(&status), [created.clone(), running.clone()]);
    let started = status.start_time.clone().unwrap();

    f.patch_spec(json!({ "runPolicy": { "suspend": true } })).await;
    let suspended = format!("{KIND} {JOB} is suspended.");
    let status = f.condition(C::Suspended).await;
    f.wait_pods(&[], "").await;
    f.wait_services(&[]).await;
    assert_eq!(
        conditions(&status),
        [
            created.clone(),
            cond(C::Running, S::False, "Suspended", &suspended),
            cond(C::Suspended, S::True, "Suspended", &suspended),
        ]
    );
    assert!(
        status.replica_statuses.values().all(|r| r.active == 0),
        "{status:?}"
    );
    assert_eq!(
        status.start_time.as_ref(),
        Some(&started),
        "startTime kept on suspend"
    );
    // startTime has second precision: let a second pass so that a reset shows.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(
        f.pods
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    f.patch_spec(json!({ "runPolicy": { "suspend": false } })).await;
    let after = f.wait_pods(names, "Running").await;
    f.wait_services(names).await;
    for name in names {
        assert_ne!(after[*name].uid(), before[*name].uid(), "{name} recreated");
    }
    let status = f.condition(C::Running).await;
    let resumed = format!("{KIND} {JOB} is resumed.");
    assert_eq!(
        conditions(&status),
        [
            created,
            cond(C::Suspended, S::False, "Resumed", &resumed),
            running
        ]
    );
    assert_ne!(
        status.start_time.as_ref(),
        Some(&started),
        "startTime reset on resume"
    );
}

const W2: [&str; 2] = ["test-job-worker-0", "test-job-worker-1"];

fn workers(n: i32, extra: Value) -> Job {
    new_job(&[("Worker", replica(n, extra))], json!({}))
}

/// 2 Workers on the default port 6666: names, labels, owners, service port and the
/// coordinator variables. Kubeflow's JAX `IsMasterRole` is `index == 0`, so worker 0 carries
/// `job-role=master`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_and_env() {
    let f = fixture("jax-resources").await;
    let job = f.create(workers(2, json!({}))).await;
    let pods = check_resources(&f, &job, &W2, "test-job-worker-0", 6666).await;
    check_env(&pods);
}

fn check_env(pods: &BTreeMap<String, Pod>) {
    for (name, id) in [("test-job-worker-0", "0"), ("test-job-worker-1", "1")] {
        let expected = strings(&[
            ("PYTHONUNBUFFERED", "1"),
            ("COORDINATOR_PORT", "6666"),
            ("COORDINATOR_ADDRESS", "test-job-worker-0"),
            ("NUM_PROCESSES", "2"),
            ("PROCESS_ID", id),
        ]);
        assert_eq!(env(&pods[name]), expected, "{name}");
    }
}

/// Every worker Succeeded succeeds the job; one is not enough.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_workers_succeed_the_job() {
    let f = fixture("jax-success").await;
    f.create(workers(2, json!({}))).await;
    f.wait_pods(&W2, "Running").await;
    f.condition(C::Running).await;
    pods::finish(&f.pods, "test-job-worker-0", 0, 0).await.unwrap();
    let one = |s: &JobStatus| s.replica_statuses.get("Worker").is_some_and(|w| w.succeeded == 1);
    let status = f.wait_status("worker 0 counted", one).await;
    assert!(
        !status.is(C::Succeeded) && status.is(C::Running),
        "{:?}",
        conditions(&status)
    );
    pods::finish(&f.pods, "test-job-worker-1", 0, 0).await.unwrap();
    let done = |s: &JobStatus| s.is(C::Succeeded) && s.replica_statuses["Worker"].succeeded == 2;
    let status = f.wait_status("Succeeded, workers counted", done).await;
    assert_eq!(status.condition(C::Succeeded).unwrap().reason, "JAXJobSucceeded");
    assert_eq!(status.condition(C::Running).unwrap().status, S::False);
}

/// A Worker exiting 1 under the default policy (Never) fails the job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_failure_fails_the_job() {
    let f = fixture("jax-fail").await;
    f.create(workers(2, json!({}))).await;
    let pods = f.wait_pods(&W2, "Running").await;
    let policy = pods["test-job-worker-1"].spec.clone().unwrap().restart_policy;
    assert_eq!(policy.as_deref(), Some("Never"));
    pods::finish(&f.pods, "test-job-worker-1", 1, 0).await.unwrap();
    let status = f.condition(C::Failed).await;
    let message = "JAXJob test-job is failed because 1 Worker replica(s) failed.";
    assert_eq!(
        conditions(&status).last(),
        Some(&cond(C::Failed, S::True, "Failed", message))
    );
    assert_eq!(status.replica_statuses["Worker"].failed, 1);
}

/// ExitCode policy with exit code 137: the pod is replaced and the job is Restarting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_code_137_replaces_the_pod() {
    let f = fixture("jax-restart").await;
    f.create(workers(1, json!({ "restartPolicy": "ExitCode" }))).await;
    let pods = f.wait_pods(&W2[..1], "Running").await;
    let policy = pods["test-job-worker-0"].spec.clone().unwrap().restart_policy;
    assert_eq!(policy.as_deref(), Some("Never"));
    f.fail_and_replace("Worker", "test-job-worker-0", 137).await;
    let status = f.condition(C::Restarting).await;
    assert_eq!(
        status.condition(C::Restarting).unwrap().reason,
        "JAXJobRestarting"
    );
    assert!(
        !status.is(C::Failed) && !status.is(C::Running),
        "{:?}",
        conditions(&status)
    );
    assert_eq!(
        f.event("JAXJobRestarting").await.type_.as_deref(),
        Some("Warning")
    );
}

/// §3.2 case 4 for JAX.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_and_resume() {
    let f = fixture("jax-suspend").await;
    f.create(workers(2, json!({}))).await;
    suspend_then_resume(&f, &W2, None).await;
}
