#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The PodGroups `kfop_runtime::gang` builds are accepted by the real API server under the
//! upstream CRDs, are owned by their job, and read back as needing no update.
use std::collections::BTreeMap;

use kfop_runtime::api::{RunPolicy, SchedulingPolicy};
use kfop_runtime::gang::{self, GangPlan, GangScheduler, JobRef, PodGroupWrite};
use kfop_runtime::kube::api::{Api, DynamicObject, PostParams};
use kfop_runtime::kube::{CustomResourceExt, ResourceExt};
use kfop_runtime::testing::{TestJob, job, replica};
use kfop_testenv::{TestEnv, crds};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn built_pod_groups_are_valid_and_stable() {
    let env = TestEnv::shared().unwrap();
    let mut all = crds::pod_groups().unwrap();
    all.push(TestJob::crd());
    env.install_crds(all).await.unwrap();
    let ns = env.namespace("gang").await.unwrap();

    let mut worker = replica(3, None);
    worker.template.spec.as_mut().unwrap().containers[0].resources = Some(
        serde_json::from_value(serde_json::json!({"requests": {"cpu": "500m", "memory": "1Gi"}})).unwrap(),
    );
    let specs = BTreeMap::from([("Worker".to_owned(), worker)]);
    let run_policy = RunPolicy {
        scheduling_policy: Some(SchedulingPolicy {
            min_available: Some(2),
            schedule_timeout_seconds: Some(30),
            ..SchedulingPolicy::default()
        }),
        ..RunPolicy::default()
    };

    for scheduler in [
        GangScheduler::Volcano,
        "scheduler-plugins".parse::<GangScheduler>().unwrap(),
    ] {
        let name = format!("job-{}", scheduler.to_string().replace(':', "-"));
        let jobs: Api<TestJob> = ns.api();
        let owner = jobs
            .create(&PostParams::default(), &job(ns.name(), &name, &[]))
            .await
            .unwrap();
        let job_ref = JobRef::of(&owner, "testjob-controller");
        let plan =
            gang::plan_pod_group(&scheduler, &job_ref, &run_policy, &specs, &BTreeMap::new(), None).unwrap();
        let Some(PodGroupWrite::Create(desired)) = plan.write else {
            panic!("expected a create for {scheduler}");
        };
        let ar = scheduler.pod_group_api_resource().unwrap();
        let api: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &ar);
        let created = api.create(&PostParams::default(), &desired).await.unwrap();
        assert_eq!(created.owner_references()[0].uid, owner.uid().unwrap());
        assert_eq!(created.data["spec"]["minResources"]["cpu"], "1", "{scheduler}");

        // What the server returns is what was planned: the next reconcile writes nothing.
        let again = gang::plan_pod_group(
            &scheduler,
            &job_ref,
            &run_policy,
            &specs,
            &BTreeMap::new(),
            Some(&created),
        )
        .unwrap();
        assert_eq!(
            again,
            GangPlan {
                write: None,
                hold_pods: scheduler == GangScheduler::Volcano,
            }
        );

        // A changed policy becomes an update the server accepts (optimistic concurrency kept).
        let mut lowered = run_policy.clone();
        lowered.scheduling_policy.as_mut().unwrap().min_available = Some(1);
        let plan = gang::plan_pod_group(
            &scheduler,
            &job_ref,
            &lowered,
            &specs,
            &BTreeMap::new(),
            Some(&created),
        )
        .unwrap();
        let Some(PodGroupWrite::Update(update)) = plan.write else {
            panic!("expected an update for {scheduler}");
        };
        let replaced = api
            .replace(&created.name_any(), &PostParams::default(), &update)
            .await
            .unwrap();
        assert_eq!(replaced.data["spec"]["minMember"], 1);
        assert!(!gang::needs_update(&replaced, &update));
    }
    ns.delete().await.unwrap();
}
