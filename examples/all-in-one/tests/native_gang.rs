#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Kubernetes' native gang scheduling judged by the plane's real kube-scheduler (1.37,
//! `GenericWorkload` on; no test plays a scheduler here), through the all-in-one operator under
//! `--gang-scheduler-name default-scheduler`, one operator and one namespace for every step:
//!
//! * a gang that cannot fit (kwok nodes of this test with room for 2 one-CPU pods, a job of 3)
//!   gets no pod bound, and all of it is bound once a node with room for the third joins;
//! * suspended, the job's pods and PodGroup go; resumed while the old group is still held by its
//!   protection finalizer, it gets no pod until a new PodGroup is made, then its gang is bound
//!   whole;
//! * a worker failing with a retryable exit code (ExitCode policy) is replaced, and the
//!   replacement is bound into the running gang;
//! * two gangs of 2 competing for room for 3 pods do not both end half-placed: one is bound
//!   whole, the other waits with none bound, then runs once the first finishes;
//! * every bundled kind's sample, the MPIJob v2beta1 sample with its launcher batch Job, and a
//!   kind registered at run time run to Succeeded, each pod naming its job's PodGroup, and each
//!   PodGroup (minCount = the job's pods) goes once its job has succeeded.
use std::time::{Duration, Instant};

use kfop_operator::samples;
use kfop_operator::schemes::{self, Scheme};
use kfop_runtime::api::JobConditionType;
use kfop_runtime::dynamic::Framework;
use kfop_runtime::gang::{self, GangScheduler};
use kfop_runtime::k8s_openapi::api::core::v1::{Node, Pod};
use kfop_runtime::kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kfop_runtime::kube::{Client, CustomResourceExt, ResourceExt};
use kfop_runtime::serde_json::{self, Value, json};
use kfop_runtime::testing::Operator;
use kfop_testenv::{TestEnv, TestNamespace, pods, wait};

mod common;
use common::{pod_count, running_pods, status, until_succeeded};

/// The label and taint that keep the capacity steps' pods on this test's nodes (the plane's
/// other kwok nodes have room for anything, and other tests share them).
const NODE_KEY: &str = "test.kfop.dev/native-gang";

/// A run-time framework (one Worker role) whose jobs run under the same gang scheduling.
const MANIFEST: &str = "apiVersion: kfop.dev/v1alpha1
kind: Framework
metadata:
  name: rtgang
  annotations:
    kfop.dev/remove-crd-on-delete: \"true\"
spec:
  group: native-gang-test.kfop.dev
  version: v1
  kind: RtGangJob
  container:
    name: main
    portName: rtgang-port
    port: 7777
  roles:
    - name: Worker
      restartPolicy: Never
  masterPods: indexZero
  status:
    rule: leaderOrFollowers
    followers: Worker
";

/// Creates a kwok node only this test's capacity pods tolerate, with room for `cpu` one-CPU
/// pods, once kwok has made it Ready.
async fn node_with_room(client: &Client, name: &str, owner: &str, cpu: u32) {
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
    // kwok's node-initialize Stage gives a node without capacity its own; the test's goes in
    // once the node is Ready, after which that Stage leaves it alone.
    wait::until(&format!("node {name} Ready"), wait::default_timeout(), || async {
        let node = api.get(name).await.unwrap();
        let ready = (node.status.as_ref())
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
        &format!("node {name} offering {cpu} CPUs"),
        wait::default_timeout(),
        || async {
            let node = api.get(name).await.unwrap();
            let cpus = (node.status.as_ref())
                .and_then(|s| s.allocatable.as_ref())
                .and_then(|a| a.get("cpu"))
                .map(|q| q.0.clone());
            Ok((cpus == Some(cpu.to_string())).then_some(()))
        },
    )
    .await
    .unwrap();
}

/// A PyTorchJob of a Master and `workers` Workers (ExitCode policy), each pod asking 1 CPU and
/// kept to this test's nodes.
fn pytorch_job(name: &str, owner: &str, workers: u32) -> DynamicObject {
    let template = json!({ "spec": {
        "nodeSelector": { NODE_KEY: owner },
        "tolerations": [{ "key": NODE_KEY, "operator": "Equal", "value": owner, "effect": "NoSchedule" }],
        "containers": [{ "name": "pytorch", "image": "busybox",
                         "resources": { "requests": { "cpu": "1", "memory": "1Gi" } } }],
    }});
    serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": { "name": name },
        "spec": { "pytorchReplicaSpecs": {
            "Master": { "replicas": 1, "restartPolicy": "ExitCode", "template": template },
            "Worker": { "replicas": workers, "restartPolicy": "ExitCode", "template": template },
        }},
    }))
    .unwrap()
}

