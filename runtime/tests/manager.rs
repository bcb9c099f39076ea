#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The manager against a real control plane: served metrics and probes, events emitted once per
//! transition, and leader election handing over between two replicas.
use std::net::SocketAddr;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Pod};
use kfop_runtime::api::JobConditionType as C;
use kfop_runtime::controller::ControllerConfig;
use kfop_runtime::kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kfop_runtime::kube::{Client, CustomResourceExt};
use kfop_runtime::manager::{LeaderElection, Manager, ManagerConfig};
use kfop_runtime::testing::{TestFramework, TestJob, job, replica};
use kfop_testenv::{TestEnv, TestNamespace, pods, wait};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// A plain HTTP/1.0 GET: (status code, body).
async fn get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    let code = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Some((code, body))
}

/// The metrics served at `addr` once `holds` for them; fails with the last ones. A pass counts
/// a job after its writes, so a condition can be seen a moment before its count.
async fn metrics_when(addr: SocketAddr, what: &str, holds: impl Fn(&str) -> bool) -> String {
    let holds = &holds;
    let found = wait::until(what, wait::default_timeout(), || async move {
        Ok(get(addr, "/metrics")
            .await
            .filter(|(code, body)| *code == 200 && holds(body))
            .map(|(_, body)| body))
    })
    .await;
    match found {
        Ok(body) => body,
        Err(error) => {
            let body = get(addr, "/metrics").await.map(|(_, body)| body);
            panic!("{error}; the metrics: {body:?}");
        }
    }
}

fn config(ns: &str, metrics: Option<SocketAddr>, leader: Option<LeaderElection>) -> ManagerConfig {
    ManagerConfig {
        controller: ControllerConfig {
            namespace: Some(ns.to_owned()),
            ..ControllerConfig::default()
        },
        metrics_addr: metrics,
        leader_election: leader,
        webhook: None,
        reporter: "kfop-test".to_owned(),
    }
}

fn start(
    client: Client,
    config: ManagerConfig,
) -> (tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let manager = Manager::new(client, config).register(TestFramework::default().loaded());
    let task = tokio::spawn(async move {
        let _ = manager
            .run(async move {
                let _ = rx.await;
            })
            .await;
    });
    (tx, task)
}

async fn namespace(prefix: &str) -> TestNamespace {
    let env = TestEnv::shared().unwrap();
    env.install_crds([TestJob::crd()]).await.unwrap();
    env.namespace(prefix).await.unwrap()
}

async fn create(ns: &TestNamespace, mut j: TestJob) {
    j.metadata.namespace = Some(ns.name().to_owned());
    ns.api::<TestJob>()
        .create(&PostParams::default(), &j)
        .await
        .unwrap();
}

