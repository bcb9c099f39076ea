#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! kfop under Kueue's MultiKueue, on two real planes: a manager and a worker (both lean), each
//! with Kueue v0.17.0 (built from its Go module) and the all-in-one binary (its conversion
//! webhook on, so MPIJob `v1` is served). MultiKueue is set up as Kueue documents it: on the
//! worker a ClusterQueue and a LocalQueue for the namespace; on the manager the worker's
//! kubeconfig in a Secret of Kueue's namespace, a MultiKueueCluster reading it, a
//! MultiKueueConfig naming it, an AdmissionCheck of controller `kueue.x-k8s.io/multikueue`, and a
//! ClusterQueue using that check with its LocalQueue.
//!
//! Every Kubeflow kind Kueue v0.17.0 has a MultiKueue adapter for (its
//! `pkg/controller/jobs/kubeflow/jobs/*/…_multikueue_adapter.go` and
//! `pkg/controller/jobs/mpijob/mpijob_multikueue_adapter.go`: PyTorchJob, TFJob, XGBoostJob,
//! PaddleJob, JAXJob, MPIJob `v2beta1`) is submitted on the manager, where Kueue's webhook sets
//! `managedBy: kueue.x-k8s.io/multikueue` and kfop leaves it alone. Each kind shows: a job that
//! succeeds runs on the worker and ends Succeeded on both (its status mirrored); one whose pods
//! fail ends Failed on both; one stopped the way Kueue documents (its Workload's `spec.active`)
//! leaves the worker and is suspended on the manager; one deleted on the manager is removed with
//! its pods from the worker. An MPIJob created as `v1` runs too; a JAXJob does not (Kueue's own
//! webhook refuses the worker's copy). Then a burst of jobs measures dispatch and
//! status-mirroring latency; an ignored test adds the lost worker.
mod common;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kfop_operator::samples;
use kfop_operator::schemes::{self, Scheme};
use kfop_runtime::k8s_openapi::ByteString;
use kfop_runtime::k8s_openapi::api::core::v1::{Pod, Secret};
use kfop_runtime::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kfop_runtime::kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kfop_runtime::kube::runtime::{WatchStreamExt, watcher};
use kfop_runtime::kube::{Client, ResourceExt};
use kfop_runtime::serde_json::{Value, json};
use kfop_testenv::peer::{KUEUE_KUBEFLOW_KINDS, KUEUE_V0_17_0, OperatorProcess};
use kfop_testenv::{
    ControlPlane, Peer, PeerOptions, PlaneOptions, ensure_namespace, install_crds, pods, wait,
};

use common::{LOCAL_QUEUE, QUEUE_LABEL, free_addr, kueue_resource, object, queues, workload};

/// The namespace of the jobs, the same on both planes (MultiKueue creates the worker's copy in
/// the namespace of the manager's job).
const NS: &str = "team-a";
/// Kueue's own namespace: the worker's kubeconfig Secret goes there.
const KUEUE_NS: &str = "kueue-system";
const MULTIKUEUE: &str = "kueue.x-k8s.io/multikueue";
/// The MultiKueueCluster, its Secret, and the MultiKueueConfig and AdmissionCheck.
const WORKER: &str = "worker";
const WORKER_SECRET: &str = "worker-kubeconfig";
const CHECK: &str = "multikueue";
/// Quota of each ClusterQueue: every job of the test fits at once.
const CPUS: usize = 1000;
const JOB_NAME_LABEL: &str = "training.kubeflow.org/job-name";
/// The API an MPIJob was created in, as kfop's conversion records it.
const CREATED_AS: &str = "kfop.dev/created-as";
/// Jobs in the latency burst.
const BURST: usize = 50;
/// How long the pods of a job that succeeds run.
const QUICK: Duration = Duration::from_secs(1);
/// ... and those of the burst: long enough for their Running state to be copied to the manager.
const BURST_RUN: Duration = Duration::from_secs(3);
/// Waits that span several controllers on two planes of a loaded machine.
const LONG: Duration = Duration::from_secs(180);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Side {
    Manager,
    Worker,
}

/// One plane with Kueue and kfop on it. Fields drop in order: the plane goes last.
struct Cluster {
    client: Client,
    _kueue: Peer,
    _operator: OperatorProcess,
    plane: ControlPlane,
}

fn lean() -> PlaneOptions {
    // No endpoints controllers: kwok pods serve no traffic.
    PlaneOptions {
        service_work: false,
        ..PlaneOptions::default()
    }
}

/// Every kind kfop serves that Kueue v0.17.0 has a MultiKueue adapter for.
fn kinds() -> Vec<Scheme> {
    KUEUE_KUBEFLOW_KINDS
        .iter()
        .map(|kind| *schemes::parse(&[(*kind).to_owned()]).unwrap().first().unwrap())
        .collect()
}

