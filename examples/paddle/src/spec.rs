// Scaffolded by kfop 0.1.0. This file is yours: `kfop gen` never changes it.
//! PaddleJob's own spec fields (Kubeflow `PaddleJobSpec`), flattened into `PaddleJobSpec`. This
//! file is yours: `kfop gen` never touches it. Use camelCase JSON names and give each field a
//! default.
use kfop_runtime::schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(crate = "kfop_runtime::schemars")]
pub struct PaddleJobExtra {
    // Kubeflow's PaddleJob controller (training-operator v1.8.1, v1.9.0) only defaults the
    // bounds in memory (apis/kubeflow.org/v1/paddlepaddle_defautls.go, setPaddleElasticPolicy):
    // no HPA, no variable, no restart limit comes of it, and its webhook checks nothing in it.
    /// Elastic bounds, kept as given: neither Kubeflow's PaddleJob controller nor kfop acts on
    /// them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elastic_policy: Option<PaddleElasticPolicy>,
}

/// Kubeflow's `PaddleElasticPolicy`, with no bounds checked: Kubeflow checks none.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(crate = "kfop_runtime::schemars")]
pub struct PaddleElasticPolicy {
    /// The lower limit of replicas the job can scale down to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<i32>,
    /// The upper limit of replicas the autoscaler may set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_replicas: Option<i32>,
    /// The limit of pod restarts in elastic mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_restarts: Option<i32>,
    /// autoscaling/v2 MetricSpecs, kept as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "kfop_runtime::api::preserve_unknown_array")]
    pub metrics: Option<Vec<kfop_runtime::serde_json::Value>>,
}
