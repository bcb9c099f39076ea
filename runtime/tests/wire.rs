#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Protobuf creates (`--wire-encoding protobuf`) against a real API server: a pod, a service and
//! an event sent in protobuf are stored exactly as the same objects sent in JSON, a conflict
//! reads as one, and the operator runs a job on them.
use k8s_openapi::api::core::v1::{ObjectReference, Pod, Service};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kfop_runtime::kube::api::{Api, ListParams};
use kfop_runtime::kube::{CustomResourceExt, Resource, ResourceExt};
use kfop_runtime::testing::{Operator, TestFramework, TestJob, job, replica};
use kfop_runtime::wire::{self, Encoding, Wire};
use kfop_testenv::{TestEnv, wait};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Creates `object` as `name` in protobuf and as `name`-json in JSON, and returns both as
/// stored, in JSON, without what the server sets per object (and the status kwok writes).
async fn both_ways<K>(api: &Api<K>, object: &K) -> (Value, Value)
where
    K: Wire + Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    assert!(object.to_pb().is_some(), "{object:?} is covered");
    let name = object.name_any();
    wire::set_encoding(Encoding::Protobuf);
    let created = wire::create(api, object).await.unwrap().expect("new");
    assert!(created.meta().uid.is_some(), "the protobuf answer is read");
    assert!(
        wire::create(api, object).await.unwrap().is_none(),
        "409 read from protobuf"
    );
    wire::set_encoding(Encoding::Json);
    let mut twin = object.clone();
    twin.meta_mut().name = Some(format!("{name}-json"));
    wire::create(api, &twin).await.unwrap().expect("new");
    let stored = |name: String| async move {
        let mut json = serde_json::to_value(api.get(&name).await.unwrap()).unwrap();
        json.as_object_mut().unwrap().remove("status");
        // The scheduler's choice of node is its own, not the encoding's.
        if let Some(spec) = json["spec"].as_object_mut() {
            spec.remove("nodeName");
        }
        let meta = json["metadata"].as_object_mut().unwrap();
        for set in [
            "name",
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "managedFields",
        ] {
            meta.remove(set);
        }
        json
    };
    (stored(name.clone()).await, stored(format!("{name}-json")).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_creates_store_what_json_creates_and_the_operator_runs_on_them() {
    let env = TestEnv::shared().unwrap();
    env.install_crds([TestJob::crd()]).await.unwrap();
    let ns = env.namespace("wire").await.unwrap();
    let meta = json!({"name": "w", "namespace": ns.name(),
        "labels": {"training.kubeflow.org/job-name": "w"}, "annotations": {"a": "b"}});

    let pod: Pod = serde_json::from_value(json!({"metadata": meta, "spec": {
        "automountServiceAccountToken": false, "restartPolicy": "OnFailure", "hostname": "w",
        "subdomain": "w", "schedulerName": "default-scheduler", "terminationGracePeriodSeconds": 5,
        "securityContext": {"runAsUser": 1000, "fsGroup": 2000},
        "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
        "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}},
                    {"name": "cfg", "configMap": {"name": "c", "items": [{"key": "k", "path": "p"}]}}],
        "initContainers": [{"name": "init", "image": "alpine:3.10", "command": ["true"]}],
        "containers": [{"name": "main", "image": "busybox", "args": ["-c", "sleep 1"],
            "ports": [{"name": "port", "containerPort": 23456}],
            "env": [{"name": "WORLD_SIZE", "value": "2"},
                    {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m"}},
            "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}]}}))
    .unwrap();
    let (protobuf, json) = both_ways(&ns.api::<Pod>(), &pod).await;
    assert_eq!(protobuf, json);
    assert_eq!(
        protobuf["spec"]["containers"][0]["resources"]["requests"]["cpu"],
        "500m"
    );

    let service: Service = serde_json::from_value(json!({"metadata": meta, "spec": {
        "clusterIP": "None", "selector": {"training.kubeflow.org/job-name": "w"},
        "publishNotReadyAddresses": true,
        "ports": [{"name": "port", "port": 23456, "targetPort": 23456}]}}))
    .unwrap();
    let (protobuf, json) = both_ways(&ns.api::<Service>(), &service).await;
    assert_eq!(protobuf, json);

    let regarding = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some("w".into()),
        namespace: Some(ns.name().to_owned()),
        ..ObjectReference::default()
    };
    let event = Event {
        metadata: ObjectMeta {
            name: Some("w.1".into()),
            namespace: Some(ns.name().to_owned()),
            ..ObjectMeta::default()
        },
        event_time: Some(MicroTime(Timestamp::now())),
        action: Some("SuccessfulCreatePod".into()),
        reason: Some("SuccessfulCreatePod".into()),
        note: Some("Created pod: w".into()),
        type_: Some("Normal".into()),
        regarding: Some(regarding.clone()),
        related: Some(regarding),
        reporting_controller: Some("kfop-test".into()),
        reporting_instance: Some("kfop-test".into()),
        ..Event::default()
    };
    let (protobuf, json) = both_ways(&ns.api::<Event>(), &event).await;
    assert_eq!(protobuf, json);

    // The operator with protobuf on: its pods, services and events arrive, and its pods (even
    // as the server stored them, with its defaults) are covered, so none went as JSON.
    wire::set_encoding(Encoding::Protobuf);
    let operator = Operator::start(ns.client(), ns.name(), |m| {
        m.register(TestFramework::default().loaded())
    });
    let jobs: Api<TestJob> = ns.api();
    let tj = job(
        ns.name(),
        "tj",
        &[("Master", replica(1, None)), ("Worker", replica(1, None))],
    );
    jobs.create(&Default::default(), &tj).await.unwrap();
    let (pods, services, events): (Api<Pod>, Api<Service>, Api<Event>) = (ns.api(), ns.api(), ns.api());
    let children = ListParams::default().labels("training.kubeflow.org/job-name=tj");
    let stored = wait::until(
        "tj's 2 pods, 2 services and an event each",
        wait::default_timeout(),
        || async {
            let pods = pods.list(&children).await.unwrap().items;
            let services = services.list(&children).await.unwrap().items;
            let announced: Vec<String> = events
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("tj"))
                .filter(|e| {
                    e.reason
                        .as_deref()
                        .is_some_and(|r| r.starts_with("SuccessfulCreate"))
                })
                .filter_map(|e| e.related.and_then(|r| Some(format!("{}/{}", r.kind?, r.name?))))
                .collect();
            let children: Vec<String> = (pods.iter().map(|p| format!("Pod/{}", p.name_any())))
                .chain(services.iter().map(|s| format!("Service/{}", s.name_any())))
                .collect();
            let done = children.len() == 4 && children.iter().all(|c| announced.contains(c));
            Ok(done.then_some(pods))
        },
    )
    .await
    .unwrap();
    for mut pod in stored {
        pod.status = None;
        pod.metadata = ObjectMeta {
            name: pod.metadata.name,
            labels: pod.metadata.labels,
            owner_references: pod.metadata.owner_references,
            ..ObjectMeta::default()
        };
        assert!(pod.to_pb().is_some(), "{pod:?} is covered");
    }
    operator.stop().await;
}
