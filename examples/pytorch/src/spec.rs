//! PyTorchJob's own spec fields (Kubeflow `PyTorchJobSpec`), flattened into `PyTorchJobSpec`.
use kfop_runtime::api::rules::Validation;
use kfop_runtime::schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(crate = "kfop_runtime::schemars")]
// Kubeflow's webhook forbids the deprecated field together with its replacement.
#[schemars(transform = Validation::new(
    "!has(self.nprocPerNode) || !has(self.elasticPolicy) || !has(self.elasticPolicy.nProcPerNode)",
    "spec.elasticPolicy.nProcPerNode must not be used with spec.nprocPerNode: remove the deprecated spec.elasticPolicy.nProcPerNode",
).at(".elasticPolicy.nProcPerNode").forbidden())]
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
#[schemars(transform = Validation::new(
    "!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",
    "spec.elasticPolicy.minReplicas must not be above spec.elasticPolicy.maxReplicas: lower minReplicas or raise maxReplicas",
).at(".minReplicas"))]
pub struct ElasticPolicy {
    /// torchrun's and the HPA's lower bound on workers: at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub min_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
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
    #[schemars(range(min = 0))]
    pub max_restarts: Option<i32>,
    /// autoscaling/v2 MetricSpecs for the HPA, kept as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "kfop_runtime::api::preserve_unknown_array")]
    pub metrics: Option<Vec<kfop_runtime::serde_json::Value>>,
}

impl ElasticPolicy {
    /// The (min, max) worker bounds after Kubeflow's defaulting (`setElasticPolicy`): a missing
    /// bound takes the other's value, and with neither both are the Worker replicas (`None`
    /// when there is no Worker role to read them from).
    pub fn bounds(&self, workers: Option<i32>) -> Option<(i32, i32)> {
        match (self.min_replicas, self.max_replicas) {
            (Some(min), Some(max)) => Some((min, max)),
            (Some(n), None) | (None, Some(n)) => Some((n, n)),
            (None, None) => workers.map(|n| (n, n)),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(crate = "kfop_runtime::schemars")]
pub struct RdzvConf {
    pub key: String,
    pub value: String,
}