async fn wait_condition(ns: &TestNamespace, name: &str, type_: C) {
    let jobs: Api<TestJob> = ns.api();
    wait::until(&format!("{name} {type_:?}"), wait::default_timeout(), || async {
        let status = jobs.get(name).await.unwrap().status.unwrap_or_default();
        Ok(status.is(type_).then_some(()))
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_probes_are_served() {
    let ns = namespace("metrics").await;
    let addr = free_addr();
    let (stop, task) = start(ns.client(), config(ns.name(), Some(addr), None));
    wait::until("/readyz 200", wait::default_timeout(), || async {
        Ok(get(addr, "/readyz")
            .await
            .filter(|(code, _)| *code == 200)
            .map(|_| ()))
    })
    .await
    .unwrap();
    assert_eq!(get(addr, "/healthz").await.unwrap(), (200, "ok".to_owned()));

    create(&ns, job("", "m", &[("Worker", replica(1, None))])).await;
    let pods_api: Api<Pod> = ns.api();
    wait::until("m-worker-0 Running", wait::default_timeout(), || async {
        Ok(pods_api
            .get_opt("m-worker-0")
            .await
            .unwrap()
            .filter(|p| pods::phase(p) == "Running")
            .map(|_| ()))
    })
    .await
    .unwrap();
    pods::finish(&pods_api, "m-worker-0", 0, 0).await.unwrap();
    wait_condition(&ns, "m", C::Succeeded).await;

    let labels = format!("{{job_namespace=\"{}\",framework=\"test\"}}", ns.name());
    let wanted = [
        "training_operator_jobs_created_total",
        "training_operator_jobs_successful_total",
    ]
    .map(|metric| format!("{metric}{labels} 1"));
    let body = metrics_when(addr, "m counted created and successful", |body| {
        wanted.iter().all(|w| body.contains(w.as_str()))
    })
    .await;
    assert!(body.contains(
        "controller_runtime_reconcile_total{controller=\"testjob-controller\",result=\"success\"}"
    ));
    assert!(
        body.contains("controller_runtime_reconcile_time_seconds_count{controller=\"testjob-controller\"}")
    );
    let _ = stop.send(());
    let _ = task.await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_events_are_emitted_once_per_transition() {
    let ns = namespace("events").await;
    let (stop, task) = start(ns.client(), config(ns.name(), None, None));
    let mut j = job("", "e", &[("Worker", replica(1, None))]);
    j.spec.run_policy.suspend = Some(true);
    create(&ns, j).await;
    wait_condition(&ns, "e", C::Suspended).await;
    // Each label change is a watch event and a reconcile of the still-suspended job.
    let jobs: Api<TestJob> = ns.api();
    for i in 0..5 {
        let patch = json!({ "metadata": { "labels": { "poke": i.to_string() } } });
        jobs.patch("e", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let events: Api<Event> = ns.api();
    let suspended = wait::until("the Suspended event", wait::default_timeout(), || async {
        let list = events.list(&ListParams::default()).await.unwrap().items;
        let n = list
            .iter()
            .filter(|e| e.reason.as_deref() == Some("TestJobSuspended"))
            .count();
        Ok((n > 0).then_some(list))
    })
    .await
    .unwrap();
    let matching: Vec<_> = suspended
        .iter()
        .filter(|e| e.reason.as_deref() == Some("TestJobSuspended"))
        .collect();
    assert_eq!(matching.len(), 1, "one event object");
    assert_eq!(
        matching[0].count.unwrap_or(1),
        1,
        "emitted once, not once per reconcile"
    );
    let _ = stop.send(());
    let _ = task.await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_reconciles_and_a_standby_takes_over() {
    let ns = namespace("leader").await;
    let lease = |identity: &str| LeaderElection {
        lease_name: "kfop-test-leader".to_owned(),
        namespace: ns.name().to_owned(),
        identity: identity.to_owned(),
        // Renewal is due a third of the lease before expiry: 5 s of slack for a loaded CI
        // machine (4 s, with 1 s, let the standby take over a leader that was merely slow). The
        // hand-over below is a release, so it does not wait for expiry.
        lease_duration_secs: 15,
    };
    let (a_addr, b_addr) = (free_addr(), free_addr());
    let (stop_a, task_a) = start(ns.client(), config(ns.name(), Some(a_addr), Some(lease("a"))));
    wait::until("a leads and is ready", wait::default_timeout(), || async {
        Ok(get(a_addr, "/readyz")
            .await
            .filter(|(c, _)| *c == 200)
            .map(|_| ()))
    })
    .await
    .unwrap();
    let (stop_b, task_b) = start(ns.client(), config(ns.name(), Some(b_addr), Some(lease("b"))));
    create(&ns, job("", "l1", &[("Worker", replica(1, None))])).await;
    wait_condition(&ns, "l1", C::Created).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    // The standby is ready (a probe failing on it would stall rollouts) and reconciles nothing.
    let created = |metrics: &str| {
        metrics
            .lines()
            .any(|l| l.starts_with("training_operator_jobs_created_total{"))
    };
    let (code, _) = get(b_addr, "/readyz").await.unwrap();
    assert_eq!(code, 200, "the standby is ready while waiting for the lease");
    let (_, body) = get(b_addr, "/metrics").await.unwrap();
    assert!(!created(&body), "the standby reconciled a job:\n{body}");

    // A stops gracefully and releases the lease; B takes over and reconciles a new job.
    let _ = stop_a.send(());
    let _ = task_a.await;
    create(&ns, job("", "l2", &[("Worker", replica(1, None))])).await;
    wait_condition(&ns, "l2", C::Created).await;
    metrics_when(b_addr, "b counts l2 created", created).await;
    let _ = stop_b.send(());
    let _ = task_b.await;
}