/// Those of [`kinds`] Kueue v0.17.0 actually runs on a worker: its webhook there refuses a
/// JAXJob carrying the `kueue.x-k8s.io/prebuilt-workload-name` label MultiKueue puts on every
/// copy (JAXJob is missing from `supportedPrebuiltWlJobGVKs` in its
/// `pkg/controller/jobframework/validation.go`, though it has an adapter).
fn dispatched_kinds() -> Vec<Scheme> {
    kinds().into_iter().filter(|s| *s != Scheme::JaxJob).collect()
}

/// kfop's CRDs, Kueue and the all-in-one binary (its conversion webhook at a loopback URL) on
/// `plane`, both watching [`NS`]; Kueue's configuration gets `kueue_config`.
async fn start_cluster(plane: ControlPlane, kueue_config: Value) -> Cluster {
    let client = plane.client().await.unwrap();
    let all = schemes::parse(&[]).unwrap();
    install_crds(&client, kfop_operator::crds::all(&all))
        .await
        .unwrap();
    ensure_namespace(&client, NS).await.unwrap();
    let kfop = async {
        let (metrics, webhook) = (free_addr(), free_addr());
        let args = vec![
            format!("--namespace={NS}"),
            format!("--metrics-bind-address={metrics}"),
            format!("--webhook-bind-address={webhook}"),
            format!("--webhook-url=https://{webhook}"),
            format!("--webhook-namespace={NS}"),
        ];
        common::start_operator_on(
            plane.kubeconfig(),
            &args,
            metrics,
            &[("RUST_LOG", "info".to_owned())],
        )
        .await
    };
    // `KFOP_KUEUE_PEER=kueue-v0.19.2` runs both planes on Kueue v0.19.2 (its Kubeflow
    // integrations listed, as here).
    let peer = std::env::var("KFOP_KUEUE_PEER").unwrap_or_else(|_| KUEUE_V0_17_0.to_owned());
    let options = PeerOptions {
        peer,
        operator_namespace: KUEUE_NS.to_owned(),
        kueue_config,
        ..PeerOptions::default()
    };
    let kueue = Peer::start(plane.kubeconfig(), NS, options);
    let (operator, kueue) = tokio::join!(kfop, kueue);
    Cluster {
        client,
        _kueue: kueue.unwrap(),
        _operator: operator,
        plane,
    }
}

fn kueue_api(client: &Client, kind: &str, plural: &str) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &kueue_resource(kind, plural))
}

/// Waits until the cluster-scoped Kueue object has condition `type_` True; fails with its status.
async fn until_true(api: &Api<DynamicObject>, name: &str, type_: &str) {
    let reached = wait::until(&format!("{name} {type_}"), LONG, || async {
        let object = api.get(name).await.ok();
        Ok(object
            .filter(|o| has_condition(&o.data["status"], type_))
            .map(|_| ()))
    })
    .await;
    if let Err(error) = reached {
        let object = api.get(name).await.unwrap();
        panic!("{error}; its status: {}", object.data["status"]);
    }
}

fn has_condition(status: &Value, type_: &str) -> bool {
    status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == type_ && c["status"] == "True")
}

/// The manager and the worker, MultiKueue connected: the worker's queues, then on the manager
/// the Secret, MultiKueueCluster, MultiKueueConfig, AdmissionCheck and queues, all Active.
async fn topology(manager_config: Value) -> (Cluster, Cluster) {
    let (manager, worker) = tokio::join!(ControlPlane::start(lean()), ControlPlane::start(lean()));
    let (manager, worker) = tokio::join!(
        start_cluster(manager.unwrap(), manager_config),
        start_cluster(worker.unwrap(), Value::Null)
    );
    queues(&worker.client, NS, CPUS, None).await;

    let kubeconfig = worker.plane.self_contained_kubeconfig().unwrap();
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(WORKER_SECRET.to_owned()),
            ..Default::default()
        },
        data: Some([("kubeconfig".to_owned(), ByteString(kubeconfig.into_bytes()))].into()),
        ..Secret::default()
    };
    let pp = PostParams::default();
    Api::<Secret>::namespaced(manager.client.clone(), KUEUE_NS)
        .create(&pp, &secret)
        .await
        .unwrap();
    let clusters = kueue_api(&manager.client, "MultiKueueCluster", "multikueueclusters");
    clusters
        .create(&pp, &object(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster",
            "metadata": { "name": WORKER },
            "spec": { "clusterSource": { "kubeConfig": { "locationType": "Secret", "location": WORKER_SECRET } } },
        })))
        .await
        .unwrap();
    kueue_api(&manager.client, "MultiKueueConfig", "multikueueconfigs")
        .create(
            &pp,
            &object(json!({
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueConfig",
                "metadata": { "name": CHECK },
                "spec": { "clusters": [WORKER] },
            })),
        )
        .await
        .unwrap();
    let checks = kueue_api(&manager.client, "AdmissionCheck", "admissionchecks");
    checks
        .create(
            &pp,
            &object(json!({
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
                "metadata": { "name": CHECK },
                "spec": {
                    "controllerName": MULTIKUEUE,
                    "parameters": { "apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": CHECK },
                },
            })),
        )
        .await
        .unwrap();
    until_true(&clusters, WORKER, "Active").await;
    until_true(&checks, CHECK, "Active").await;
    queues(&manager.client, NS, CPUS, Some(CHECK)).await;
    (manager, worker)
}