fn node_name(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.node_name.as_deref()
}

fn scheduling_group(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()?
        .scheduling_group
        .as_ref()?
        .pod_group_name
        .as_deref()
}

/// The pods of `job` bound to a node, now.
async fn bound(ns: &TestNamespace, job: &str) -> Vec<Pod> {
    let selector = format!("training.kubeflow.org/job-name={job}");
    let list = ns
        .api::<Pod>()
        .list(&ListParams::default().labels(&selector))
        .await
        .unwrap();
    list.items
        .into_iter()
        .filter(|p| node_name(p).is_some())
        .collect()
}

/// The PodScheduled condition of a pod as `status/reason: message`.
fn scheduled_condition(pod: &Pod) -> String {
    (pod.status.as_ref())
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"))
        .map_or_else(
            || "no PodScheduled condition".to_owned(),
            |c| {
                let reason = c.reason.as_deref().unwrap_or("");
                format!("{}/{reason}: {}", c.status, c.message.as_deref().unwrap_or(""))
            },
        )
}

/// The PodGroupInitiallyScheduled condition kube-scheduler writes: status and message.
fn initially_scheduled(group: &DynamicObject) -> Option<(String, String)> {
    let conditions = group.data["status"]["conditions"].as_array()?;
    let c = conditions
        .iter()
        .find(|c| c["type"] == "PodGroupInitiallyScheduled")?;
    Some((
        c["status"].as_str()?.to_owned(),
        c["message"].as_str().unwrap_or("").to_owned(),
    ))
}

fn min_count(group: &DynamicObject) -> &Value {
    &group.data["spec"]["schedulingPolicy"]["gang"]["minCount"]
}

/// Every pod of `job` names the job's PodGroup and is sent to kube-scheduler.
fn assert_gang_members(job: &str, pods: &[Pod]) {
    for pod in pods {
        let name = pod.name_any();
        assert_eq!(scheduling_group(pod), Some(job), "{name}");
        let scheduler = pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref());
        assert_eq!(scheduler, Some(gang::DEFAULT_SCHEDULER_NAME), "{name}");
    }
}

