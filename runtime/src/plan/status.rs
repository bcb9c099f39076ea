//! From replica counts to conditions: the success and failure policy.
use std::collections::BTreeMap;

use super::replicas::RoleCounts;
use super::{Draft, EventType, JobMetric, reason};
use crate::api::{ConditionStatus, JobConditionType, ReplicaSpec, RestartPolicy};
use crate::policy::SuccessPolicy;

pub(super) fn update(
    d: &mut Draft<'_>,
    specs: &BTreeMap<String, ReplicaSpec>,
    success: &SuccessPolicy,
    counts: &BTreeMap<String, RoleCounts>,
) {
    if d.status.is(JobConditionType::Failed) {
        return;
    }
    d.status.start_time.get_or_insert_with(|| d.now.clone());
    let deciding: Vec<&str> = success
        .roles(specs)
        .into_iter()
        .filter(|r| specs.contains_key(*r))
        .collect();
    let active = |role: &str| d.status.replica_statuses.get(role).map_or(0, |s| s.active);
    let all_succeeded = |role: &str| {
        let succeeded = d.status.replica_statuses.get(role).map_or(0, |s| s.succeeded);
        counts.get(role).is_some_and(|c| succeeded >= c.replicas)
    };
    let succeeded = !deciding.is_empty()
        && match success {
            SuccessPolicy::AllOf(role) => all_succeeded(role),
            SuccessPolicy::AnyOf(role) => counts.get(role).is_some_and(|c| !c.succeeded_indices.is_empty()),
            SuccessPolicy::IndexZeroOf(role) => {
                all_succeeded(role) || counts.get(role).is_some_and(|c| c.succeeded_indices.contains(&0))
            }
            SuccessPolicy::AllRoles => deciding.iter().all(|r| all_succeeded(r)),
        };
    // A pass that replaced failed pods reports Restarting, not Running (Kubeflow re-adds
    // Restarting after Running for the same reason).
    let restarting = counts.values().any(|c| c.restarted);
    let running = !restarting && deciding.iter().any(|r| active(r) > 0);

    let (kind, name) = (d.kind.to_owned(), d.name.clone());
    if running && !succeeded {
        d.condition(
            JobConditionType::Running,
            ConditionStatus::True,
            "Running",
            format!("{kind} {name} is running."),
        );
    }
    if succeeded {
        let msg = format!("{kind} {name} is successfully completed.");
        if d.condition(
            JobConditionType::Succeeded,
            ConditionStatus::True,
            "Succeeded",
            msg.clone(),
        ) {
            d.status.completion_time.get_or_insert_with(|| d.now.clone());
            d.event(EventType::Normal, reason(&kind, "Succeeded"), msg);
            d.plan.metrics.push(JobMetric::Succeeded);
        }
        return;
    }

    for (role, spec) in specs {
        let failed = d.status.replica_statuses.get(role).map_or(0, |s| s.failed);
        let restarted = counts.get(role).is_some_and(|c| c.restarted);
        if failed == 0 || restarted {
            continue;
        }
        if spec.restart_policy.unwrap_or(RestartPolicy::Never) == RestartPolicy::Never {
            let msg = format!("{kind} {name} is failed because {failed} {role} replica(s) failed.");
            if d.condition(
                JobConditionType::Failed,
                ConditionStatus::True,
                "Failed",
                msg.clone(),
            ) {
                d.status.completion_time.get_or_insert_with(|| d.now.clone());
                d.event(EventType::Warning, reason(&kind, "Failed"), msg);
                d.plan.metrics.push(JobMetric::Failed);
            }
            return;
        }
    }
}