/// How a job's pods end: kwok ends them with exit code 0 a second after they run, or with 1 as
/// soon as they run, or they run until something stops them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Succeed(Duration),
    Fail,
    Run,
}

/// `scheme`'s sample as a queued job named `name`: one pod per role, none restarted, each
/// requesting a tenth of a CPU (the ClusterQueues cover CPU only), ending as `end` says.
fn job(scheme: Scheme, name: &str, end: End) -> DynamicObject {
    let (_, mut job) = samples::sample(scheme).unwrap();
    job.metadata.name = Some(name.to_owned());
    job.metadata.labels = Some([(QUEUE_LABEL.to_owned(), LOCAL_QUEUE.to_owned())].into());
    let annotations = match end {
        End::Succeed(after) => {
            let (key, value) = pods::complete_after(after);
            json!({ key: value })
        }
        End::Fail => json!({ pods::EXIT_CODE_ANNOTATION: "1" }),
        End::Run => json!({}),
    };
    for spec in samples::replica_specs_mut(&mut job).unwrap().values_mut() {
        spec["replicas"] = json!(1);
        spec["restartPolicy"] = json!("Never");
        spec["template"]["metadata"]["annotations"] = annotations.clone();
        for container in spec["template"]["spec"]["containers"].as_array_mut().unwrap() {
            container["resources"] = json!({ "requests": { "cpu": "100m" } });
        }
    }
    if end == End::Fail {
        job.data["spec"]["runPolicy"]["backoffLimit"] = json!(0);
    }
    job
}

/// The pods of a job built by [`job`]: one per role.
fn pods_per_job(scheme: Scheme) -> usize {
    let (_, mut sample) = samples::sample(scheme).unwrap();
    samples::replica_specs_mut(&mut sample).unwrap().len()
}

fn jobs(client: &Client, scheme: Scheme) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), NS, &samples::api_resource(scheme))
}

fn mpijob_v1(client: &Client) -> Api<DynamicObject> {
    let resource = ApiResource {
        version: "v1".into(),
        api_version: "kubeflow.org/v1".into(),
        ..samples::api_resource(Scheme::MpiJob)
    };
    Api::namespaced_with(client.clone(), NS, &resource)
}

/// Creates the job on the manager: Kueue's webhook must have suspended it and handed it to
/// MultiKueue in the create itself (kfop then leaves it alone there).
async fn submit(api: &Api<DynamicObject>, job: &DynamicObject) -> Instant {
    let submitted = Instant::now();
    let created = api.create(&PostParams::default(), job).await.unwrap();
    let run_policy = &created.data["spec"]["runPolicy"];
    assert_eq!(
        run_policy["managedBy"],
        MULTIKUEUE,
        "{}: {run_policy}",
        created.name_any()
    );
    assert_eq!(
        run_policy["suspend"],
        true,
        "{}: {run_policy}",
        created.name_any()
    );
    submitted
}

/// What the watches saw of a job on one side.
#[derive(Debug, Default)]
struct JobSeen {
    /// Each incarnation (a job dispatched again is a new object on the worker).
    uids: Vec<String>,
    /// When each condition was first seen True.
    conditions: HashMap<String, Instant>,
    /// Its last status (a deleted job's: the one it had when deleted).
    status: Value,
    annotations: std::collections::BTreeMap<String, String>,
}

#[derive(Debug)]
struct PodSeen {
    side: Side,
    job: String,
    created: Instant,
    running: Option<Instant>,
}

#[derive(Debug, Default)]
struct Seen {
    jobs: HashMap<(Side, String), JobSeen>,
    pods: HashMap<String, PodSeen>,
}

