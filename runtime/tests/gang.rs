#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Gang scheduling against a real control plane with the upstream-shaped PodGroup CRDs: the
//! PodGroup per scheduler, pods held until Volcano admits the group, Kubeflow's gang e2e case
//! (minAvailable larger than the job keeps it Created; lowering it lets it run and succeed), and
//! the PodGroup removed on suspend and on success. No Volcano or scheduler-plugins runs here: the
//! tests play Volcano's admission (hence the `played_` names), and the local kube-scheduler
//! answers to the gang schedulers' names so admitted pods run, one by one. Kubernetes' native
//! gang scheduling is judged by the real kube-scheduler in
//! `examples/all-in-one/tests/native_gang.rs`.
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Service};
use kfop_runtime::api::{JobConditionType as C, JobStatus, SchedulingPolicy};
use kfop_runtime::gang::{self, GangScheduler};
use kfop_runtime::kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kfop_runtime::kube::{CustomResourceExt, ResourceExt};
use kfop_runtime::testing::{Operator, TestFramework, TestJob, job, replica};
use kfop_testenv::{TestEnv, TestNamespace, crds, pods, wait};
use serde_json::{Value, json};

struct Fixture {
    ns: TestNamespace,
    jobs: Api<TestJob>,
    pods: Api<Pod>,
    groups: Api<DynamicObject>,
    _operator: Operator,
}

async fn fixture(prefix: &str, scheduler: GangScheduler) -> Fixture {
    let env = TestEnv::shared().unwrap();
    let mut all = crds::pod_groups().unwrap();
    all.push(TestJob::crd());
    env.install_crds(all).await.unwrap();
    let ns = env.namespace(prefix).await.unwrap();
    let resource = scheduler.pod_group_api_resource().unwrap();
    let operator = Operator::start_with(
        ns.client(),
        ns.name(),
        |c| c.gang = scheduler,
        |m| m.register(TestFramework::default().loaded()),
    );
    Fixture {
        jobs: ns.api(),
        pods: ns.api(),
        groups: Api::namespaced_with(ns.client(), ns.name(), &resource),
        ns,
        _operator: operator,
    }
}

/// A master and two workers, each container requesting 1 CPU.
fn gang_job(name: &str, policy: SchedulingPolicy) -> TestJob {
    let with_requests = |n: i32| {
        let mut r = replica(n, None);
        r.template.spec.as_mut().unwrap().containers[0].resources =
            Some(serde_json::from_value(json!({ "requests": { "cpu": "1", "memory": "1Gi" } })).unwrap());
        r
    };
    let mut j = job(
        "",
        name,
        &[("Master", with_requests(1)), ("Worker", with_requests(2))],
    );
    j.spec.run_policy.scheduling_policy = Some(policy);
    j
}

impl Fixture {
    async fn create(&self, mut j: TestJob) {
        j.metadata.namespace = Some(self.ns.name().to_owned());
        self.jobs.create(&PostParams::default(), &j).await.unwrap();
    }

    async fn group(&self, name: &str, check: impl Fn(&Value) -> bool) -> DynamicObject {
        let got = wait::until(&format!("PodGroup {name}"), wait::default_timeout(), || async {
            Ok(self
                .groups
                .get_opt(name)
                .await
                .unwrap()
                .filter(|g| check(&g.data)))
        })
        .await;
        match got {
            Ok(g) => g,
            Err(e) => panic!(
                "{e}: {:?}",
                self.groups.get_opt(name).await.unwrap().map(|g| g.data)
            ),
        }
    }

    async fn admit(&self, name: &str) {
        let status = json!({ "status": { "phase": "Running" } });
        self.groups
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .unwrap();
    }

    async fn status(&self, name: &str) -> JobStatus {
        self.jobs.get(name).await.unwrap().status.unwrap_or_default()
    }

    async fn wait_condition(&self, name: &str, type_: C) {
        wait::until(&format!("{name} {type_:?}"), wait::default_timeout(), || async {
            Ok(self.status(name).await.is(type_).then_some(()))
        })
        .await
        .unwrap();
    }

    async fn running_pods(&self, n: usize) -> Vec<Pod> {
        wait::until(&format!("{n} pods Running"), wait::default_timeout(), || async {
            let list = self.pods.list(&ListParams::default()).await.unwrap().items;
            let running = list.iter().filter(|p| pods::phase(p) == "Running").count();
            Ok((list.len() == n && running == n).then_some(list))
        })
        .await
        .unwrap()
    }

    async fn pod_count(&self) -> usize {
        self.pods.list(&ListParams::default()).await.unwrap().items.len()
    }

