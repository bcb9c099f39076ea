//! The CRDs of the bundled kinds.
use std::collections::BTreeSet;

use kfop_runtime::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use kfop_runtime::dynamic::Framework;
use kfop_runtime::kube::CustomResourceExt;

use crate::schemes::Scheme;

/// The CRD of `scheme`.
pub fn of(scheme: Scheme) -> CustomResourceDefinition {
    scheme.crd()
}

/// Every enabled kind's CRD, then the `Framework` CRD (kinds registered at run time).
pub fn all(enabled: &BTreeSet<Scheme>) -> Vec<CustomResourceDefinition> {
    enabled.iter().map(|s| of(*s)).chain([Framework::crd()]).collect()
}

/// [`all`] as one multi-document YAML stream.
pub fn yaml(enabled: &BTreeSet<Scheme>) -> kfop_runtime::Result<String> {
    let docs = all(enabled)
        .iter()
        .map(kfop_runtime::crd_yaml)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(docs.join("---\n"))
}
