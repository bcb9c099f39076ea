// Scaffolded by kfop 0.1.0. This file is yours: `kfop gen` never changes it.
//! Framework-specific fields of `MXJobSpec`, flattened into it. This file is yours:
//! `kfop gen` never touches it. Use camelCase JSON names and give each field a default.
use kfop_runtime::api::rules;
use kfop_runtime::schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(crate = "kfop_runtime::schemars")]
// Kubeflow's MXJob validation (at reconcile): every replica runs a container named mxnet.
#[schemars(transform = rules::named_container("mxReplicaSpecs", "mxnet"))]
pub struct MXJobExtra {
    /// `MXTrain` (training) or `MXTune` (auto-tuning with the Tuner roles); Kubeflow's examples
    /// set it, and an unknown field would be dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_mode: Option<JobMode>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(crate = "kfop_runtime::schemars")]
pub enum JobMode {
    #[serde(rename = "MXTrain")]
    Train,
    #[serde(rename = "MXTune")]
    Tune,
}
