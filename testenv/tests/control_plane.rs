#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The local control plane is real: CRDs install, the scheduler binds pods to kwok nodes, kwok
//! runs and terminates them, and the garbage collector removes what an owner owned.
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kfop_testenv::{TestEnv, pods, wait};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

fn widget_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": "widgets.testenv.kfop.dev" },
        "spec": {
            "group": "testenv.kfop.dev",
            "names": { "kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList" },
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": {
                    "type": "object",
                    "properties": { "spec": { "type": "object", "properties": { "size": { "type": "integer" } } } },
                }},
            }],
        },
    }))
    .unwrap()
}

fn owned_pod(name: &str, owner: &DynamicObject, ar: &ApiResource) -> Pod {
    serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "ownerReferences": [{
                "apiVersion": ar.api_version, "kind": ar.kind, "name": owner.name_any(),
                "uid": owner.uid().unwrap(), "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{ "name": "main", "image": "busybox",
                             "resources": { "requests": { "cpu": "1", "nvidia.com/gpu": "1" },
                                            "limits": { "nvidia.com/gpu": "1" } } }],
        },
    }))
    .unwrap()
}

fn terminated_exit_code(pod: &Pod) -> Option<i32> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    Some(statuses.first()?.state.as_ref()?.terminated.as_ref()?.exit_code)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_run_finish_and_are_garbage_collected() {
    let env = TestEnv::shared().unwrap();
    env.install_crds([widget_crd()]).await.unwrap();
    let ns = env.namespace("plane").await.unwrap();

    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("testenv.kfop.dev", "v1", "Widget"),
        "widgets",
    );
    let widgets: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &ar);
    let mut widget = DynamicObject::new("w1", &ar);
    widget.data = json!({ "spec": { "size": 2 } });
    let widget = widgets.create(&PostParams::default(), &widget).await.unwrap();
    assert_eq!(widget.meta().generation, Some(1));

    let pods: Api<Pod> = ns.api();
    for name in ["ok", "killed"] {
        pods.create(&PostParams::default(), &owned_pod(name, &widget, &ar))
            .await
            .unwrap();
    }

    // The scheduler binds each pod to a kwok node, and kwok runs it.
    for name in ["ok", "killed"] {
        let pod = wait::until(
            &format!("pod {name} Running"),
            wait::default_timeout(),
            || async {
                let pod = pods.get(name).await.unwrap();
                Ok((pods::phase(&pod) == "Running").then_some(pod))
            },
        )
        .await
        .unwrap();
        let node = pod.spec.unwrap().node_name.unwrap();
        assert!(node.starts_with("kwok-node-"), "bound to {node}");
        assert!(pod.status.unwrap().pod_ip.is_some());
    }

    pods::finish(&pods, "ok", 0, 0).await.unwrap();
    pods::finish(&pods, "killed", 137, 2).await.unwrap();
    for (name, phase, code) in [("ok", "Succeeded", 0), ("killed", "Failed", 137)] {
        let pod = wait::until(
            &format!("pod {name} {phase}"),
            wait::default_timeout(),
            || async {
                let pod = pods.get(name).await.unwrap();
                Ok((pods::phase(&pod) == phase).then_some(pod))
            },
        )
        .await
        .unwrap();
        assert_eq!(terminated_exit_code(&pod), Some(code), "{name}");
    }
    let killed = pods.get("killed").await.unwrap();
    assert_eq!(
        killed.status.unwrap().container_statuses.unwrap()[0].restart_count,
        2
    );

    // Deleting the owner lets kube-controller-manager's garbage collector remove the pods.
    widgets.delete("w1", &DeleteParams::background()).await.unwrap();
    wait::until(
        "owned pods to be garbage-collected",
        wait::default_timeout(),
        || async {
            Ok(pods
                .list(&Default::default())
                .await
                .unwrap()
                .items
                .is_empty()
                .then_some(()))
        },
    )
    .await
    .unwrap();
    ns.delete().await.unwrap();
}

#[tokio::test]
async fn restart_count_can_be_set_on_a_running_pod() {
    let env = TestEnv::shared().unwrap();
    let ns = env.namespace("restarts").await.unwrap();
    let pods: Api<Pod> = ns.api();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": "flaky" },
        "spec": { "restartPolicy": "OnFailure", "containers": [{ "name": "main", "image": "busybox" }] },
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    wait::until("pod flaky Running", wait::default_timeout(), || async {
        Ok((pods::phase(&pods.get("flaky").await.unwrap()) == "Running").then_some(()))
    })
    .await
    .unwrap();
    pods::set_restart_count(&pods, "flaky", 3).await.unwrap();
    let pod = pods.get("flaky").await.unwrap();
    assert_eq!(pods::phase(&pod), "Running");
    assert_eq!(
        pod.status.unwrap().container_statuses.unwrap()[0].restart_count,
        3
    );
}

#[tokio::test]
async fn pods_complete_on_their_own_after_the_annotated_delay() {
    let env = TestEnv::shared().unwrap();
    let ns = env.namespace("complete-after").await.unwrap();
    let pods: Api<Pod> = ns.api();
    let (key, value) = pods::complete_after(std::time::Duration::from_millis(1500));
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": "trainer", "annotations": { key: value } },
        "spec": { "restartPolicy": "Never", "containers": [{ "name": "main", "image": "busybox" }] },
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let started = wait::until("pod trainer Running", wait::default_timeout(), || async {
        let pod = pods.get("trainer").await.unwrap();
        Ok((pods::phase(&pod) == "Running").then(std::time::Instant::now))
    })
    .await
    .unwrap();
    let pod = wait::until("pod trainer Succeeded", wait::default_timeout(), || async {
        let pod = pods.get("trainer").await.unwrap();
        Ok((pods::phase(&pod) == "Succeeded").then_some(pod))
    })
    .await
    .unwrap();
    assert_eq!(terminated_exit_code(&pod), Some(0));
    // Seen Running at some point within the delay, so at least part of it must have passed.
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(500),
        "completed {:?} after being seen Running",
        started.elapsed()
    );
    ns.delete().await.unwrap();
}

#[test]
fn missing_binaries_name_the_build_command() {
    let err = kfop_testenv::Error::MissingBinary {
        name: "etcd".into(),
        dir: "/nowhere".into(),
        command: kfop_testenv::BUILD_COMMAND,
    };
    assert!(err.to_string().contains("testenv/controlplane/build.sh"), "{err}");
}
