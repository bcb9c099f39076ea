//! Pointing a job's pods at the gang scheduler and their PodGroup (Kubeflow's
//! `DecoratePodTemplateSpec`).
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;

use super::scheduler::GangScheduler;
use crate::api::ReplicaSpec;

/// Volcano: the PodGroup a pod belongs to.
pub const VOLCANO_GROUP_NAME_ANNOTATION: &str = "scheduling.k8s.io/group-name";
/// Volcano: the task (replica type) a pod belongs to.
pub const VOLCANO_TASK_SPEC_ANNOTATION: &str = "volcano.sh/task-spec";
/// scheduler-plugins: the PodGroup a pod belongs to.
pub const SCHEDULER_PLUGINS_POD_GROUP_LABEL: &str = "scheduling.x-k8s.io/pod-group";

/// Kubeflow's warning event when a template names another scheduler.
pub const CUSTOM_SCHEDULER_REASON: &str = "SetPodTemplateSchedulerName";
pub const CUSTOM_SCHEDULER_MESSAGE: &str =
    "Another scheduler is specified when gang-scheduling is enabled and it will not be overwritten";

/// Sets the gang scheduler as `schedulerName` unless the template names one (a user's choice is
/// kept), and marks the pod as a member of the job's PodGroup: Volcano by annotations (with the
/// lower-cased role as task), scheduler-plugins by a label, native gang scheduling by
/// `spec.schedulingGroup.podGroupName` (immutable: set here, before the pod is created). A no-op
/// when gang scheduling is off.
pub fn decorate_pod_template(
    scheduler: &GangScheduler,
    job_name: &str,
    role: &str,
    template: &mut PodTemplateSpec,
) {
    let Some(scheduler_name) = scheduler.scheduler_name() else {
        return;
    };
    let spec = template.spec.get_or_insert_with(Default::default);
    if spec.scheduler_name.as_deref().is_none_or(str::is_empty) {
        spec.scheduler_name = Some(scheduler_name.to_owned());
    }
    let meta = template.metadata.get_or_insert_with(Default::default);
    match scheduler {
        GangScheduler::None => {}
        GangScheduler::Volcano => {
            let annotations = meta.annotations.get_or_insert_with(BTreeMap::new);
            annotations.insert(VOLCANO_GROUP_NAME_ANNOTATION.to_owned(), job_name.to_owned());
            annotations.insert(VOLCANO_TASK_SPEC_ANNOTATION.to_owned(), role.to_lowercase());
        }
        GangScheduler::SchedulerPlugins { .. } => {
            meta.labels
                .get_or_insert_with(BTreeMap::new)
                .insert(SCHEDULER_PLUGINS_POD_GROUP_LABEL.to_owned(), job_name.to_owned());
        }
        GangScheduler::Native { .. } => set_scheduling_group(spec, job_name),
    }
}

// `PodSpec.scheduling_group` exists from Kubernetes 1.37 on; an older build cannot select native
// gang scheduling (the flag is refused), so there is nothing to set.
k8s_openapi::k8s_if_ge_1_37! {
    fn set_scheduling_group(spec: &mut k8s_openapi::api::core::v1::PodSpec, pod_group: &str) {
        spec.scheduling_group = Some(k8s_openapi::api::core::v1::PodSchedulingGroup {
            pod_group_name: Some(pod_group.to_owned()),
        });
    }
}
k8s_openapi::k8s_if_le_1_36! {
    fn set_scheduling_group(spec: &mut k8s_openapi::api::core::v1::PodSpec, pod_group: &str) {
        let _ = (spec, pod_group);
    }
}

