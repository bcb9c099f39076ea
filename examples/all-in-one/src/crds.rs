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

/// [`all`], but MPIJob in `v2beta1` alone with no conversion webhook: for an operator run out
/// of cluster that serves no webhook (a CRD naming an absent webhook fails every `v1` request).
pub fn all_without_conversion(enabled: &BTreeSet<Scheme>) -> Vec<CustomResourceDefinition> {
    enabled
        .iter()
        .map(|s| s.crd_without_conversion())
        .chain([Framework::crd()])
        .collect()
}

/// [`all`] as one multi-document YAML stream.
pub fn yaml(enabled: &BTreeSet<Scheme>) -> kfop_runtime::Result<String> {
    to_yaml(&all(enabled))
}

/// CRDs as one multi-document YAML stream.
pub fn to_yaml(crds: &[CustomResourceDefinition]) -> kfop_runtime::Result<String> {
    let docs = crds
        .iter()
        .map(kfop_runtime::crd_yaml)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(docs.join("---\n"))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use kfop_runtime::dynamic::FRAMEWORK_LABEL;

    use super::*;

    /// The CRD the operator installs for `examples/<dir>/kfop.yaml` applied as a Framework, less
    /// the label naming that Framework.
    fn loaded(dir: &str) -> CustomResourceDefinition {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../{dir}/kfop.yaml"));
        let text = std::fs::read_to_string(&path).unwrap();
        let model = kfop_runtime::manifest::model::parse(&text, &path).unwrap();
        let mut crd = kfop_runtime::dynamic::crd(&model).unwrap();
        let labels = crd.metadata.labels.as_mut().unwrap();
        assert_eq!(labels.remove(FRAMEWORK_LABEL).as_deref(), Some(dir));
        crd.metadata.labels = None;
        crd
    }

    /// One generator behind both paths: a bundled kind's manifest loaded at run time installs
    /// the CRD its compiled crate has (the kinds whose spec has no fields of its own, which a
    /// run-time kind cannot declare; PaddleJob's `elasticPolicy` is one).
    #[test]
    fn a_manifest_loaded_at_run_time_gets_the_compiled_crd() {
        for (scheme, dir) in [(Scheme::JaxJob, "jax"), (Scheme::XgBoostJob, "xgboost")] {
            let compiled = kfop_runtime::crd_yaml(&of(scheme)).unwrap();
            let loaded = kfop_runtime::crd_yaml(&loaded(dir)).unwrap();
            assert!(
                compiled == loaded,
                "{dir}: the run-time CRD differs from the compiled one:\n{}",
                first_difference(&compiled, &loaded)
            );
        }
    }

    /// The first differing line of two YAML documents, with its number.
    fn first_difference(a: &str, b: &str) -> String {
        let (mut a, mut b) = (a.lines(), b.lines());
        for n in 1.. {
            match (a.next(), b.next()) {
                (None, None) => break,
                (x, y) if x != y => return format!("line {n}: compiled {x:?}, run time {y:?}"),
                _ => {}
            }
        }
        String::new()
    }
}
