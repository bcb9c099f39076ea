//! The job-level policies, as pure functions: success, backoff, deadline, TTL and cleanup.
use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::{CleanPodPolicy, ReplicaSpec, RestartPolicy, RunPolicy};
use crate::child_view::ObservedPod;
use crate::info::FrameworkInfo;

/// Which replicas decide that a job has succeeded (and, while they are active, that it runs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SuccessPolicy {
    /// Every replica of the role succeeded.
    AllOf(String),
    /// Any replica of the role succeeded (elastic jobs).
    AnyOf(String),
    /// Replica 0 of the role succeeded (TFJob without a chief).
    IndexZeroOf(String),
    /// Every replica of every role succeeded.
    AllRoles,
}

impl SuccessPolicy {
    /// The master role if the job has one, else every role.
    pub fn master_else_all(info: &FrameworkInfo, specs: &BTreeMap<String, ReplicaSpec>) -> Self {
        info.roles
            .iter()
            .find(|r| r.master && specs.contains_key(&r.name))
            .map_or(Self::AllRoles, |master| Self::AllOf(master.name.clone()))
    }

    /// The first of `rules` whose role the job has, else every role (a manifest's `success`).
    pub fn first_present(rules: &[Self], specs: &BTreeMap<String, ReplicaSpec>) -> Self {
        rules
            .iter()
            .find(|rule| rule.role().is_some_and(|role| specs.contains_key(role)))
            .cloned()
            .unwrap_or(Self::AllRoles)
    }

    /// The one role this policy names, if it names one.
    pub fn role(&self) -> Option<&str> {
        match self {
            Self::AllOf(role) | Self::AnyOf(role) | Self::IndexZeroOf(role) => Some(role),
            Self::AllRoles => None,
        }
    }

    /// The roles whose replicas this policy looks at.
    pub fn roles<'a>(&'a self, specs: &'a BTreeMap<String, ReplicaSpec>) -> Vec<&'a str> {
        match self {
            Self::AllOf(role) | Self::AnyOf(role) | Self::IndexZeroOf(role) => vec![role.as_str()],
            Self::AllRoles => specs.keys().map(String::as_str).collect(),
        }
    }
}

fn millis(t: &Time) -> i64 {
    t.0.as_millisecond()
}

fn positive_duration(ms: i64) -> Option<Duration> {
    u64::try_from(ms)
        .ok()
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis)
}

/// Whether the job has been active at least `activeDeadlineSeconds` since `start`.
pub fn past_deadline(run_policy: &RunPolicy, start: Option<&Time>, now: &Time) -> bool {
    match (run_policy.active_deadline_seconds, start) {
        (Some(ads), Some(start)) => millis(now) - millis(start) >= ads.saturating_mul(1000),
        _ => false,
    }
}

/// Time left until the deadline fires, for a timed requeue (Kubeflow never requeues, #3358).
pub fn until_deadline(run_policy: &RunPolicy, start: Option<&Time>, now: &Time) -> Option<Duration> {
    let (ads, start) = (run_policy.active_deadline_seconds?, start?);
    positive_duration(millis(start) + ads.saturating_mul(1000) - millis(now))
}

/// `Some(remaining)` while a finished job waits for its TTL, `Some(ZERO)` once it expired,
/// `None` without a TTL or completion time.
pub fn until_ttl_expiry(run_policy: &RunPolicy, completion: Option<&Time>, now: &Time) -> Option<Duration> {
    let ttl = i64::from(run_policy.ttl_seconds_after_finished?);
    let expiry = millis(completion?) + ttl * 1000;
    Some(positive_duration(expiry - millis(now)).unwrap_or(Duration::ZERO))
}

/// Kubeflow's `PastBackoffLimit`: container restarts of running pods of restartable roles.
pub fn past_backoff_limit<'a>(
    limit: i32,
    specs: &BTreeMap<String, ReplicaSpec>,
    pods_of_role: impl Fn(&str) -> Vec<&'a ObservedPod>,
) -> bool {
    let mut restarts = 0;
    for (role, spec) in specs {
        if spec.restart_policy.is_none_or(|p| p == RestartPolicy::Never) {
            continue;
        }
        for pod in pods_of_role(role) {
            let Some(status) = pod.status.as_ref() else {
                continue;
            };
            if status.phase.as_deref() != Some("Running") {
                continue;
            }
            let containers = status
                .init_container_statuses
                .iter()
                .chain(status.container_statuses.iter());
            restarts += containers.flatten().map(|c| c.restart_count).sum::<i32>();
        }
    }
    if limit == 0 {
        restarts > 0
    } else {
        restarts >= limit
    }
}

