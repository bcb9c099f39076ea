//! TFJob's own spec fields (Kubeflow `TFJobSpec`), flattened into `TFJobSpec`.
use kfop_runtime::schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(crate = "kfop_runtime::schemars")]
pub struct TFJobExtra {
    /// `""` (the default: chief, or worker 0, decides) or `AllWorkers`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_policy: Option<SuccessPolicy>,
    /// Workers may come and go: TF_CONFIG uses the sparse form and worker failures do not fail
    /// the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_dynamic_worker: Option<bool>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(crate = "kfop_runtime::schemars")]
pub enum SuccessPolicy {
    #[default]
    #[serde(rename = "")]
    Default,
    AllWorkers,
}
