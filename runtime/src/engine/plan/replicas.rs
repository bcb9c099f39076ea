//! Per replica type: create missing pods and services by index, delete those past the replica
//! count, replace failed pods the restart policy retries, and count pods by phase.
use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use super::build::{build_pod, build_service};
use super::{ChildRef, Draft, EventType, JobMetric, PlanError, is_active, phase, reason};
use crate::api::{ConditionStatus, JobConditionType, ReplicaSpec, ReplicaStatus, RestartPolicy};
use crate::framework::{Framework, Loaded, ObservedPod, RoleCounts};
use crate::info::default_or_first;
use crate::labels::{self, REPLICA_INDEX, REPLICA_TYPE};

/// Pods whose replica-type label is `role` (compared lower-case, as Kubeflow labels them).
pub(super) fn pods_of_role<'a>(pods: &[&'a ObservedPod], role: &str) -> Vec<&'a ObservedPod> {
    let role = role.to_lowercase();
    pods.iter()
        .copied()
        .filter(|p| p.labels().get(REPLICA_TYPE) == Some(&role))
        .collect()
}

fn index_of(obj: &impl ResourceExt) -> Option<i32> {
    obj.labels().get(REPLICA_INDEX)?.parse().ok()
}

pub(super) fn reconcile<F: Framework>(
    framework: &Loaded<F>,
    job: &F::Job,
    specs: &BTreeMap<String, ReplicaSpec>,
    observed: &super::Observed,
    d: &mut Draft<'_>,
) -> Result<BTreeMap<String, RoleCounts>, PlanError> {
    let info = framework.info();
    let all_pods: Vec<&ObservedPod> = observed.pods.iter().map(AsRef::as_ref).collect();
    let mut counts = BTreeMap::new();
    // When the job last resumed: pods deleted by its suspension may still be terminating.
    let resumed: Option<Time> = d
        .status
        .condition(JobConditionType::Suspended)
        .filter(|c| c.status == ConditionStatus::False)
        .and_then(|c| c.last_transition_time.clone());
    let resumed = resumed.as_ref();
    for (role, spec) in specs {
        let replicas = spec.replicas();
        let policy = spec.restart_policy.unwrap_or(RestartPolicy::Never);
        let mut status = ReplicaStatus {
            selector: Some(labels::selector_string(&role_selector(
                &info.controller_name,
                &d.name,
                role,
            ))),
            ..ReplicaStatus::default()
        };
        let mut role_counts = RoleCounts {
            replicas,
            ..RoleCounts::default()
        };

        let mut by_index: BTreeMap<i32, Vec<&ObservedPod>> = BTreeMap::new();
        for pod in pods_of_role(&all_pods, role) {
            match index_of(pod) {
                Some(index) if index >= 0 => by_index.entry(index).or_default().push(pod),
                _ => tracing::warn!(pod = %pod.name_any(), "pod without a valid replica index ignored"),
            }
        }
        let creates_pods = framework.code_for(job).creates_pods(job, role);
        let size = if creates_pods {
            by_index
                .keys()
                .next_back()
                .map_or(0, |max| max.saturating_add(1))
                .max(replicas)
        } else {
            0
        };
        for index in 0..size {
            match by_index.get(&index).map(Vec::as_slice).unwrap_or_default() {
                [] if index < replicas => {
                    let built = build_pod(framework, job, specs, (role, index), &observed.scheduling)?;
                    if built.overrode_restart_policy {
                        d.event(
                            EventType::Warning,
                            "SetPodTemplateRestartPolicy".to_owned(),
                            "Restart policy in pod template will be overwritten by restart policy in replica spec"
                                .to_owned(),
                        );
                    }
                    d.plan.create_pods.push(built.pod);
                }
                [] => {}
                [pod] => {
                    if index >= replicas && pod.metadata.deletion_timestamp.is_none() {
                        d.plan.delete_pods.push(ChildRef::of(*pod));
                    }
                    if phase(pod) == "Failed" {
                        on_failed_pod(d, pod, role, policy, &info.default_container, &mut role_counts);
                    }
                    // Scaled away or stopped by the suspension: deleted on purpose.
                    let removed = index >= replicas || deleted_by_suspension(pod, resumed);
                    count(
                        &mut status,
                        &mut role_counts,
                        pod,
                        (index, removed),
                        &info.default_container,
                    );
                }
                more => tracing::warn!(
                    role,
                    index,
                    pods = more.len(),
                    "more than one pod for one replica"
                ),
            }
        }

        if framework.code().creates_services() {
            let services: Vec<_> = observed
                .services
                .iter()
                .filter(|s| s.labels().get(REPLICA_TYPE) == Some(&role.to_lowercase()))
                .collect();
            let existing: BTreeSet<i32> = services.iter().filter_map(|s| index_of(s.as_ref())).collect();
            for index in (0..replicas).filter(|i| !existing.contains(i)) {
                d.plan.create_services.push(build_service(
                    info,
                    job,
                    framework.owner_reference(job),
                    spec,
                    role,
                    index,
                ));
            }
            for service in services
                .iter()
                .filter(|s| index_of(s.as_ref()).is_none_or(|i| i >= replicas))
            {
                d.plan.delete_services.push(ChildRef::of(service.as_ref()));
            }
        }
        d.status.replica_statuses.insert(role.clone(), status);
        counts.insert(role.clone(), role_counts);
    }
    Ok(counts)
}