/// The pods a cleanup deletes. A finished job follows `cleanPodPolicy` (Running also takes
/// Pending pods, as in Kubeflow); an unfinished one (suspend) loses all of them.
pub fn pods_to_clean<'a>(
    policy: CleanPodPolicy,
    finished: bool,
    pods: &[&'a ObservedPod],
) -> Vec<&'a ObservedPod> {
    if !finished {
        return pods.to_vec();
    }
    match policy {
        CleanPodPolicy::None => Vec::new(),
        CleanPodPolicy::All => pods.to_vec(),
        CleanPodPolicy::Running => pods
            .iter()
            .copied()
            .filter(|p| {
                matches!(
                    p.status.as_ref().and_then(|s| s.phase.as_deref()),
                    Some("Running" | "Pending")
                )
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn t(secs: i64) -> Time {
        Time(Timestamp::from_second(1_700_000_000 + secs).unwrap())
    }

    fn pod(phase: &str, restarts: i32) -> ObservedPod {
        serde_json::from_value(serde_json::json!({
            "status": {"phase": phase, "containerStatuses": [{"name": "c", "image": "i", "imageID": "",
                "ready": true, "restartCount": restarts}]}
        }))
        .unwrap()
    }

    fn run_policy(json: serde_json::Value) -> RunPolicy {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn deadline_counts_from_start_time() {
        let rp = run_policy(serde_json::json!({"activeDeadlineSeconds": 2}));
        assert!(!past_deadline(&rp, Some(&t(0)), &t(1)));
        assert!(past_deadline(&rp, Some(&t(0)), &t(2)));
        assert!(!past_deadline(&rp, None, &t(100)), "no start time, no deadline");
        assert!(!past_deadline(&RunPolicy::default(), Some(&t(0)), &t(100)));
        assert_eq!(
            until_deadline(&rp, Some(&t(0)), &t(1)),
            Some(Duration::from_secs(1))
        );
        assert_eq!(until_deadline(&rp, Some(&t(0)), &t(5)), None);
    }

    #[test]
    fn zero_deadline_is_immediately_past() {
        let rp = run_policy(serde_json::json!({"activeDeadlineSeconds": 0}));
        assert!(past_deadline(&rp, Some(&t(0)), &t(0)));
    }

    #[test]
    fn ttl_waits_then_expires() {
        let rp = run_policy(serde_json::json!({"ttlSecondsAfterFinished": 3}));
        assert_eq!(
            until_ttl_expiry(&rp, Some(&t(0)), &t(1)),
            Some(Duration::from_secs(2))
        );
        assert_eq!(until_ttl_expiry(&rp, Some(&t(0)), &t(3)), Some(Duration::ZERO));
        assert_eq!(until_ttl_expiry(&rp, None, &t(3)), None);
        assert_eq!(until_ttl_expiry(&RunPolicy::default(), Some(&t(0)), &t(3)), None);
    }

    #[test]
    fn backoff_sums_restarts_of_running_pods_of_restartable_roles() {
        let running: Vec<ObservedPod> = (0..4).map(|_| pod("Running", 1)).collect();
        let failed = [pod("Failed", 5)];
        let spec = |policy: &str| -> ReplicaSpec {
            serde_json::from_value(serde_json::json!({"restartPolicy": policy})).unwrap()
        };
        let specs = BTreeMap::from([
            ("Worker".to_owned(), spec("OnFailure")),
            ("PS".to_owned(), spec("Never")),
        ]);
        let of_role = |role: &str| -> Vec<&ObservedPod> {
            if role == "Worker" {
                running.iter().chain(failed.iter()).collect()
            } else {
                running.iter().collect()
            }
        };
        assert!(
            past_backoff_limit(4, &specs, of_role),
            "4 restarts reach a limit of 4"
        );
        assert!(
            !past_backoff_limit(5, &specs, of_role),
            "Failed pods and Never roles do not count"
        );
        assert!(past_backoff_limit(0, &specs, of_role));
        let none = |_: &str| -> Vec<&ObservedPod> { Vec::new() };
        assert!(!past_backoff_limit(0, &specs, none));
    }

    #[test]
    fn clean_pod_policy_matrix() {
        let pods = [
            pod("Running", 0),
            pod("Pending", 0),
            pod("Succeeded", 0),
            pod("Failed", 0),
        ];
        let refs: Vec<&ObservedPod> = pods.iter().collect();
        let count = |policy, finished| pods_to_clean(policy, finished, &refs).len();
        assert_eq!(count(CleanPodPolicy::All, true), 4);
        assert_eq!(count(CleanPodPolicy::Running, true), 2);
        assert_eq!(count(CleanPodPolicy::None, true), 0);
        for policy in [CleanPodPolicy::All, CleanPodPolicy::Running, CleanPodPolicy::None] {
            assert_eq!(
                count(policy, false),
                4,
                "unfinished (suspended) jobs lose every pod"
            );
        }
    }
}
