//! Whether a job's pods wait for its PodGroup (Kubeflow's `DelayPodCreationDueToPodGroup`).
use kube::api::DynamicObject;

use super::scheduler::GangScheduler;

/// Volcano PodGroup phases that mean "not admitted yet".
const VOLCANO_WAITING_PHASES: [&str; 2] = ["", "Pending"];

/// Pods are not created before the cache shows the job's PodGroup (a pod naming a missing
/// group is left pending by the coscheduling plugin; Kubeflow's sync returns early the same
/// way). Under Volcano they also wait while its `status.phase` is empty or `Pending` (Volcano
/// has not admitted the gang to its queue yet); scheduler-plugins gates the rest in the
/// scheduler itself, and so does kube-scheduler under native gang scheduling. Native pods could
/// be created before their group (kube-scheduler waits for it), but waiting for it costs one
/// watch event and means a cluster that does not serve `scheduling.k8s.io/v1beta1` PodGroups
/// (the `GenericWorkload` gate off, which also drops `schedulingGroup` from pods) gets no pods,
/// rather than pods scheduled one by one; a native group being deleted counts as none.
pub fn holds_pods(scheduler: &GangScheduler, observed_pod_group: Option<&DynamicObject>) -> bool {
    match scheduler {
        GangScheduler::None => false,
        GangScheduler::SchedulerPlugins { .. } => observed_pod_group.is_none(),
        // A native PodGroup being deleted keeps its protection finalizer while any unfinished
        // pod names it: pods created for it now would keep it from ever going, and it must go
        // before the job's next one can be made. (A group this process deleted is hidden from
        // the planner until it is gone anyway; this covers one deleted by someone else, or
        // before an operator restart.)
        GangScheduler::Native { .. } => {
            observed_pod_group.is_none_or(|pg| pg.metadata.deletion_timestamp.is_some())
        }
        GangScheduler::Volcano => observed_pod_group.is_none_or(|pg| {
            let phase = pg
                .data
                .get("status")
                .and_then(|s| s.get("phase"))
                .and_then(|p| p.as_str())
                .unwrap_or_default();
            VOLCANO_WAITING_PHASES.contains(&phase)
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gang::volcano_api_resource;

    fn pod_group(status: serde_json::Value) -> DynamicObject {
        DynamicObject::new("job", &volcano_api_resource())
            .data(serde_json::json!({"spec": {}, "status": status}))
    }

    #[test]
    fn volcano_holds_until_admitted() {
        let volcano = GangScheduler::Volcano;
        assert!(holds_pods(&volcano, None));
        assert!(holds_pods(&volcano, Some(&pod_group(serde_json::Value::Null))));
        assert!(holds_pods(&volcano, Some(&pod_group(serde_json::json!({})))));
        assert!(holds_pods(
            &volcano,
            Some(&pod_group(serde_json::json!({"phase": ""})))
        ));
        assert!(holds_pods(
            &volcano,
            Some(&pod_group(serde_json::json!({"phase": "Pending"})))
        ));
        for admitted in ["Inqueue", "Running", "Unknown", "Completed"] {
            let pg = pod_group(serde_json::json!({ "phase": admitted }));
            assert!(!holds_pods(&volcano, Some(&pg)), "{admitted}");
        }
    }

    #[test]
    fn scheduler_plugins_holds_only_until_the_group_exists_and_none_never() {
        let plugins = GangScheduler::SchedulerPlugins {
            scheduler_name: "s".to_owned(),
        };
        assert!(holds_pods(&plugins, None));
        assert!(!holds_pods(
            &plugins,
            Some(&pod_group(serde_json::json!({"phase": "Pending"})))
        ));
        assert!(!holds_pods(&GangScheduler::None, None));
        assert!(holds_pods(&GangScheduler::native(), None));
        assert!(!holds_pods(
            &GangScheduler::native(),
            Some(&pod_group(serde_json::json!({})))
        ));
        let mut terminating = pod_group(serde_json::json!({}));
        terminating.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
        assert!(holds_pods(&GangScheduler::native(), Some(&terminating)));
        assert!(!holds_pods(&plugins, Some(&terminating)));
    }
}