    async fn gone(&self, name: &str) {
        wait::until(
            &format!("PodGroup {name} deleted"),
            wait::default_timeout(),
            || async { Ok(self.groups.get_opt(name).await.unwrap().is_none().then_some(())) },
        )
        .await
        .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn played_volcano_holds_pods_until_admitted() {
    let f = fixture("gang-volcano", GangScheduler::Volcano).await;
    let policy = SchedulingPolicy {
        queue: Some("research".to_owned()),
        priority_class: Some("high".to_owned()),
        ..SchedulingPolicy::default()
    };
    f.create(gang_job("v", policy)).await;
    let group = f.group("v", |d| d["spec"]["minMember"] == 3).await;
    assert_eq!(group.data["spec"]["queue"], "research");
    assert_eq!(group.data["spec"]["priorityClassName"], "high");
    assert_eq!(
        group.data["spec"]["minResources"],
        json!({ "cpu": "3", "memory": "3Gi" })
    );
    let owner = &group.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.controller), ("TestJob", Some(true)));

    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        f.pod_count().await,
        0,
        "pods created before Volcano admitted the PodGroup"
    );
    // Held as in Kubeflow: no services, no replica counts, no startTime (the deadline does not
    // count the wait), only lastReconcileTime.
    let held = f.status("v").await;
    assert!(held.is(C::Created));
    assert!(
        held.start_time.is_none() && held.replica_statuses.is_empty(),
        "{held:?}"
    );
    assert!(held.last_reconcile_time.is_some(), "{held:?}");
    let services: Api<Service> = f.ns.api();
    assert!(
        services
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    f.admit("v").await;
    let pods = f.running_pods(3).await;
    for pod in &pods {
        assert_eq!(
            pod.spec.as_ref().unwrap().scheduler_name.as_deref(),
            Some("volcano")
        );
        assert_eq!(pod.annotations()[gang::VOLCANO_GROUP_NAME_ANNOTATION], "v");
        let role = &pod.labels()["training.kubeflow.org/replica-type"];
        assert_eq!(&pod.annotations()[gang::VOLCANO_TASK_SPEC_ANNOTATION], role);
    }
    f.wait_condition("v", C::Running).await;

    // Suspending deletes the PodGroup with the pods; resuming makes it again.
    let suspend = |s: bool| json!({ "spec": { "runPolicy": { "suspend": s } } });
    f.jobs
        .patch("v", &PatchParams::default(), &Patch::Merge(&suspend(true)))
        .await
        .unwrap();
    f.gone("v").await;
    f.jobs
        .patch("v", &PatchParams::default(), &Patch::Merge(&suspend(false)))
        .await
        .unwrap();
    f.group("v", |d| d["spec"]["minMember"] == 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn played_scheduler_plugins_pod_group_does_not_hold_pods() {
    let f = fixture("gang-plugins", "scheduler-plugins".parse().unwrap()).await;
    let policy = SchedulingPolicy {
        min_available: Some(2),
        schedule_timeout_seconds: Some(30),
        ..SchedulingPolicy::default()
    };
    f.create(gang_job("p", policy)).await;
    let group = f.group("p", |d| d["spec"]["minMember"] == 2).await;
    assert_eq!(group.data["spec"]["scheduleTimeoutSeconds"], 30);
    assert_eq!(
        group.data["spec"]["minResources"],
        json!({ "cpu": "2", "memory": "2Gi" })
    );
    let pods = f.running_pods(3).await;
    for pod in &pods {
        assert_eq!(
            pod.spec.as_ref().unwrap().scheduler_name.as_deref(),
            Some(gang::DEFAULT_SCHEDULER_PLUGINS_NAME)
        );
        assert_eq!(pod.labels()[gang::SCHEDULER_PLUGINS_POD_GROUP_LABEL], "p");
    }
    for pod in &pods {
        pods::finish(&f.pods, &pod.name_any(), 0, 0).await.unwrap();
    }
    f.wait_condition("p", C::Succeeded).await;
    f.gone("p").await;
}

/// Kubeflow's SDK gang e2e case, with the test admitting a PodGroup only when the cluster can
/// hold its minMember pods (here: at most the job's 3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn played_volcano_min_available_too_large_keeps_the_job_created() {
    let f = fixture("gang-e2e", GangScheduler::Volcano).await;
    let policy = SchedulingPolicy {
        min_available: Some(10),
        ..SchedulingPolicy::default()
    };
    f.create(gang_job("e2e", policy)).await;
    f.group("e2e", |d| d["spec"]["minMember"] == 10).await;
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let status = f.status("e2e").await;
        assert!(status.is(C::Created) && !status.is(C::Running), "{status:?}");
        assert_eq!(f.pod_count().await, 0);
    }

    let lower = json!({ "spec": { "runPolicy": { "schedulingPolicy": { "minAvailable": 2 } } } });
    f.jobs
        .patch("e2e", &PatchParams::default(), &Patch::Merge(&lower))
        .await
        .unwrap();
    f.group("e2e", |d| d["spec"]["minMember"] == 2).await;
    f.admit("e2e").await;
    let pods = f.running_pods(3).await;
    f.wait_condition("e2e", C::Running).await;
    for pod in &pods {
        pods::finish(&f.pods, &pod.name_any(), 0, 0).await.unwrap();
    }
    f.wait_condition("e2e", C::Succeeded).await;
    let status = f.status("e2e").await;
    assert!(!status.is(C::Failed) && !status.is(C::Restarting));
    f.gone("e2e").await;
}
