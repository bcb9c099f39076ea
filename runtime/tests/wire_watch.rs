#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Protobuf list+watch (`--wire-encoding protobuf`) against a real API server: it lists in pages,
//! caches pods and services exactly as the JSON watch does, follows changes across the server
//! ending the watch, and under the operator deleted pods are recreated and jobs succeed.
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, Service};
use kfop_runtime::api::JobConditionType as C;
use kfop_runtime::compact::{CachedPod, CachedService};
use kfop_runtime::kube::api::{Api, DeleteParams, ListParams, PostParams};
use kfop_runtime::kube::runtime::watcher::{self, Event};
use kfop_runtime::kube::{CustomResourceExt, ResourceExt};
use kfop_runtime::testing::{Operator, TestFramework, TestJob, job, replica};
use kfop_runtime::wire::watch::{Watched, protobuf_watcher};
use kfop_runtime::wire::{self, Encoding};
use kfop_runtime::{ObservedPod, ObservedService};
use kfop_testenv::{TestEnv, TestNamespace, pods, wait};
use serde_json::json;
use tokio::sync::mpsc;

const LABEL: &str = "wire-watch=yes";

async fn create_pod(ns: &TestNamespace, name: &str) {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"wire-watch": "yes"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}))
    .unwrap();
    ns.api::<Pod>()
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
}

/// The watch's events, as they come, from a task that keeps polling it.
fn follow<K: Watched>(api: Api<K>, config: watcher::Config) -> mpsc::UnboundedReceiver<Event<K>> {
    let (tx, rx) = mpsc::unbounded_channel();
    let mut stream = Box::pin(protobuf_watcher(api, config));
    tokio::spawn(async move {
        while let Some(event) = stream.next().await {
            if tx.send(event.expect("no watch errors")).is_err() {
                return;
            }
        }
    });
    rx
}

async fn next<K>(events: &mut mpsc::UnboundedReceiver<Event<K>>) -> Event<K> {
    tokio::time::timeout(wait::default_timeout(), events.recv())
        .await
        .expect("an event in time")
        .expect("the watch goes on")
}

/// The objects of the initial list, which must come in `pages` pages of one.
async fn initial<K: ResourceExt>(events: &mut mpsc::UnboundedReceiver<Event<K>>, count: usize) -> Vec<K> {
    assert!(matches!(next(events).await, Event::Init));
    let mut listed = Vec::new();
    for _ in 0..count {
        match next(events).await {
            Event::InitApply(o) => listed.push(o),
            _ => panic!("expected {count} listed objects"),
        }
    }
    assert!(matches!(next(events).await, Event::InitDone));
    listed.sort_by_key(ResourceExt::name_any);
    listed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protobuf_watch_caches_what_json_does_and_survives_its_end() {
    let env = TestEnv::shared().unwrap();
    let ns = env.namespace("wirewatch").await.unwrap();
    for name in ["a", "b"] {
        create_pod(&ns, name).await;
    }
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "s", "labels": {"wire-watch": "yes"}},
        "spec": {"clusterIP": "None", "ports": [{"port": 80}]}}))
    .unwrap();
    ns.api::<Service>()
        .create(&PostParams::default(), &service)
        .await
        .unwrap();
    let (pod_json, service_json): (Api<ObservedPod>, Api<ObservedService>) = (ns.api(), ns.api());
    let selected = ListParams::default().labels(LABEL);
    // kwok runs them; after that nothing changes them, so both encodings see the same version.
    wait::until("a and b Running", wait::default_timeout(), || async {
        let listed = pod_json.list(&selected).await.unwrap().items;
        let running = |p: &ObservedPod| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
        Ok((listed.len() == 2 && listed.iter().all(running)).then_some(()))
    })
    .await
    .unwrap();

    // Pages of one, and a server-side timeout of a second: the watch ends and restarts often.
    let config = watcher::Config::default().labels(LABEL).page_size(1).timeout(1);
    let mut pod_events = follow(pod_json.clone(), config.clone());
    let mut service_events = follow(service_json.clone(), config);
    let listed = initial(&mut pod_events, 2).await;
    let mut json = pod_json.list(&selected).await.unwrap().items;
    json.sort_by_key(ResourceExt::name_any);
    for (protobuf, json) in listed.into_iter().zip(json) {
        assert_eq!(protobuf.resource_version(), json.resource_version());
        assert_eq!(CachedPod::from(protobuf), CachedPod::from(json));
    }
    let listed = initial(&mut service_events, 1).await;
    let json = service_json.get("s").await.unwrap();
    assert_eq!(
        CachedService::from(listed.into_iter().next().unwrap()),
        CachedService::from(json)
    );

    // Past two of the server's timeouts, changes still arrive (re-watched from the last version).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    create_pod(&ns, "c").await;
    ns.api::<Pod>()
        .delete("a", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    ns.api::<Service>()
        .delete("s", &DeleteParams::default())
        .await
        .unwrap();
    let (mut created, mut deleted) = (false, false);
    while !(created && deleted) {
        match next(&mut pod_events).await {
            Event::Apply(p) if p.name_any() == "c" => created = true,
            Event::Delete(p) if p.name_any() == "a" => deleted = true,
            Event::Apply(_) | Event::Delete(_) => {}
            _ => panic!("no relist expected"),
        }
    }
    match next(&mut service_events).await {
        Event::Delete(s) => assert_eq!(s.name_any(), "s"),
        _ => panic!("expected the service's deletion"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_on_protobuf_watches_recreates_a_deleted_pod_and_succeeds() {
    let env = TestEnv::shared().unwrap();
    env.install_crds([TestJob::crd()]).await.unwrap();
    let ns = env.namespace("wirewatchop").await.unwrap();
    wire::set_encoding(Encoding::Protobuf);
    let operator = Operator::start(ns.client(), ns.name(), |m| {
        m.register(TestFramework::default().loaded())
    });
    let jobs: Api<TestJob> = ns.api();
    let pod_api: Api<Pod> = ns.api();
    jobs.create(
        &PostParams::default(),
        &job(ns.name(), "w", &[("Worker", replica(1, None))]),
    )
    .await
    .unwrap();
    let running = |uid: Option<String>| {
        let pod_api = pod_api.clone();
        async move {
            wait::until("w-worker-0 Running", wait::default_timeout(), || async {
                Ok(pod_api
                    .get_opt("w-worker-0")
                    .await
                    .unwrap()
                    .filter(|p| pods::phase(p) == "Running" && p.metadata.uid != uid)
                    .and_then(|p| p.metadata.uid))
            })
            .await
            .unwrap()
        }
    };
    let first = running(None).await;
    // Only the watch's Delete event tells the operator the pod is gone.
    pod_api
        .delete("w-worker-0", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    running(Some(first)).await;
    pods::finish(&pod_api, "w-worker-0", 0, 0).await.unwrap();
    wait::until("w Succeeded", wait::default_timeout(), || async {
        let status = jobs.get("w").await.unwrap().status.unwrap_or_default();
        Ok(status.is(C::Succeeded).then_some(()))
    })
    .await
    .unwrap();
    operator.stop().await;
}