/// Watches of jobs and pods on both planes, recording when each thing was first seen: the
/// worker's copy of a job is deleted right after it finishes, so its last states are caught
/// here rather than by polling.
struct Recorder {
    seen: Arc<Mutex<Seen>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Recorder {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Recorder {
    fn start(manager: &Client, worker: &Client) -> Self {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let mut tasks = Vec::new();
        for (side, client) in [(Side::Manager, manager), (Side::Worker, worker)] {
            for scheme in kinds() {
                let seen = seen.clone();
                let api = jobs(client, scheme);
                tasks.push(tokio::spawn(async move {
                    let mut events = watcher(api, watcher::Config::default()).default_backoff().boxed();
                    while let Some(event) = events.next().await {
                        // A deletion carries the job's last state: the worker's copy is
                        // deleted right after it finishes.
                        if let Ok(
                            watcher::Event::Apply(job)
                            | watcher::Event::InitApply(job)
                            | watcher::Event::Delete(job),
                        ) = event
                        {
                            record_job(&seen, side, &job);
                        }
                    }
                }));
            }
            let seen = seen.clone();
            let api: Api<Pod> = Api::namespaced(client.clone(), NS);
            let config = watcher::Config::default().labels(JOB_NAME_LABEL);
            tasks.push(tokio::spawn(async move {
                let mut events = watcher(api, config).default_backoff().boxed();
                while let Some(event) = events.next().await {
                    if let Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) = event {
                        record_pod(&seen, side, &pod);
                    }
                }
            }));
        }
        Self { seen, tasks }
    }

    fn read<T>(&self, f: impl FnOnce(&Seen) -> T) -> T {
        f(&self.seen.lock().unwrap())
    }

    /// Waits until `f` finds something in what was seen.
    async fn until<T>(&self, what: &str, f: impl Fn(&Seen) -> Option<T>) -> T {
        let found = wait::until(what, LONG, || {
            let found = self.read(&f);
            async move { Ok(found) }
        })
        .await;
        found.unwrap_or_else(|error| {
            let jobs: Vec<_> = self.read(|s| {
                let mut jobs: Vec<_> = s
                    .jobs
                    .iter()
                    .map(|(k, v)| format!("{k:?}: {}", v.status))
                    .collect();
                jobs.sort();
                jobs
            });
            panic!("{error}; jobs seen: {jobs:#?}")
        })
    }
}

fn record_job(seen: &Mutex<Seen>, side: Side, job: &DynamicObject) {
    let now = Instant::now();
    let mut seen = seen.lock().unwrap();
    let entry = seen.jobs.entry((side, job.name_any())).or_default();
    let uid = job.uid().unwrap_or_default();
    if !entry.uids.contains(&uid) {
        entry.uids.push(uid);
    }
    let status = job.data.get("status").cloned().unwrap_or(Value::Null);
    for condition in status["conditions"].as_array().into_iter().flatten() {
        if condition["status"] == "True"
            && let Some(type_) = condition["type"].as_str()
        {
            entry.conditions.entry(type_.to_owned()).or_insert(now);
        }
    }
    entry.status = status;
    entry.annotations = job.annotations().clone();
}

fn record_pod(seen: &Mutex<Seen>, side: Side, pod: &Pod) {
    let now = Instant::now();
    let mut seen = seen.lock().unwrap();
    let entry = seen
        .pods
        .entry(pod.uid().unwrap_or_default())
        .or_insert_with(|| PodSeen {
            side,
            job: pod.labels().get(JOB_NAME_LABEL).cloned().unwrap_or_default(),
            created: now,
            running: None,
        });
    if entry.running.is_none() && pods::phase(pod) == "Running" {
        entry.running = Some(now);
    }
}

impl Seen {
    fn job(&self, side: Side, name: &str) -> Option<&JobSeen> {
        self.jobs.get(&(side, name.to_owned()))
    }

    fn condition(&self, side: Side, name: &str, type_: &str) -> Option<Instant> {
        self.job(side, name)?.conditions.get(type_).copied()
    }

    /// When the `count`-th pod of the job was first seen on `side`, and when it ran.
    fn pods(&self, side: Side, job: &str, count: usize) -> Option<(Instant, Option<Instant>)> {
        let mine: Vec<&PodSeen> = self
            .pods
            .values()
            .filter(|p| p.side == side && p.job == job)
            .collect();
        if mine.len() < count {
            return None;
        }
        let created = mine.iter().map(|p| p.created).max()?;
        let running = mine.iter().map(|p| p.running).collect::<Option<Vec<_>>>();
        Some((created, running.and_then(|r| r.into_iter().max())))
    }

    fn pods_on(&self, side: Side) -> usize {
        self.pods.values().filter(|p| p.side == side).count()
    }
}

/// The job's `(type, status)` conditions.
fn conditions(status: &Value) -> BTreeSet<(String, String)> {
    status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let text = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
            (text("type"), text("status"))
        })
        .collect()
}

