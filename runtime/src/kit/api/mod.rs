//! The API types every training job shares, with Kubeflow's JSON names
//! (`kubeflow.org/v1` common types).
mod conditions;
mod replica;
pub mod rules;
mod run_policy;
mod schema;
mod status;

pub use conditions::{reason, set_condition};
pub use replica::{ReplicaSpec, RestartPolicy};
pub use run_policy::{CleanPodPolicy, RunPolicy, SchedulingPolicy};
pub use schema::{preserve_unknown_array, preserve_unknown_object};
pub use status::{ConditionStatus, JobCondition, JobConditionType, JobStatus, ReplicaStatus};