async fn finish_all(ns: &TestNamespace, pods: &[Pod]) {
    let api: Api<Pod> = ns.api();
    for pod in pods {
        pods::finish(&api, &pod.name_any(), 0, 0).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_gangs_wait_for_room_bind_whole_and_every_kind_runs() {
    let env = TestEnv::shared().unwrap();
    if !env.is_local() {
        eprintln!("skipped: needs the local plane (kwok nodes, kube-scheduler with native gang scheduling)");
        return;
    }
    let started = Instant::now();
    let mut step = Instant::now();
    let mut lap = |what: &str| {
        eprintln!("{what}: {:.1} s", step.elapsed().as_secs_f64());
        step = Instant::now();
    };
    let all = schemes::parse(&[]).unwrap();
    let mut crds: Vec<_> = all.iter().map(|s| s.crd_without_conversion()).collect();
    crds.push(Framework::crd());
    env.install_crds(crds).await.unwrap();
    let ns = env.namespace("native-gang").await.unwrap();
    let client = ns.client();
    let owner = ns.name().to_owned();
    let gang: GangScheduler = "default-scheduler".parse().unwrap();
    assert_eq!(gang, GangScheduler::native());
    let _operator = Operator::start_with(
        client.clone(),
        ns.name(),
        move |c| c.gang = gang,
        move |m| {
            kfop_operator::load_frameworks(
                kfop_operator::register(m, &all, &Default::default()).unwrap(),
                true,
            )
        },
    );
    let groups: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns.name(), &gang::native_api_resource());
    let pytorch: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        ns.name(),
        &samples::api_resource(Scheme::PyTorchJob),
    );
    let nodes = [format!("{owner}-a"), format!("{owner}-b")];
    node_with_room(&client, &nodes[0], &owner, 2).await;
    lap("plane, operator and a node with room for 2");

    // 1. A gang of 3 on room for 2: pods are created at once, but none is bound.
    pytorch
        .create(&PostParams::default(), &pytorch_job("wait", &owner, 2))
        .await
        .unwrap();
    let group = wait::until("PodGroup wait", wait::default_timeout(), || async {
        Ok(groups.get_opt("wait").await.unwrap())
    })
    .await
    .unwrap();
    assert_eq!(min_count(&group), 3, "{:?}", group.data);
    assert_eq!(group.owner_references()[0].kind, "PyTorchJob");
    assert_eq!(group.owner_references()[0].controller, Some(true));
    let pod_api: Api<Pod> = ns.api();
    let selector = ListParams::default().labels("training.kubeflow.org/job-name=wait");
    let created = wait::until("3 pods of wait", wait::default_timeout(), || async {
        let list = pod_api.list(&selector).await.unwrap().items;
        Ok((list.len() == 3).then_some(list))
    })
    .await
    .unwrap();
    assert_gang_members("wait", &created);
    let held = Instant::now();
    while held.elapsed() < Duration::from_secs(4) {
        let early = bound(&ns, "wait").await;
        assert!(
            early.is_empty(),
            "bound although the gang of 3 has room for 2: {:?}",
            early.iter().map(|p| p.name_any()).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    for pod in pod_api.list(&selector).await.unwrap() {
        let condition = scheduled_condition(&pod);
        eprintln!("waiting pod {}: PodScheduled {condition}", pod.name_any());
        assert!(condition.starts_with("False/Unschedulable"), "{condition}");
    }
    let waiting = groups.get("wait").await.unwrap();
    eprintln!("waiting PodGroup status: {}", waiting.data["status"]);
    let (scheduled, message) = initially_scheduled(&waiting).unwrap();
    assert_eq!(scheduled, "False", "{message}");
    let job = pytorch.get("wait").await.unwrap();
    assert!(
        !status(&job).is(JobConditionType::Running),
        "{:?}",
        job.data["status"]
    );
    lap("a gang of 3 held on room for 2");

    // Room for the third: the whole gang is bound.
    node_with_room(&client, &nodes[1], &owner, 1).await;
    let running = running_pods(&ns, "wait", 3).await;
    let on: Vec<&str> = running.iter().filter_map(node_name).collect();
    assert!(on.iter().all(|n| nodes.iter().any(|m| m == n)), "{on:?}");
    wait::until("PodGroup wait scheduled", wait::default_timeout(), || async {
        let group = groups.get("wait").await.unwrap();
        Ok(initially_scheduled(&group).filter(|(s, _)| s == "True"))
    })
    .await
    .unwrap();
    lap("bound whole once a node joined");

    // Suspended: pods and PodGroup go. A stray pending pod naming the group (not the job's)
    // keeps its protection finalizer, so the group is still being deleted when the job resumes:
    // no pod may be made for it then (the new pods would keep it from ever going; the engine
    // waits for what it deleted to be gone, and the gang gate counts a native group being
    // deleted as none). Once the stray pod is gone, a new group and a new gang, bound whole.
    let suspend = |on: bool| json!({ "spec": { "runPolicy": { "suspend": on } } });
    let old_group = groups.get("wait").await.unwrap().uid();
    let old_pods: Vec<_> = running.iter().map(|p| p.uid()).collect();
    let stray: Pod = serde_json::from_value(json!({
        "metadata": { "name": "stray" },
        "spec": {
            "schedulingGroup": { "podGroupName": "wait" },
            "nodeSelector": { NODE_KEY: "nowhere" },
            "containers": [{ "name": "main", "image": "busybox" }],
        },
    }))
    .unwrap();
    pod_api.create(&PostParams::default(), &stray).await.unwrap();
    pytorch
        .patch("wait", &PatchParams::default(), &Patch::Merge(&suspend(true)))
        .await
        .unwrap();
    wait::until(
        "PodGroup wait being deleted, pods gone",
        wait::default_timeout(),
        || async {
            let group = groups.get("wait").await.unwrap();
            let pods = pod_api.list(&selector).await.unwrap().items;
            Ok((group.metadata.deletion_timestamp.is_some() && pods.is_empty()).then_some(()))
        },
    )
    .await
    .unwrap();
    pytorch
        .patch("wait", &PatchParams::default(), &Patch::Merge(&suspend(false)))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let early: Vec<String> = (pod_api.list(&selector).await.unwrap().items.iter())
        .map(ResourceExt::name_any)
        .collect();
    assert!(
        early.is_empty(),
        "pods {early:?} made for a PodGroup being deleted"
    );
    let group = groups.get("wait").await.unwrap();
    assert_eq!(group.uid(), old_group);
    pod_api.delete("stray", &DeleteParams::default()).await.unwrap();
    let running = wait::until("3 new pods of wait Running", wait::default_timeout(), || async {
        let list = pod_api.list(&selector).await.unwrap().items;
        let new = |p: &Pod| !old_pods.contains(&p.uid()) && pods::phase(p) == "Running";
        Ok((list.len() == 3 && list.iter().all(new)).then_some(list))
    })
    .await
    .unwrap();
    assert_gang_members("wait", &running);
    let group = groups.get("wait").await.unwrap();
    assert_ne!(
        group.uid(),
        old_group,
        "the resumed gang runs under the old, deleted PodGroup"
    );
    assert!(group.metadata.deletion_timestamp.is_none());
    lap("suspended, resumed while its old PodGroup was being deleted: a new one, bound whole");

    // 2. A worker fails with a retryable exit code: its replacement joins the running gang.
    let failed = running.iter().find(|p| p.name_any() == "wait-worker-1").unwrap();
    let old_uid = failed.uid();
    pods::finish(&pod_api, "wait-worker-1", 137, 0).await.unwrap();
    let replacement = wait::until(
        "wait-worker-1 replaced and bound",
        wait::default_timeout(),
        || async {
            let pod = pod_api.get_opt("wait-worker-1").await.unwrap();
            Ok(pod.filter(|p| p.uid() != old_uid && pods::phase(p) == "Running"))
        },
    )
    .await
    .unwrap();
    assert_gang_members("wait", std::slice::from_ref(&replacement));
    let job = pytorch.get("wait").await.unwrap();
    assert!(status(&job).is(JobConditionType::Restarting) || status(&job).is(JobConditionType::Running));
    let running = running_pods(&ns, "wait", 3).await;
    finish_all(&ns, &running).await;
    until_succeeded(&pytorch, "wait", "after its gang re-formed").await;
    wait::until("PodGroup wait deleted", wait::default_timeout(), || async {
        Ok(groups.get_opt("wait").await.unwrap().is_none().then_some(()))
    })
    .await
    .unwrap();
    lap("a failed worker replaced into the gang, then Succeeded");

    // 3. Two gangs of 2 for room for 3: one bound whole, the other none.
    for name in ["left", "right"] {
        pytorch
            .create(&PostParams::default(), &pytorch_job(name, &owner, 1))
            .await
            .unwrap();
    }
    let (winner, loser) = wait::until("one gang of 2 bound", wait::default_timeout(), || async {
        let (left, right) = (bound(&ns, "left").await.len(), bound(&ns, "right").await.len());
        Ok(match (left, right) {
            (2, _) => Some(("left", "right")),
            (_, 2) => Some(("right", "left")),
            _ => None,
        })
    })
    .await
    .unwrap();
    let held = Instant::now();
    while held.elapsed() < Duration::from_secs(3) {
        let (won, lost) = (bound(&ns, winner).await.len(), bound(&ns, loser).await.len());
        assert_eq!(
            (won, lost),
            (2, 0),
            "{winner} and {loser} bound pods: one gang half-placed"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let first = running_pods(&ns, winner, 2).await;
    finish_all(&ns, &first).await;
    until_succeeded(&pytorch, winner, "first").await;
    let second = running_pods(&ns, loser, 2).await;
    finish_all(&ns, &second).await;
    until_succeeded(&pytorch, loser, "once the first gang left room").await;
    lap("two competing gangs: one whole, then the other");

    // 4. Every bundled kind, the MPIJob v2beta1 launcher among its gang, and a run-time kind.
    let frameworks: Api<Framework> = Api::all(client.clone());
    let framework: Framework = serde_json::from_value(serde_saphyr::from_str(MANIFEST).unwrap()).unwrap();
    frameworks
        .patch(
            "rtgang",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&framework),
        )
        .await
        .unwrap();
    wait::until("Framework rtgang Ready", Duration::from_secs(60), || async {
        let f = frameworks.get("rtgang").await.unwrap();
        let ready = (f.status.as_ref()).is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        });
        Ok(ready.then_some(()))
    })
    .await
    .unwrap();
    let runtime_kind = ApiResource {
        group: "native-gang-test.kfop.dev".into(),
        version: "v1".into(),
        api_version: "native-gang-test.kfop.dev/v1".into(),
        kind: "RtGangJob".into(),
        plural: "rtgangjobs".into(),
    };
    let mut jobs: Vec<(String, Api<DynamicObject>, usize)> = Vec::new();
    for (_, scheme) in Scheme::ALL {
        let (_, mut job) = samples::sample(scheme).unwrap();
        let name = format!("{}-gang", format!("{scheme:?}").to_lowercase());
        job.metadata.name = Some(name.clone());
        let api = Api::namespaced_with(client.clone(), ns.name(), &samples::api_resource(scheme));
        api.create(&PostParams::default(), &job).await.unwrap();
        jobs.push((name, api, pod_count(scheme)));
    }
    let runtime_job: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "native-gang-test.kfop.dev/v1",
        "kind": "RtGangJob",
        "metadata": { "name": "rtgang-gang" },
        "spec": { "rtgangReplicaSpecs": { "Worker": { "replicas": 2, "template": { "spec": {
            "containers": [{ "name": "main", "image": "busybox" }] } } } } },
    }))
    .unwrap();
    let runtime_jobs = Api::namespaced_with(client.clone(), ns.name(), &runtime_kind);
    runtime_jobs
        .create(&PostParams::default(), &runtime_job)
        .await
        .unwrap();
    jobs.push(("rtgang-gang".to_owned(), runtime_jobs, 2));
    let mut all_pods = Vec::new();
    for (name, _, count) in &jobs {
        let running = running_pods(&ns, name, *count).await;
        assert_gang_members(name, &running);
        let group = groups.get(name).await.unwrap();
        assert_eq!(min_count(&group), *count, "{name}: {:?}", group.data);
        if name.starts_with("mpijob") {
            let launcher = running.iter().find(|p| {
                p.labels().get(kfop_runtime::labels::JOB_ROLE).map(String::as_str) == Some("launcher")
            });
            assert!(
                launcher.is_some(),
                "no launcher among {:?}",
                running.iter().map(|p| p.name_any()).collect::<Vec<_>>()
            );
        }
        all_pods.extend(running);
    }
    lap("every kind's gang bound");
    finish_all(&ns, &all_pods).await;
    for (name, api, _) in &jobs {
        until_succeeded(api, name, "under native gang scheduling").await;
    }
    wait::until("every PodGroup deleted", wait::default_timeout(), || async {
        let left = groups.list(&ListParams::default()).await.unwrap().items;
        Ok(left.is_empty().then_some(()))
    })
    .await
    .unwrap();
    lap("every kind Succeeded, PodGroups gone");

    frameworks
        .delete("rtgang", &DeleteParams::default())
        .await
        .unwrap();
    let node_api: Api<Node> = Api::all(client.clone());
    for node in &nodes {
        node_api.delete(node, &DeleteParams::default()).await.unwrap();
    }
    ns.delete().await.unwrap();
    eprintln!("total: {:.1} s", started.elapsed().as_secs_f64());
}