/// Polls the job on `api` until `check` holds for it (`None` when it is gone).
async fn until_job(
    api: &Api<DynamicObject>,
    name: &str,
    what: &str,
    check: impl Fn(Option<&DynamicObject>) -> bool,
) {
    let reached = wait::until(&format!("{name}: {what}"), LONG, || async {
        // A failed read is retried, not taken for a missing job.
        let Ok(job) = api.get_opt(name).await else {
            return Ok(None);
        };
        Ok(check(job.as_ref()).then_some(()))
    })
    .await;
    if let Err(error) = reached {
        let job = api.get_opt(name).await.unwrap();
        panic!("{error}; the job: {:?}", job.map(|j| j.data));
    }
}

/// The job's pods on the plane of `client`, now.
async fn pods_of(client: &Client, job: &str) -> Vec<Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), NS);
    let selector = ListParams::default().labels(&format!("{JOB_NAME_LABEL}={job}"));
    api.list(&selector).await.unwrap().items
}

/// Waits until the worker has neither the job nor any of its pods.
async fn until_gone_from_worker(worker: &Client, api: &Api<DynamicObject>, name: &str) {
    until_job(api, name, "gone from the worker", |j| j.is_none()).await;
    wait::until(&format!("{name}'s pods gone from the worker"), LONG, || async {
        Ok(pods_of(worker, name).await.is_empty().then_some(()))
    })
    .await
    .unwrap();
}

/// A job that ends on the worker: it ends there as `end` says (seen by the watch, as Kueue
/// deletes the worker's copy once it has finished), the manager's copy ends the same with the
/// worker's conditions, its Workload is Finished and the worker keeps nothing of it.
async fn ends_on_both(
    manager: &Cluster,
    worker: &Cluster,
    recorder: &Recorder,
    api: (Api<DynamicObject>, Api<DynamicObject>),
    name: &str,
    end: &str,
) {
    let (on_manager, on_worker) = api;
    recorder
        .until(&format!("{name} {end} on the worker"), |s| {
            s.condition(Side::Worker, name, end)
        })
        .await;
    until_job(&on_manager, name, &format!("{end} on the manager"), |j| {
        j.is_some_and(|j| has_condition(&j.data["status"], end))
    })
    .await;
    workload(&manager.client, NS, name, Some(("Finished", true))).await;
    until_gone_from_worker(&worker.client, &on_worker, name).await;
    let mirrored = on_manager.get(name).await.unwrap().data["status"].clone();
    let last_on_worker = recorder.read(|s| s.job(Side::Worker, name).unwrap().status.clone());
    assert_eq!(
        conditions(&mirrored),
        conditions(&last_on_worker),
        "{name}: the manager's status is not the worker's: {mirrored} vs {last_on_worker}"
    );
}

/// Sets `spec.active` of the job's Workload on the manager: Kueue's documented stop and resume.
async fn set_active(manager: &Client, job: &str, active: bool) {
    let found = workload(manager, NS, job, None).await;
    let name = found["metadata"]["name"].as_str().unwrap();
    let api: Api<DynamicObject> =
        Api::namespaced_with(manager.clone(), NS, &kueue_resource("Workload", "workloads"));
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "active": active } })),
    )
    .await
    .unwrap();
}

/// Waits until the job runs on the worker as an object other than `not`: its pods all Running.
/// Returns its uid there.
async fn runs_on_worker(
    worker: &Client,
    api: &Api<DynamicObject>,
    name: &str,
    pods: usize,
    not: Option<&str>,
) -> String {
    until_job(api, name, "on the worker", |j| {
        j.is_some_and(|j| j.uid().as_deref() != not)
    })
    .await;
    let ran = wait::until(
        &format!("{pods} running pods of {name} on the worker"),
        LONG,
        || async {
            let all = pods_of(worker, name).await;
            let running = all.len() == pods && all.iter().all(|p| pods::phase(p) == "Running");
            Ok(running.then_some(()))
        },
    )
    .await;
    if let Err(error) = ran {
        let phases: Vec<_> = pods_of(worker, name)
            .await
            .iter()
            .map(|p| (p.name_any(), pods::phase(p).to_owned()))
            .collect();
        let job = api.get_opt(name).await.unwrap().map(|j| j.data);
        panic!("{error}; its pods: {phases:?}; the job there: {job:?}");
    }
    api.get(name).await.unwrap().uid().unwrap()
}

