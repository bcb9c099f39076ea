{{ header }}
//! Framework-specific fields of `{{ m.kind }}Spec`, flattened into it. This file is yours:
//! `kfop gen` never touches it. Use camelCase JSON names and give each field a default.
use kfop_runtime::schemars::JsonSchema;
use kfop_runtime::serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(crate = "kfop_runtime::serde", rename_all = "camelCase")]
#[schemars(crate = "kfop_runtime::schemars")]
pub struct {{ m.kind }}Extra {}
