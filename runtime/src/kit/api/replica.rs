use k8s_openapi::api::core::v1::PodTemplateSpec;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One replica type of a job: how many pods, from which template, restarted how.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSpec {
    /// Desired number of replicas; defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// The pod template of this replica type.
    // Boxed (a plain comment: doc comments become the CRD's description): a map's node holds
    // room for eleven values inline, and a `PodTemplateSpec` is about 2.4 KB before any of its
    // content, so unboxed the replica specs of every cached job cost about 27 KB.
    #[serde(default)]
    #[schemars(schema_with = "crate::api::preserve_unknown_object")]
    pub template: Box<PodTemplateSpec>,
    /// Restart policy for all replicas of this type; defaults per framework.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<RestartPolicy>,
}

impl ReplicaSpec {
    /// The replica count with Kubeflow's default of 1.
    pub fn replicas(&self) -> i32 {
        self.replicas.unwrap_or(1)
    }

    /// The replicas of every role together; saturating, as admission bounds no count from above.
    pub fn total<'a>(specs: impl IntoIterator<Item = &'a Self>) -> i32 {
        specs
            .into_iter()
            .fold(0, |sum, spec| sum.saturating_add(spec.replicas()))
    }
}

/// When a failed replica is restarted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum RestartPolicy {
    Always,
    OnFailure,
    Never,
    /// Restart only on retryable exit codes (128 and above, i.e. killed by a signal); 1-127 are
    /// permanent failures.
    ExitCode,
}

impl RestartPolicy {
    /// The pod-level restartPolicy: `ExitCode` is decided by the operator, so the pod says Never.
    pub fn pod_restart_policy(self) -> &'static str {
        match self {
            Self::Always => "Always",
            Self::OnFailure => "OnFailure",
            Self::Never | Self::ExitCode => "Never",
        }
    }

    /// Whether a pod that failed with `exit_code` is replaced (Kubeflow's `IsRetryableExitCode`).
    /// Under ExitCode a failed pod without a terminated container (rejected by the kubelet, e.g.
    /// OutOfcpu, or lost before it started) is retried: Kubeflow reads its exit code as 0xbeef.
    pub fn retries(self, exit_code: Option<i32>) -> bool {
        match self {
            Self::Always | Self::OnFailure => true,
            Self::Never => false,
            Self::ExitCode => exit_code.is_none_or(|c| c >= 128),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_code_policy_retries_signals_only() {
        assert!(!RestartPolicy::ExitCode.retries(Some(1)));
        assert!(!RestartPolicy::ExitCode.retries(Some(127)));
        assert!(RestartPolicy::ExitCode.retries(Some(128)));
        assert!(RestartPolicy::ExitCode.retries(Some(137)));
        assert!(
            RestartPolicy::ExitCode.retries(None),
            "no exit code: Kubeflow's 0xbeef"
        );
        assert!(RestartPolicy::OnFailure.retries(Some(1)));
        assert!(RestartPolicy::Always.retries(None));
        assert!(!RestartPolicy::Never.retries(Some(137)));
    }

    #[test]
    fn pod_restart_policy_maps_exit_code_to_never() {
        assert_eq!(RestartPolicy::ExitCode.pod_restart_policy(), "Never");
        assert_eq!(RestartPolicy::Never.pod_restart_policy(), "Never");
        assert_eq!(RestartPolicy::Always.pod_restart_policy(), "Always");
        assert_eq!(RestartPolicy::OnFailure.pod_restart_policy(), "OnFailure");
    }

    #[test]
    fn replicas_default_to_one() {
        assert_eq!(ReplicaSpec::default().replicas(), 1);
        let spec: ReplicaSpec = serde_json::from_str(r#"{"replicas":3,"restartPolicy":"ExitCode"}"#).unwrap();
        assert_eq!(
            (spec.replicas(), spec.restart_policy),
            (3, Some(RestartPolicy::ExitCode))
        );
    }
}
