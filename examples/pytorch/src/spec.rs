//! PyTorchJob's own spec fields (Kubeflow `PyTorchJobSpec`), flattened into `PyTorchJobSpec`.
use kfop_runtime::schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(crate = "kfop_runtime::schemars")]
pub struct PyTorchJobExtra {
    /// Processes per node: `auto` (the default), `cpu`, `gpu` or a number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nproc_per_node: Option<String>,
    /// Elastic training with torchrun's rendezvous.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elastic_policy: Option<ElasticPolicy>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(crate = "kfop_runtime::schemars")]
pub struct ElasticPolicy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdzv_backend: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdzv_port: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdzv_host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdzv_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdzv_conf: Option<Vec<RdzvConf>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standalone: Option<bool>,
    /// Deprecated by Kubeflow in favour of `spec.nprocPerNode`.
    #[serde(default, rename = "nProcPerNode", skip_serializing_if = "Option::is_none")]
    pub n_proc_per_node: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_restarts: Option<i32>,
    /// autoscaling/v2 MetricSpecs for the HPA, kept as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "kfop_runtime::api::preserve_unknown_array")]
    pub metrics: Option<Vec<kfop_runtime::serde_json::Value>>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(crate = "kfop_runtime::schemars")]
pub struct RdzvConf {
    pub key: String,
    pub value: String,
}