/// Whether any replica template names a scheduler other than the gang scheduler (Kubeflow's
/// `isCustomSchedulerSet`), which it reports with [`CUSTOM_SCHEDULER_REASON`].
pub fn custom_scheduler_set(scheduler: &GangScheduler, specs: &BTreeMap<String, ReplicaSpec>) -> bool {
    let Some(gang) = scheduler.scheduler_name() else {
        return false;
    };
    specs.values().any(|spec| {
        let name = spec
            .template
            .spec
            .as_ref()
            .and_then(|s| s.scheduler_name.as_deref());
        name.is_some_and(|n| !n.is_empty() && n != gang)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(json: serde_json::Value) -> PodTemplateSpec {
        serde_json::from_value(json).unwrap()
    }

    fn plugins() -> GangScheduler {
        GangScheduler::SchedulerPlugins {
            scheduler_name: "scheduler-plugins-scheduler".to_owned(),
        }
    }

    #[test]
    fn volcano_sets_scheduler_and_annotations() {
        let mut t = template(
            serde_json::json!({"metadata": {"annotations": {"keep": "me"}}, "spec": {"containers": []}}),
        );
        decorate_pod_template(&GangScheduler::Volcano, "job", "Worker", &mut t);
        let spec = t.spec.as_ref().unwrap();
        assert_eq!(spec.scheduler_name.as_deref(), Some("volcano"));
        let annotations = t.metadata.as_ref().unwrap().annotations.as_ref().unwrap();
        assert_eq!(annotations[VOLCANO_GROUP_NAME_ANNOTATION], "job");
        assert_eq!(annotations[VOLCANO_TASK_SPEC_ANNOTATION], "worker");
        assert_eq!(annotations["keep"], "me");
        assert!(t.metadata.as_ref().unwrap().labels.is_none());
    }

    #[test]
    fn scheduler_plugins_sets_scheduler_and_label() {
        let mut t = PodTemplateSpec::default();
        decorate_pod_template(&plugins(), "job", "Master", &mut t);
        assert_eq!(
            t.spec.as_ref().unwrap().scheduler_name.as_deref(),
            Some("scheduler-plugins-scheduler")
        );
        let meta = t.metadata.as_ref().unwrap();
        assert_eq!(
            meta.labels.as_ref().unwrap()[SCHEDULER_PLUGINS_POD_GROUP_LABEL],
            "job"
        );
        assert!(meta.annotations.is_none());
    }

    #[test]
    fn native_sets_scheduler_and_scheduling_group() {
        let mut t = template(serde_json::json!({"spec": {"containers": []}}));
        decorate_pod_template(&GangScheduler::native(), "job", "Worker", &mut t);
        let spec = serde_json::to_value(t.spec.as_ref().unwrap()).unwrap();
        assert_eq!(spec["schedulerName"], "default-scheduler");
        assert_eq!(
            spec["schedulingGroup"],
            serde_json::json!({"podGroupName": "job"})
        );
        let meta = t.metadata.as_ref().unwrap();
        assert!(meta.labels.is_none() && meta.annotations.is_none());
    }

    #[test]
    fn an_existing_scheduler_name_is_kept_but_an_empty_one_is_replaced() {
        for scheduler in [GangScheduler::Volcano, plugins(), GangScheduler::native()] {
            let mut t = template(serde_json::json!({"spec": {"schedulerName": "mine", "containers": []}}));
            decorate_pod_template(&scheduler, "job", "Worker", &mut t);
            assert_eq!(t.spec.as_ref().unwrap().scheduler_name.as_deref(), Some("mine"));

            let mut t = template(serde_json::json!({"spec": {"schedulerName": "", "containers": []}}));
            decorate_pod_template(&scheduler, "job", "Worker", &mut t);
            assert_eq!(
                t.spec.as_ref().unwrap().scheduler_name.as_deref(),
                scheduler.scheduler_name()
            );
        }
    }

    #[test]
    fn no_gang_scheduler_changes_nothing() {
        let mut t = PodTemplateSpec::default();
        decorate_pod_template(&GangScheduler::None, "job", "Worker", &mut t);
        assert_eq!(t, PodTemplateSpec::default());
    }

    #[test]
    fn custom_scheduler_is_another_non_empty_name() {
        // Kubeflow's TestIsCustomSchedulerSet.
        let with = |name: &str| {
            BTreeMap::from([(
                "Worker".to_owned(),
                serde_json::from_value::<ReplicaSpec>(
                    serde_json::json!({"template": {"spec": {"schedulerName": name, "containers": []}}}),
                )
                .unwrap(),
            )])
        };
        assert!(!custom_scheduler_set(&GangScheduler::Volcano, &BTreeMap::new()));
        assert!(!custom_scheduler_set(&GangScheduler::Volcano, &with("volcano")));
        assert!(!custom_scheduler_set(&GangScheduler::Volcano, &with("")));
        assert!(custom_scheduler_set(
            &GangScheduler::Volcano,
            &with("other-scheduler")
        ));
        assert!(custom_scheduler_set(&plugins(), &with("volcano")));
        assert!(custom_scheduler_set(&GangScheduler::native(), &with("volcano")));
        assert!(!custom_scheduler_set(
            &GangScheduler::native(),
            &with("default-scheduler")
        ));
        assert!(!custom_scheduler_set(
            &GangScheduler::None,
            &with("other-scheduler")
        ));
    }
}