/// Runs on the worker, is stopped through its Workload on the manager (Kueue's documented stop,
/// `spec.active: false`): its copy and pods leave the worker and the manager's job is suspended.
/// Then deleted on the manager, it is gone from both. (Resuming is not asserted: Kueue v0.17.0
/// deletes the worker's copy before copying its last status, so the manager's job can keep
/// counting active replicas and its Workload its quota; see docs/multikueue.md.)
async fn stop_then_delete(manager: &Cluster, worker: &Cluster, scheme: Scheme, name: &str) {
    let (on_manager, on_worker) = (jobs(&manager.client, scheme), jobs(&worker.client, scheme));
    runs_on_worker(&worker.client, &on_worker, name, pods_per_job(scheme), None).await;
    // Its status is mirrored while it runs.
    until_job(&on_manager, name, "Running on the manager", |j| {
        j.is_some_and(|j| has_condition(&j.data["status"], "Running"))
    })
    .await;

    set_active(&manager.client, name, false).await;
    until_gone_from_worker(&worker.client, &on_worker, name).await;
    until_job(&on_manager, name, "suspended on the manager", |j| {
        j.is_some_and(|j| j.data["spec"]["runPolicy"]["suspend"] == true)
    })
    .await;

    on_manager
        .delete(name, &DeleteParams::background())
        .await
        .unwrap();
    until_job(&on_manager, name, "gone from the manager", |j| j.is_none()).await;
    until_gone_from_worker(&worker.client, &on_worker, name).await;
}

/// Runs on the worker, then deleted on the manager: gone from both, pods and all.
async fn delete_on_manager(manager: &Cluster, worker: &Cluster, scheme: Scheme, name: &str) {
    let (on_manager, on_worker) = (jobs(&manager.client, scheme), jobs(&worker.client, scheme));
    runs_on_worker(&worker.client, &on_worker, name, pods_per_job(scheme), None).await;
    on_manager
        .delete(name, &DeleteParams::background())
        .await
        .unwrap();
    until_gone_from_worker(&worker.client, &on_worker, name).await;
    until_job(&on_manager, name, "gone from the manager", |j| j.is_none()).await;
}

/// A JAXJob MultiKueue could not copy to the worker (see [`dispatched_kinds`]): after the whole
/// test, the worker has admitted its Workload (holding quota there) but has no JAXJob, and the
/// manager's job still waits suspended, with no status.
async fn jaxjob_never_reached_the_worker(
    manager: &Cluster,
    worker: &Cluster,
    recorder: &Recorder,
    name: &str,
) {
    let on_manager = workload(&manager.client, NS, name, None).await;
    let workload_name = on_manager["metadata"]["name"].as_str().unwrap();
    let workloads = |client: &Client| -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), NS, &kueue_resource("Workload", "workloads"))
    };
    let on_worker = workloads(&worker.client).get(workload_name).await.unwrap();
    assert!(
        has_condition(&on_worker.data["status"], "Admitted"),
        "{name}: its Workload on the worker: {}",
        on_worker.data["status"]
    );
    assert!(
        recorder.read(|s| s.job(Side::Worker, name).is_none()),
        "{name} reached the worker"
    );
    let job = jobs(&manager.client, Scheme::JaxJob).get(name).await.unwrap();
    assert_eq!(
        job.data["spec"]["runPolicy"]["suspend"], true,
        "{name}: {}",
        job.data
    );
    assert!(
        conditions(&job.data["status"]).is_empty(),
        "{name}: {}",
        job.data["status"]
    );
}

