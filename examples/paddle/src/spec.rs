// Scaffolded by kfop 0.1.0. This file is yours: `kfop gen` never changes it.
//! Framework-specific fields of `PaddleJobSpec`, flattened into it. This file is yours:
//! `kfop gen` never touches it. Use camelCase JSON names and give each field a default.
use kfop_runtime::schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(crate = "kfop_runtime::schemars")]
pub struct PaddleJobExtra {}
