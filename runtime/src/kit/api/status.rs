use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The observed state of a training job (Kubeflow's `JobStatus`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobStatus {
    /// Observed conditions, oldest first; the last one is the job's current state.
    #[serde(default)]
    pub conditions: Vec<JobCondition>,
    /// Pod counts per replica type.
    #[serde(default)]
    pub replica_statuses: BTreeMap<String, ReplicaStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reconcile_time: Option<Time>,
}

/// Pod counts of one replica type. Zero counts are written out (Kubeflow omits them): status is
/// stored by merge patch, where an omitted field keeps its old value.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaStatus {
    #[serde(default)]
    pub active: i32,
    #[serde(default)]
    pub succeeded: i32,
    #[serde(default)]
    pub failed: i32,
    /// Deprecated by Kubeflow in favour of `selector`; kept for readers of old statuses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// The label selector of this replica type's pods, in string form (for the scale subresource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
}

/// One observed condition of a job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobCondition {
    #[serde(rename = "type")]
    pub type_: JobConditionType,
    pub status: ConditionStatus,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

/// The condition types of a training job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum JobConditionType {
    Created,
    Running,
    Restarting,
    Succeeded,
    Suspended,
    Failed,
}

impl JobConditionType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "Created",
            Self::Running => "Running",
            Self::Restarting => "Restarting",
            Self::Succeeded => "Succeeded",
            Self::Suspended => "Suspended",
            Self::Failed => "Failed",
        }
    }
}

/// `True`, `False` or `Unknown`, as in every Kubernetes condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

impl JobStatus {
    /// The condition of `type_`, if present.
    pub fn condition(&self, type_: JobConditionType) -> Option<&JobCondition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }

    /// Whether the condition of `type_` is present with status True.
    pub fn is(&self, type_: JobConditionType) -> bool {
        self.condition(type_)
            .is_some_and(|c| c.status == ConditionStatus::True)
    }

    /// Succeeded or Failed: a finished job is never started again.
    pub fn is_finished(&self) -> bool {
        self.is(JobConditionType::Succeeded) || self.is(JobConditionType::Failed)
    }
}
