// Scaffolded by kfop 0.1.0. This file is yours: `kfop gen` never changes it.
//! Framework-specific fields of `MXJobSpec`, flattened into it. This file is yours:
//! `kfop gen` never touches it. Use camelCase JSON names and give each field a default.
use kfop_runtime::api::rules;
use kfop_runtime::schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(crate = "kfop_runtime::schemars")]
// Kubeflow's MXJob CRD requires jobMode (it has no default).
#[schemars(transform = rules::Validation::new(
    "has(self.jobMode)",
    "spec.jobMode is required: set it to MXTrain or MXTune",
).at(".jobMode").required())]
pub struct MXJobExtra {
    /// `MXTrain` (training) or `MXTune` (auto-tuning with the Tuner roles); required at admission
    /// as in Kubeflow, optional here so an object stored before that still reads.
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