/// The `q` quantile of `values` (nearest rank).
fn quantile(values: &[Duration], q: f64) -> Duration {
    let mut sorted = values.to_vec();
    sorted.sort();
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn summary(name: &str, values: &[Duration]) -> String {
    if values.is_empty() {
        return format!("{name}: none seen");
    }
    let ms = |d: Duration| d.as_millis();
    format!(
        "{name}: p50 {} ms, p99 {} ms, max {} ms (n={})",
        ms(quantile(values, 0.5)),
        ms(quantile(values, 0.99)),
        ms(quantile(values, 1.0)),
        values.len()
    )
}

/// [`BURST`] small jobs of every kind at once: dispatch latency (submitted on the manager → all
/// pods on the worker, and all Running) and status mirroring latency (a condition first seen on
/// the worker → on the manager), printed.
async fn burst(manager: &Cluster, recorder: &Recorder) -> Vec<String> {
    let kinds = dispatched_kinds();
    let submitted: Vec<(Scheme, String, Instant)> = futures::future::join_all((0..BURST).map(|i| {
        let scheme = kinds[i % kinds.len()];
        let name = format!("burst-{i}");
        async move {
            let at = submit(
                &jobs(&manager.client, scheme),
                &job(scheme, &name, End::Succeed(BURST_RUN)),
            )
            .await;
            (scheme, name, at)
        }
    }))
    .await;
    for (_, name, _) in &submitted {
        recorder
            .until(&format!("{name} Succeeded on the manager"), |s| {
                s.condition(Side::Manager, name, "Succeeded")
            })
            .await;
    }
    let (mut created, mut running, mut mirror_running, mut mirror_succeeded) =
        (vec![], vec![], vec![], vec![]);
    recorder.read(|s| {
        for (scheme, name, at) in &submitted {
            let (all_created, all_running) = s.pods(Side::Worker, name, pods_per_job(*scheme)).unwrap();
            created.push(all_created - *at);
            running.push(all_running.unwrap() - *at);
            for (type_, into) in [
                ("Running", &mut mirror_running),
                ("Succeeded", &mut mirror_succeeded),
            ] {
                // A state shorter than one mirroring round is never seen on the manager.
                if let (Some(on_worker), Some(on_manager)) = (
                    s.condition(Side::Worker, name, type_),
                    s.condition(Side::Manager, name, type_),
                ) {
                    into.push(on_manager.saturating_duration_since(on_worker));
                }
            }
        }
    });
    vec![
        summary("dispatch, submitted -> all pods created on the worker", &created),
        summary("dispatch, submitted -> all pods Running on the worker", &running),
        summary("mirroring of Running, worker -> manager", &mirror_running),
        summary("mirroring of Succeeded, worker -> manager", &mirror_succeeded),
    ]
}

#[tokio::test]
async fn kfop_runs_what_multikueue_dispatches_to_its_worker() {
    let started = Instant::now();
    let (manager, worker) = topology(Value::Null).await;
    let ready = started.elapsed();
    let recorder = Recorder::start(&manager.client, &worker.client);
    eprintln!("topology ready in {:.1} s", ready.as_secs_f64());
    let refused = "jaxjob-refused";
    submit(
        &jobs(&manager.client, Scheme::JaxJob),
        &job(Scheme::JaxJob, refused, End::Succeed(QUICK)),
    )
    .await;

    let mut behaviours = Vec::new();
    for scheme in dispatched_kinds() {
        let kind = format!("{scheme:?}").to_lowercase();
        let on_manager = jobs(&manager.client, scheme);
        let names = [
            format!("{kind}-ok"),
            format!("{kind}-fail"),
            format!("{kind}-stop"),
            format!("{kind}-delete"),
        ];
        for (name, end) in names
            .iter()
            .zip([End::Succeed(QUICK), End::Fail, End::Run, End::Run])
        {
            submit(&on_manager, &job(scheme, name, end)).await;
        }
        behaviours.push((scheme, names));
    }
    // An MPIJob created as v1: Kueue's webhooks and controller read it as v2beta1 through kfop's
    // conversion; the worker's copy, created in v2beta1, keeps the mark of its version.
    let mut v1 = job(Scheme::MpiJob, "mpijob-v1", End::Succeed(QUICK));
    v1.types.as_mut().unwrap().api_version = "kubeflow.org/v1".to_owned();
    v1.data["spec"]
        .as_object_mut()
        .unwrap()
        .remove("sshAuthMountPath");
    submit(&mpijob_v1(&manager.client), &v1).await;

    let (m, w, r) = (&manager, &worker, &recorder);
    futures::future::join_all(
        behaviours
            .iter()
            .map(|(scheme, [ok, fail, stop, delete])| async move {
                let api = || (jobs(&m.client, *scheme), jobs(&w.client, *scheme));
                tokio::join!(
                    ends_on_both(m, w, r, api(), ok, "Succeeded"),
                    ends_on_both(m, w, r, api(), fail, "Failed"),
                    stop_then_delete(m, w, *scheme, stop),
                    delete_on_manager(m, w, *scheme, delete),
                );
            }),
    )
    .await;
    ends_on_both(
        m,
        w,
        r,
        (mpijob_v1(&manager.client), jobs(&worker.client, Scheme::MpiJob)),
        "mpijob-v1",
        "Succeeded",
    )
    .await;
    let mark = recorder.read(|s| {
        s.job(Side::Worker, "mpijob-v1")
            .unwrap()
            .annotations
            .get(CREATED_AS)
            .cloned()
    });
    assert_eq!(
        mark.as_deref(),
        Some("v1"),
        "the worker's copy lost the version it was created in"
    );
    jaxjob_never_reached_the_worker(&manager, &worker, &recorder, refused).await;
    let behaviours_took = started.elapsed() - ready;
    eprintln!("behaviours in {:.1} s", behaviours_took.as_secs_f64());

    let figures = burst(&manager, &recorder).await;
    // kfop on the manager created nothing for any of them.
    assert_eq!(
        recorder.read(|s| s.pods_on(Side::Manager)),
        0,
        "pods on the manager"
    );
    let on_manager: Api<Pod> = Api::namespaced(manager.client.clone(), NS);
    assert!(
        on_manager
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    println!(
        "MultiKueue, {} kinds dispatched: planes, Kueue and kfop ready in {:.1} s; behaviours in \
         {:.1} s; {BURST}-job burst:",
        dispatched_kinds().len(),
        ready.as_secs_f64(),
        behaviours_took.as_secs_f64()
    );
    for line in figures {
        println!("  {line}");
    }
    println!("total {:.1} s", started.elapsed().as_secs_f64());
}

/// Polls the MultiKueueCluster until its `Active` condition is `active`; returns how long it
/// took and the condition's reason.
async fn until_cluster_active(manager: &Client, active: bool, timeout: Duration) -> (Duration, String) {
    let since = Instant::now();
    let clusters = kueue_api(manager, "MultiKueueCluster", "multikueueclusters");
    let wanted = if active { "True" } else { "False" };
    let reason = wait::until(
        &format!("MultiKueueCluster {WORKER} Active {wanted}"),
        timeout,
        || async {
            let cluster = clusters.get(WORKER).await.ok();
            let condition = cluster.and_then(|c| {
                c.data["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|c| c["type"] == "Active" && c["status"] == wanted)
                    .map(|c| c["reason"].as_str().unwrap_or_default().to_owned())
            });
            Ok(condition)
        },
    )
    .await
    .unwrap();
    (since.elapsed(), reason)
}

/// A job's state on the manager while its worker is away: its conditions, its Workload's
/// conditions and MultiKueue check.
async fn manager_view(manager: &Client, scheme: Scheme, name: &str) -> String {
    let job = jobs(manager, scheme).get(name).await.unwrap();
    let found = workload(manager, NS, name, None).await;
    let true_ones = |status: &Value| -> Vec<String> {
        conditions(status)
            .into_iter()
            .filter(|(_, s)| s == "True")
            .map(|(t, _)| t)
            .collect()
    };
    let check = found["status"]["admissionChecks"][0]["state"].clone();
    format!(
        "job {:?}, Workload {:?}, check {check}",
        true_ones(&job.data["status"]),
        true_ones(&found["status"])
    )
}

/// The worker's API server stops answering (frozen, as a partition looks from the manager) while
/// a job runs there, for [`LOST_FOR`]; then it comes back and the job is finished. Kueue's
/// `workerLostTimeout` is 30 s. Prints when the manager noticed, what it made of the job, and
/// how it recovered. Minutes long: run by hand (`--ignored`), figures in
/// `bench/results/multikueue/`.
#[tokio::test]
#[ignore = "minutes of waiting for Kueue to notice a lost worker; run by hand"]
async fn a_lost_worker_is_noticed_and_its_job_recovers() {
    const LOST_FOR: Duration = Duration::from_secs(120);
    let (manager, mut worker) = topology(json!({ "multiKueue": { "workerLostTimeout": "30s" } })).await;
    let (scheme, name) = (Scheme::PyTorchJob, "lost-pytorchjob");
    submit(&jobs(&manager.client, scheme), &job(scheme, name, End::Run)).await;
    runs_on_worker(
        &worker.client,
        &jobs(&worker.client, scheme),
        name,
        pods_per_job(scheme),
        None,
    )
    .await;
    until_job(
        &jobs(&manager.client, scheme),
        name,
        "Running on the manager",
        |j| j.is_some_and(|j| has_condition(&j.data["status"], "Running")),
    )
    .await;
    println!("before: {}", manager_view(&manager.client, scheme, name).await);

    worker.plane.freeze("kube-apiserver", true).unwrap();
    let lost = Instant::now();
    let (noticed, reason) = until_cluster_active(&manager.client, false, LOST_FOR).await;
    println!(
        "worker lost: MultiKueueCluster Active False ({reason}) after {:.1} s",
        noticed.as_secs_f64()
    );
    while lost.elapsed() < LOST_FOR {
        println!(
            "  {:>5.1} s: {}",
            lost.elapsed().as_secs_f64(),
            manager_view(&manager.client, scheme, name).await
        );
        tokio::time::sleep(Duration::from_secs(15)).await;
    }

    worker.plane.freeze("kube-apiserver", false).unwrap();
    let (back, _) = until_cluster_active(&manager.client, true, LONG).await;
    println!("worker back: Active True after {:.1} s", back.as_secs_f64());
    println!("after: {}", manager_view(&manager.client, scheme, name).await);
    // Whatever the manager made of it, the job ends: its pods on the worker finish and the
    // manager reports it Succeeded.
    runs_on_worker(
        &worker.client,
        &jobs(&worker.client, scheme),
        name,
        pods_per_job(scheme),
        None,
    )
    .await;
    let pod_api: Api<Pod> = Api::namespaced(worker.client.clone(), NS);
    for pod in pods_of(&worker.client, name).await {
        pods::finish(&pod_api, &pod.name_any(), 0, 0).await.unwrap();
    }
    until_job(
        &jobs(&manager.client, scheme),
        name,
        "Succeeded on the manager",
        |j| j.is_some_and(|j| has_condition(&j.data["status"], "Succeeded")),
    )
    .await;
    println!(
        "Succeeded on the manager {:.1} s after the worker came back",
        (lost.elapsed() - LOST_FOR).as_secs_f64()
    );
}
