#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The plane's kube-scheduler gang-schedules natively (KEP-4671, `scheduling.k8s.io/v1beta1`):
//! pods naming a PodGroup with `minCount` 3 through `spec.schedulingGroup` stay unbound while the
//! nodes have room for only two of them, and all three are bound once a node with room for the
//! third joins.
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use kfop_testenv::{TestEnv, wait};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

/// The label and taint that keep the test's nodes to the test's pods (other tests of the process
/// share the plane and its scheduler).
const NODE_KEY: &str = "testenv.kfop.dev/gang";

/// Creates a kwok node for pods carrying `NODE_KEY=owner` (label and toleration) with room for
/// `cpu` one-CPU pods, and waits until kwok made it Ready with that capacity.
async fn node_with_room(client: &Client, name: &str, owner: &str, cpu: u32) -> Node {
    let api: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "annotations": { "kwok.x-k8s.io/node": "fake" },
            "labels": { "type": "kwok", "kubernetes.io/hostname": name, NODE_KEY: owner },
        },
        "spec": { "taints": [{ "key": NODE_KEY, "value": owner, "effect": "NoSchedule" }] },
    }))
    .unwrap();
    api.create(&PostParams::default(), &node).await.unwrap();
    // kwok's node-initialize Stage fills in a capacity of its own when the node has none; the
    // test's goes in once the node is Ready, after which that Stage leaves the node alone.
    wait::until(&format!("node {name} Ready"), wait::default_timeout(), || async {
        let node = api.get(name).await.unwrap();
        let ready = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        Ok(ready.then_some(()))
    })
    .await
    .unwrap();
    let room = json!({ "cpu": cpu.to_string(), "memory": "64Gi", "pods": "110" });
    let status = json!({ "status": { "capacity": room, "allocatable": room } });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    wait::until(
        &format!("node {name} to offer {cpu} CPUs"),
        wait::default_timeout(),
        || async {
            let node = api.get(name).await.unwrap();
            let cpus = node
                .status
                .as_ref()
                .and_then(|s| s.allocatable.as_ref())
                .and_then(|a| a.get("cpu"))
                .map(|q| q.0.clone());
            Ok((cpus == Some(cpu.to_string())).then_some(node))
        },
    )
    .await
    .unwrap()
}

fn gang_pod(name: &str, group: &str, owner: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": {
            "restartPolicy": "Never",
            "schedulingGroup": { "podGroupName": group },
            "nodeSelector": { NODE_KEY: owner },
            "tolerations": [{ "key": NODE_KEY, "operator": "Equal", "value": owner, "effect": "NoSchedule" }],
            "containers": [{ "name": "main", "image": "busybox",
                             "resources": { "requests": { "cpu": "1", "memory": "1Gi" } } }],
        },
    }))
    .unwrap()
}

fn node_name(pod: &Pod) -> Option<String> {
    pod.spec.as_ref()?.node_name.clone()
}

/// The PodScheduled condition of a pod as `status/reason: message`.
fn scheduled_condition(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"))
        .map_or_else(
            || "no PodScheduled condition".to_owned(),
            |c| {
                format!(
                    "{}/{}: {}",
                    c.status,
                    c.reason.as_deref().unwrap_or(""),
                    c.message.as_deref().unwrap_or("")
                )
            },
        )
}

