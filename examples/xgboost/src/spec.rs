// Scaffolded by kfop 0.1.0. This file is yours: `kfop gen` never changes it.
//! Framework-specific fields of `XGBoostJobSpec`, flattened into it. This file is yours:
//! `kfop gen` never touches it. Use camelCase JSON names and give each field a default.
use kfop_runtime::api::rules;
use kfop_runtime::schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(crate = "kfop_runtime::schemars")]
// Kubeflow's webhook: every replica runs a container named after the framework.
#[schemars(transform = rules::named_container("xgbReplicaSpecs", "xgboost"))]
// It also requires the Master, which holds the tracker (MASTER_ADDR).
#[schemars(transform = rules::required_role("xgbReplicaSpecs", "Master"))]
pub struct XGBoostJobExtra {}
