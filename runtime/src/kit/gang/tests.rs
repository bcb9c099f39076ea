//! The PodGroup a job gets, the update decision and the combined plan, with Kubeflow's cases.
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::DynamicObject;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::*;
use crate::api::{ReplicaSpec, RunPolicy, SchedulingPolicy};

fn plugins() -> GangScheduler {
    GangScheduler::SchedulerPlugins {
        scheduler_name: DEFAULT_SCHEDULER_PLUGINS_NAME.to_owned(),
    }
}

fn replica(replicas: i32, priority_class: Option<&str>, cpu: &str, memory: &str) -> ReplicaSpec {
    serde_json::from_value(json!({"replicas": replicas, "template": {"spec": {
        "priorityClassName": priority_class,
        "containers": [{"name": "main", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
    }}}))
    .unwrap()
}

/// A PyTorch-shaped job: one master, three workers.
fn specs() -> BTreeMap<String, ReplicaSpec> {
    BTreeMap::from([
        ("Master".to_owned(), replica(1, Some("low"), "1", "1Gi")),
        ("Worker".to_owned(), replica(3, Some("high"), "2", "2Gi")),
    ])
}

fn classes() -> BTreeMap<String, i32> {
    BTreeMap::from([("high".to_owned(), 1000), ("low".to_owned(), 1)])
}

fn job_ref() -> JobRef {
    let mut job = crate::testing::job("ns", "train", &[]);
    job.metadata.uid = Some("uid-1".to_owned());
    job.metadata.annotations = Some(BTreeMap::from([("note".to_owned(), "kept".to_owned())]));
    JobRef::of(&job, &(), "testjob-controller")
}

fn policy(scheduling: SchedulingPolicy) -> RunPolicy {
    RunPolicy {
        scheduling_policy: Some(scheduling),
        ..RunPolicy::default()
    }
}

fn desired(
    scheduler: &GangScheduler,
    run_policy: &RunPolicy,
    observed: Option<&DynamicObject>,
) -> DynamicObject {
    desired_pod_group(scheduler, &job_ref(), run_policy, &specs(), &classes(), observed)
        .unwrap()
        .unwrap()
}

fn spec_of(pod_group: &DynamicObject) -> &serde_json::Value {
    &pod_group.data["spec"]
}

#[test]
fn no_gang_scheduler_no_pod_group() {
    let out = desired_pod_group(
        &GangScheduler::None,
        &job_ref(),
        &RunPolicy::default(),
        &specs(),
        &classes(),
        None,
    );
    assert_eq!(out, Ok(None));
    assert_eq!(GangScheduler::None.pod_group_api_resource(), None);
}

#[test]
fn volcano_defaults_min_member_queue_and_computed_resources() {
    let pg = desired(&GangScheduler::Volcano, &RunPolicy::default(), None);
    assert_eq!(
        spec_of(&pg),
        &json!({"minMember": 4, "queue": "default", "minResources": {"cpu": "7", "memory": "7Gi"}})
    );
}

#[test]
fn volcano_takes_the_scheduling_policy() {
    let run_policy = policy(SchedulingPolicy {
        min_available: Some(2),
        queue: Some("research".to_owned()),
        priority_class: Some("urgent".to_owned()),
        min_resources: None,
        schedule_timeout_seconds: Some(30),
    });
    let pg = desired(&GangScheduler::Volcano, &run_policy, None);
    // minMember 2 of 4 pods: the two highest-priority pods are workers.
    assert_eq!(
        spec_of(&pg),
        &json!({"minMember": 2, "queue": "research", "priorityClassName": "urgent",
                "minResources": {"cpu": "4", "memory": "4Gi"}})
    );
}

#[test]
fn given_min_resources_are_used_verbatim() {
    let given = BTreeMap::from([("cpu".to_owned(), Quantity("100".to_owned()))]);
    let run_policy = policy(SchedulingPolicy {
        min_resources: Some(given),
        ..SchedulingPolicy::default()
    });
    for scheduler in [GangScheduler::Volcano, plugins()] {
        let pg = desired(&scheduler, &run_policy, None);
        assert_eq!(spec_of(&pg)["minResources"], json!({"cpu": "100"}), "{scheduler}");
        assert_eq!(spec_of(&pg)["minMember"], json!(4));
    }
}

#[test]
fn volcano_keeps_an_existing_queue() {
    let run_policy = policy(SchedulingPolicy {
        queue: Some("new".to_owned()),
        ..SchedulingPolicy::default()
    });
    let mut observed = desired(&GangScheduler::Volcano, &RunPolicy::default(), None);
    observed.data["spec"]["queue"] = json!("admitted");
    let pg = desired(&GangScheduler::Volcano, &run_policy, Some(&observed));
    assert_eq!(spec_of(&pg)["queue"], json!("admitted"));

    // An observed PodGroup without a queue does not blank the desired one.
    observed.data["spec"]["queue"] = json!("");
    let pg = desired(&GangScheduler::Volcano, &run_policy, Some(&observed));
    assert_eq!(spec_of(&pg)["queue"], json!("new"));
}

#[test]
fn scheduler_plugins_spec_has_no_queue_but_a_timeout() {
    let run_policy = policy(SchedulingPolicy {
        min_available: Some(1),
        queue: Some("ignored".to_owned()),
        priority_class: Some("ignored".to_owned()),
        schedule_timeout_seconds: Some(60),
        ..SchedulingPolicy::default()
    });
    let pg = desired(&plugins(), &run_policy, None);
    assert_eq!(
        spec_of(&pg),
        &json!({"minMember": 1, "scheduleTimeoutSeconds": 60, "minResources": {"cpu": "2", "memory": "2Gi"}})
    );
    let types = pg.types.as_ref().unwrap();
    assert_eq!(
        (types.api_version.as_str(), types.kind.as_str()),
        ("scheduling.x-k8s.io/v1alpha1", "PodGroup")
    );
}

#[test]
fn pod_group_metadata_follows_the_job() {
    let pg = desired(&GangScheduler::Volcano, &RunPolicy::default(), None);
    let types = pg.types.as_ref().unwrap();
    assert_eq!(
        (types.api_version.as_str(), types.kind.as_str()),
        ("scheduling.volcano.sh/v1beta1", "PodGroup")
    );
    assert_eq!(
        (pg.name_any(), pg.namespace()),
        ("train".to_owned(), Some("ns".to_owned()))
    );
    assert_eq!(pg.annotations()["note"], "kept");
    assert_eq!(
        pg.labels(),
        &crate::labels::job_labels("testjob-controller", "train")
    );
    let owner = &pg.owner_references()[0];
    assert_eq!(owner.kind, crate::testing::TestJob::kind(&()));
    assert_eq!(owner.api_version, crate::testing::TestJob::api_version(&()));
    assert_eq!((owner.name.as_str(), owner.uid.as_str()), ("train", "uid-1"));
    assert_eq!(
        (owner.controller, owner.block_owner_deletion),
        (Some(true), Some(true))
    );
}

#[test]
fn api_resources_are_the_upstream_types() {
    let volcano = volcano_api_resource();
    assert_eq!(
        (
            volcano.group.as_str(),
            volcano.version.as_str(),
            volcano.plural.as_str()
        ),
        ("scheduling.volcano.sh", "v1beta1", "podgroups")
    );
    assert_eq!(GangScheduler::Volcano.pod_group_api_resource(), Some(volcano));
    let sp = plugins().pod_group_api_resource().unwrap();
    assert_eq!(sp.api_version, "scheduling.x-k8s.io/v1alpha1");
    let native = GangScheduler::native().pod_group_api_resource().unwrap();
    assert_eq!(
        (native.api_version.as_str(), native.plural.as_str()),
        ("scheduling.k8s.io/v1beta1", "podgroups")
    );
    assert_eq!(native, native_api_resource());
}

#[test]
fn invalid_template_quantities_are_errors() {
    let specs = BTreeMap::from([("Worker".to_owned(), replica(1, None, "one", "1Gi"))]);
    let out = desired_pod_group(
        &GangScheduler::Volcano,
        &job_ref(),
        &RunPolicy::default(),
        &specs,
        &classes(),
        None,
    );
    assert_eq!(out.err(), Some(QuantityError::Invalid("one".to_owned())));
}

#[test]
fn native_pod_group_is_a_gang_of_min_available_or_every_replica() {
    let native = GangScheduler::native();
    let pg = desired(&native, &RunPolicy::default(), None);
    assert_eq!(
        spec_of(&pg),
        &json!({"schedulingPolicy": {"gang": {"minCount": 4}}})
    );
    let types = pg.types.as_ref().unwrap();
    assert_eq!(
        (types.api_version.as_str(), types.kind.as_str()),
        ("scheduling.k8s.io/v1beta1", "PodGroup")
    );
    assert_eq!(
        pg.labels(),
        &crate::labels::job_labels("testjob-controller", "train")
    );
    assert_eq!(pg.owner_references()[0].controller, Some(true));

    // Queue, minResources and the timeout have no field in the native API.
    let run_policy = policy(SchedulingPolicy {
        min_available: Some(2),
        queue: Some("ignored".to_owned()),
        priority_class: Some("urgent".to_owned()),
        min_resources: Some(BTreeMap::from([("cpu".to_owned(), Quantity("1".to_owned()))])),
        schedule_timeout_seconds: Some(30),
    });
    let pg = desired(&native, &run_policy, None);
    assert_eq!(
        spec_of(&pg),
        &json!({"schedulingPolicy": {"gang": {"minCount": 2}}, "priorityClassName": "urgent"})
    );
    // It is the API's PodGroup, field for field.
    let mut object = serde_json::to_value(&pg).unwrap();
    object["metadata"]["name"] = json!("train");
    let typed: k8s_openapi::api::scheduling::v1beta1::PodGroup = serde_json::from_value(object).unwrap();
    let gang = typed.spec.scheduling_policy.gang.unwrap();
    assert_eq!(gang.min_count, 2);
    assert_eq!(typed.spec.priority_class_name.as_deref(), Some("urgent"));
    assert_eq!(typed.spec.workload_ref, None);
}

#[test]
fn native_keeps_the_observed_priority_class_which_is_immutable() {
    let native = GangScheduler::native();
    let wants = |class: &str| {
        policy(SchedulingPolicy {
            priority_class: Some(class.to_owned()),
            ..SchedulingPolicy::default()
        })
    };
    let observed = desired(&native, &wants("first"), None);
    let pg = desired(&native, &wants("second"), Some(&observed));
    assert_eq!(spec_of(&pg)["priorityClassName"], json!("first"));
    // Created without one: a class named later is not patched in.
    let observed = desired(&native, &RunPolicy::default(), None);
    let pg = desired(&native, &wants("later"), Some(&observed));
    assert_eq!(spec_of(&pg).get("priorityClassName"), None);
    // minCount follows the job (it is mutable).
    let lowered = policy(SchedulingPolicy {
        min_available: Some(1),
        ..SchedulingPolicy::default()
    });
    let pg = desired(&native, &lowered, Some(&observed));
    assert_eq!(spec_of(&pg)["schedulingPolicy"]["gang"]["minCount"], json!(1));
}
