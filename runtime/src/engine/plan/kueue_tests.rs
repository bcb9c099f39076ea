//! The planner under Kueue pod groups: pods marked as the group, the job waiting with Kueue's
//! reason until the group's Workload is admitted, with no cluster.
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::DynamicObject;
use serde_json::json;

use super::*;
use crate::api::JobConditionType as C;
use crate::testing::{TestFramework, TestJob, job, replica};

fn t(secs: i64) -> Time {
    Time(Timestamp::from_second(1_700_000_000 + secs).unwrap())
}

fn queued() -> TestJob {
    let mut j = job(
        "ns",
        "tj",
        &[("Master", replica(1, None)), ("Worker", replica(2, None))],
    );
    j.metadata.uid = Some("0123abcd-0000".to_owned());
    j.metadata.labels = Some([(gang::QUEUE_NAME_LABEL.to_owned(), "team".to_owned())].into());
    j
}

fn workload(conditions: serde_json::Value) -> Arc<DynamicObject> {
    Arc::new(
        serde_json::from_value(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "tj-0123abcd", "namespace": "ns"},
            "status": {"conditions": conditions},
        }))
        .unwrap(),
    )
}

fn observed(workload: Option<Arc<DynamicObject>>) -> Observed {
    Observed {
        scheduling: Scheduling {
            kueue_pod_groups: true,
            kueue_workload: workload,
            ..Scheduling::default()
        },
        ..Observed::default()
    }
}

fn run(job: &TestJob, observed: &Observed) -> Plan {
    plan(&TestFramework::default().loaded(), job, observed, &t(0)).unwrap()
}

fn running(plan: &Plan) -> Option<&crate::api::JobCondition> {
    plan.status.as_ref()?.condition(C::Running)
}

#[test]
fn pods_are_marked_as_the_group_and_the_job_waits_until_the_workload_exists() {
    let plan = run(&queued(), &observed(None));
    assert_eq!(plan.create_pods.len(), 3);
    for pod in &plan.create_pods {
        let labels = pod.metadata.labels.as_ref().unwrap();
        assert_eq!(labels[gang::POD_GROUP_NAME_LABEL], "tj-0123abcd");
        assert_eq!(labels[gang::QUEUE_NAME_LABEL], "team");
        let annotations = pod.metadata.annotations.as_ref().unwrap();
        assert_eq!(annotations[gang::POD_GROUP_TOTAL_COUNT_ANNOTATION], "3");
        assert_eq!(
            annotations[gang::ROLE_HASH_ANNOTATION],
            labels[crate::labels::REPLICA_TYPE]
        );
    }
    let waiting = running(&plan).unwrap();
    assert_eq!(waiting.status, crate::api::ConditionStatus::False);
    assert_eq!(waiting.reason, "TestJobWaitingForAdmission");
    assert!(
        waiting.message.contains("LocalQueue team")
            && waiting.message.contains("create Workload tj-0123abcd"),
        "{}",
        waiting.message
    );
    assert_eq!(plan.requeue_after, Some(KUEUE_WAIT_REFRESH));
}

#[test]
fn the_wait_message_follows_the_workload_and_admission_ends_it() {
    let mut j = queued();
    let first = run(&j, &observed(None));
    j.status = first.status.clone();
    let why = workload(
        json!([{"type": "QuotaReserved", "status": "False", "message": "LocalQueue team doesn't exist"}]),
    );
    let second = run(&j, &observed(Some(why)));
    let condition = running(&second).unwrap();
    assert!(
        condition.message.ends_with("LocalQueue team doesn't exist"),
        "{}",
        condition.message
    );
    // The same status and reason: the condition keeps its transition time, with Kueue's words.
    assert_eq!(
        condition.last_transition_time,
        running(&first).unwrap().last_transition_time
    );

    j.status = second.status.clone();
    let admitted = workload(json!([{"type": "Admitted", "status": "True"}]));
    let third = run(&j, &observed(Some(admitted)));
    assert!(
        third
            .status
            .as_ref()
            .and_then(|s| s.condition(C::Running))
            .is_none_or(|c| !c.reason.ends_with("WaitingForAdmission")),
        "{:?}",
        third.status
    );
    assert_ne!(third.requeue_after, Some(KUEUE_WAIT_REFRESH));
}

#[test]
fn a_job_naming_no_queue_or_pod_groups_off_is_left_as_it_was() {
    let mut unlabelled = queued();
    unlabelled.metadata.labels = None;
    let plan = run(&unlabelled, &observed(None));
    assert!(running(&plan).is_none());
    assert!(plan.create_pods.iter().all(|p| {
        !p.metadata
            .labels
            .as_ref()
            .unwrap()
            .contains_key(gang::POD_GROUP_NAME_LABEL)
    }));
    let off = run(&queued(), &Observed::default());
    assert!(running(&off).is_none());
    assert_ne!(off.requeue_after, Some(Duration::from_secs(10)));
}

#[test]
fn a_finished_job_marks_its_pods_not_retriable_and_deleted_pods_lose_kueue_s_finalizer() {
    let mut j = queued();
    let first = run(&j, &observed(None));
    let mut pods: Vec<Arc<ObservedPod>> = first
        .create_pods
        .iter()
        .map(|p| {
            let mut p = p.clone();
            p.metadata.uid = Some(format!("uid-{}", p.metadata.name.clone().unwrap_or_default()));
            p.metadata.finalizers = Some(vec![gang::POD_FINALIZER.to_owned()]);
            Arc::new(ObservedPod::from(p))
        })
        .collect();
    let mut deleting = (*pods[0]).clone();
    deleting.metadata.deletion_timestamp = Some(t(1));
    pods[0] = Arc::new(deleting);
    let admitted = workload(json!([{"type": "Admitted", "status": "True"}]));
    let mut seen = observed(Some(admitted));
    seen.pods = pods;

    let running = run(&j, &seen);
    assert_eq!(running.patch_pods.len(), 1, "{:?}", running.patch_pods);
    assert_eq!(
        running.patch_pods[0].1["metadata"]["$deleteFromPrimitiveList/finalizers"],
        json!([gang::POD_FINALIZER])
    );

    let mut status = crate::api::JobStatus::default();
    set_condition(
        &mut status,
        C::Succeeded,
        crate::api::ConditionStatus::True,
        "TestJobSucceeded".to_owned(),
        "done".to_owned(),
        &t(2),
    );
    j.status = Some(status);
    let finished = run(&j, &seen);
    let marked: Vec<&str> = finished
        .patch_pods
        .iter()
        .filter(|(_, p)| p["metadata"]["annotations"][gang::RETRIABLE_IN_GROUP_ANNOTATION] == "false")
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(marked.len(), 2, "{:?}", finished.patch_pods);
}
