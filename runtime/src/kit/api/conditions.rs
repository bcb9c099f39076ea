//! Kubeflow's condition state machine (`pkg/util/status.go`).
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::{ConditionStatus, JobCondition, JobConditionType, JobStatus};

/// `<Kind><Base>`, e.g. `PyTorchJobRunning`.
pub fn reason(kind: &str, base: &str) -> String {
    format!("{kind}{base}")
}

/// Sets a condition with Kubeflow's semantics:
/// * once `Failed=True` is present nothing changes any more;
/// * the same type, status and reason is a no-op;
/// * a changed reason with the same status keeps the old transition time;
/// * Running and Restarting replace each other; Failed or Succeeded turn Running to False;
/// * the new condition goes last (the printer column shows the last one).
///
/// Returns whether anything changed.
pub fn set_condition(
    status: &mut JobStatus,
    type_: JobConditionType,
    condition_status: ConditionStatus,
    reason: String,
    message: String,
    now: &Time,
) -> bool {
    if status.is(JobConditionType::Failed) {
        return false;
    }
    let current = status.condition(type_);
    if current.is_some_and(|c| c.status == condition_status && c.reason == reason) {
        return false;
    }
    let transition = match current {
        Some(c) if c.status == condition_status => c.last_transition_time.clone(),
        _ => Some(now.clone()),
    };
    let mut conditions = Vec::with_capacity(status.conditions.len() + 1);
    for mut c in status.conditions.drain(..) {
        let exclusive = matches!(
            (type_, c.type_),
            (JobConditionType::Restarting, JobConditionType::Running)
                | (JobConditionType::Running, JobConditionType::Restarting)
        );
        if exclusive || c.type_ == type_ {
            continue;
        }
        if matches!(type_, JobConditionType::Failed | JobConditionType::Succeeded)
            && c.type_ == JobConditionType::Running
            && c.status != ConditionStatus::False
        {
            c.status = ConditionStatus::False;
            c.last_transition_time = Some(now.clone());
        }
        conditions.push(c);
    }
    conditions.push(JobCondition {
        type_,
        status: condition_status,
        reason,
        message,
        last_update_time: Some(now.clone()),
        last_transition_time: transition,
    });
    status.conditions = conditions;
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use JobConditionType::*;
    use k8s_openapi::jiff::Timestamp;

    fn t(secs: i64) -> Time {
        Time(Timestamp::from_second(1_700_000_000 + secs).unwrap())
    }

    fn set(status: &mut JobStatus, type_: JobConditionType, s: ConditionStatus, base: &str, at: i64) -> bool {
        set_condition(
            status,
            type_,
            s,
            reason("TFJob", base),
            format!("TFJob j is {base}."),
            &t(at),
        )
    }

    fn shape(status: &JobStatus) -> Vec<(JobConditionType, ConditionStatus)> {
        status.conditions.iter().map(|c| (c.type_, c.status)).collect()
    }

    #[test]
    fn running_and_restarting_replace_each_other_in_place_of_order() {
        let mut s = JobStatus::default();
        set(&mut s, Created, ConditionStatus::True, "Created", 0);
        set(&mut s, Running, ConditionStatus::True, "Running", 1);
        set(&mut s, Restarting, ConditionStatus::True, "Restarting", 2);
        assert_eq!(
            shape(&s),
            [
                (Created, ConditionStatus::True),
                (Restarting, ConditionStatus::True)
            ]
        );
        set(&mut s, Running, ConditionStatus::True, "Running", 3);
        assert_eq!(
            shape(&s),
            [(Created, ConditionStatus::True), (Running, ConditionStatus::True)]
        );
    }

    #[test]
    fn failed_flips_running_false_and_is_final() {
        let mut s = JobStatus::default();
        set(&mut s, Created, ConditionStatus::True, "Created", 0);
        set(&mut s, Running, ConditionStatus::True, "Running", 1);
        assert!(set(&mut s, Failed, ConditionStatus::True, "Failed", 2));
        assert_eq!(
            shape(&s),
            [
                (Created, ConditionStatus::True),
                (Running, ConditionStatus::False),
                (Failed, ConditionStatus::True)
            ]
        );
        assert!(
            !set(&mut s, Running, ConditionStatus::True, "Running", 3),
            "Failed is final"
        );
        assert!(!set(&mut s, Succeeded, ConditionStatus::True, "Succeeded", 3));
        assert_eq!(s.conditions.len(), 3);
    }

    #[test]
    fn succeeded_flips_running_false() {
        let mut s = JobStatus::default();
        set(&mut s, Running, ConditionStatus::True, "Running", 1);
        set(&mut s, Succeeded, ConditionStatus::True, "Succeeded", 2);
        assert_eq!(
            shape(&s),
            [
                (Running, ConditionStatus::False),
                (Succeeded, ConditionStatus::True)
            ]
        );
    }

    #[test]
    fn unchanged_condition_is_a_no_op_and_keeps_times() {
        let mut s = JobStatus::default();
        assert!(set(&mut s, Running, ConditionStatus::True, "Running", 1));
        assert!(!set(&mut s, Running, ConditionStatus::True, "Running", 5));
        assert_eq!(s.conditions[0].last_update_time, Some(t(1)));
    }

    #[test]
    fn new_reason_same_status_keeps_transition_time() {
        let mut s = JobStatus::default();
        set(&mut s, Running, ConditionStatus::False, "Suspended", 1);
        set(&mut s, Running, ConditionStatus::False, "Other", 5);
        assert_eq!(s.conditions[0].last_transition_time, Some(t(1)));
        assert_eq!(s.conditions[0].last_update_time, Some(t(5)));
    }

    #[test]
    fn suspend_then_resume_orders_conditions_like_kubeflow() {
        let mut s = JobStatus::default();
        set(&mut s, Created, ConditionStatus::True, "Created", 0);
        set(&mut s, Running, ConditionStatus::True, "Running", 1);
        set(&mut s, Running, ConditionStatus::False, "Suspended", 2);
        set(&mut s, Suspended, ConditionStatus::True, "Suspended", 2);
        assert_eq!(
            shape(&s),
            [
                (Created, ConditionStatus::True),
                (Running, ConditionStatus::False),
                (Suspended, ConditionStatus::True)
            ]
        );
        set(&mut s, Suspended, ConditionStatus::False, "Resumed", 3);
        set(&mut s, Running, ConditionStatus::True, "Running", 4);
        assert_eq!(
            shape(&s),
            [
                (Created, ConditionStatus::True),
                (Suspended, ConditionStatus::False),
                (Running, ConditionStatus::True)
            ]
        );
    }
}