/// A failed pod is replaced when its role's restart policy retries its exit code; a
/// non-retryable exit code under the ExitCode policy fails the job at once.
fn on_failed_pod(
    d: &mut Draft<'_>,
    pod: &ObservedPod,
    role: &str,
    policy: RestartPolicy,
    default_container: &str,
    counts: &mut RoleCounts,
) {
    let exit_code = exit_code(pod, default_container);
    if policy.retries(exit_code) {
        counts.restarted = true;
        let msg = format!("job {} is restarting because {role} replica(s) failed.", d.name);
        // Deleted already (by an earlier pass, or by this process before a restart): the restart
        // is under way and was announced and counted then; what is left is to wait for the pod
        // to go (`left_terminating` says so if it does not).
        let deleting = pod.metadata.deletion_timestamp.is_some();
        let already_deleting = deleting || d.plan.delete_pods.iter().any(|c| c.name == pod.name_any());
        if !already_deleting {
            d.plan.delete_pods.push(ChildRef::of(pod));
        }
        if !deleting {
            d.event(EventType::Warning, reason(d.kind, "Restarting"), msg.clone());
            d.plan.metrics.push(JobMetric::Restarted);
        }
        d.condition(
            JobConditionType::Restarting,
            ConditionStatus::True,
            "Restarting",
            msg,
        );
    } else if policy == RestartPolicy::ExitCode {
        let msg = format!(
            "job \"{}\" is failing because \"{role}\" replica(s) failed.",
            d.name
        );
        d.event(EventType::Warning, reason(d.kind, "Failed"), msg.clone());
        if d.condition(JobConditionType::Failed, ConditionStatus::True, "Failed", msg) {
            d.status.completion_time.get_or_insert_with(|| d.now.clone());
            d.plan.metrics.push(JobMetric::Failed);
        }
    }
}

/// The exit code of the default container (else the first) if it terminated.
fn exit_code(pod: &ObservedPod, default_container: &str) -> Option<i32> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    let status = statuses.get(default_or_first(
        default_container,
        statuses.iter().map(|s| s.name.as_str()),
    ))?;
    Some(status.state.as_ref()?.terminated.as_ref()?.exit_code)
}

/// Kubeflow's `updateJobReplicaStatuses`: a running pod that is being deleted counts as
/// failed, so pods lost with their node are not counted active. A pod `removed` on purpose (by
/// a scale-down, or by the job's suspension) counts as nothing while it terminates: nothing
/// failed. Kubeflow counts a scaled-away pod as failed when a pass happens to see it
/// terminating, so its outcome there depends on timing (a declared difference).
fn count(
    status: &mut ReplicaStatus,
    counts: &mut RoleCounts,
    pod: &ObservedPod,
    (index, removed): (i32, bool),
    default_container: &str,
) {
    match phase(pod) {
        "Running" if is_active(pod) => status.active += 1,
        "Running" if removed => {}
        "Running" | "Failed" => status.failed += 1,
        "Succeeded" => {
            status.succeeded += 1;
            if exit_code(pod, default_container) == Some(0) {
                counts.succeeded_indices.insert(index);
            }
        }
        _ => {}
    }
}

/// Whether `pod`'s deletion was asked for no later than `resumed` (a second's slack: times are
/// whole seconds): its deletion timestamp less its grace period.
fn deleted_by_suspension(pod: &ObservedPod, resumed: Option<&Time>) -> bool {
    let (Some(resumed), Some(gone_by)) = (resumed, pod.metadata.deletion_timestamp.as_ref()) else {
        return false;
    };
    let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(0);
    let asked = gone_by.0.as_second().saturating_sub(grace);
    asked <= resumed.0.as_second().saturating_add(1)
}

fn role_selector(controller: &str, job: &str, role: &str) -> BTreeMap<String, String> {
    let mut labels = labels::job_labels(controller, job);
    labels.insert(REPLICA_TYPE.to_owned(), role.to_lowercase());
    labels
}
