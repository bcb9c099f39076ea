//! The CRDs of the bundled kinds.
use std::collections::BTreeSet;

use kfop_runtime::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use crate::schemes::Scheme;

/// The CRD of `scheme`.
pub fn of(scheme: Scheme) -> CustomResourceDefinition {
    scheme.crd()
}

/// Every enabled CRD as one multi-document YAML stream.
pub fn yaml(enabled: &BTreeSet<Scheme>) -> kfop_runtime::Result<String> {
    let docs = enabled
        .iter()
        .map(|s| kfop_runtime::crd_yaml(&of(*s)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(docs.join("---\n"))
}