/// The PodGroupInitiallyScheduled condition the scheduler writes: status, reason, message.
fn initially_scheduled(group: &PodGroup) -> Option<(String, String, String)> {
    let conditions = group.status.as_ref()?.conditions.as_ref()?;
    let c = conditions
        .iter()
        .find(|c| c.type_ == "PodGroupInitiallyScheduled")?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_waits_for_room_for_min_count_pods_then_binds_whole() {
    let env = TestEnv::shared().unwrap();
    if !env.is_local() {
        eprintln!("skipped: needs the local plane (kwok nodes and native gang scheduling on)");
        return;
    }
    let ns = env.namespace("gang").await.unwrap();
    let client = ns.client();
    let owner = ns.name().to_owned();
    let nodes = [format!("{owner}-a"), format!("{owner}-b")];

    // Room for two of the three one-CPU pods.
    node_with_room(&client, &nodes[0], &owner, 2).await;

    // A PodGroup needs no Workload: workloadRef is optional in v1beta1.
    let groups: Api<PodGroup> = ns.api();
    let group: PodGroup = serde_json::from_value(json!({
        "metadata": { "name": "trainers" },
        "spec": { "schedulingPolicy": { "gang": { "minCount": 3 } } },
    }))
    .unwrap();
    groups.create(&PostParams::default(), &group).await.unwrap();

    let pods: Api<Pod> = ns.api();
    let names = ["trainer-0", "trainer-1", "trainer-2"];
    for name in names {
        let created = pods
            .create(&PostParams::default(), &gang_pod(name, "trainers", &owner))
            .await
            .unwrap();
        // The API server keeps the field (it drops it when GenericWorkload is off).
        let group_name = created
            .spec
            .as_ref()
            .and_then(|s| s.scheduling_group.as_ref())
            .and_then(|g| g.pod_group_name.clone());
        assert_eq!(group_name.as_deref(), Some("trainers"), "{name}");
    }

    // Two would fit, but the gang needs three: none is bound.
    let held = Instant::now();
    while held.elapsed() < Duration::from_secs(10) {
        for pod in pods.list(&ListParams::default()).await.unwrap() {
            assert_eq!(
                node_name(&pod),
                None,
                "{} bound although its gang of 3 has room for 2 ({})",
                pod.metadata.name.as_deref().unwrap_or(""),
                scheduled_condition(&pod)
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // What a waiting gang looks like: each pod PodScheduled=False/Unschedulable (those that
    // would fit say the group cannot reach minCount), and the PodGroup's
    // PodGroupInitiallyScheduled=False/Unschedulable says why.
    for pod in pods.list(&ListParams::default()).await.unwrap() {
        let condition = scheduled_condition(&pod);
        eprintln!(
            "waiting pod {}: PodScheduled {condition}",
            pod.metadata.name.as_deref().unwrap_or("")
        );
        assert!(condition.starts_with("False/Unschedulable: "), "{condition}");
    }
    let waiting = groups.get("trainers").await.unwrap();
    eprintln!(
        "waiting PodGroup status: {}",
        serde_json::to_string(&waiting.status).unwrap()
    );
    let (status, reason, message) = initially_scheduled(&waiting).unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "Unschedulable"),
        "{message}"
    );
    assert!(message.contains("minCount (3) cannot be satisfied"), "{message}");
    let events: Api<Event> = ns.api();
    for event in events.list(&ListParams::default()).await.unwrap() {
        eprintln!(
            "event {} {}/{}: {}",
            event.involved_object.name.as_deref().unwrap_or(""),
            event.type_.as_deref().unwrap_or(""),
            event.reason.as_deref().unwrap_or(""),
            event.message.as_deref().unwrap_or("")
        );
    }

    // A node with room for the third joins: the whole gang is bound, on the test's two nodes.
    node_with_room(&client, &nodes[1], &owner, 1).await;
    let bound = wait::until("all three gang pods bound", wait::default_timeout(), || async {
        let list = pods.list(&ListParams::default()).await.unwrap();
        let bound: Vec<String> = list.items.iter().filter_map(node_name).collect();
        Ok((bound.len() == names.len()).then_some(bound))
    })
    .await
    .unwrap();
    for node in &bound {
        assert!(nodes.contains(node), "bound to {node}, not one of {nodes:?}");
    }
    assert_eq!(bound.iter().filter(|n| **n == nodes[0]).count(), 2, "{bound:?}");
    assert_eq!(bound.iter().filter(|n| **n == nodes[1]).count(), 1, "{bound:?}");

    let scheduled = wait::until(
        "PodGroup trainers PodGroupInitiallyScheduled=True",
        wait::default_timeout(),
        || async {
            let group = groups.get("trainers").await.unwrap();
            let done = initially_scheduled(&group).is_some_and(|(status, ..)| status == "True");
            Ok(done.then_some(group))
        },
    )
    .await
    .unwrap();
    eprintln!(
        "scheduled PodGroup status: {}",
        serde_json::to_string(&scheduled.status).unwrap()
    );

    ns.delete().await.unwrap();
    let node_api: Api<Node> = Api::all(client.clone());
    for node in &nodes {
        node_api.delete(node, &DeleteParams::default()).await.unwrap();
    }
}
