//! Third-party CRDs that kfop talks to, trimmed but valid, for integration tests: pass them to
//! [`crate::TestEnv::install_crds`]. The YAML lives in `testenv/crds/`.
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use crate::{Error, Result};

const VOLCANO_POD_GROUP: (&str, &str) = (
    "scheduling.volcano.sh_podgroups.yaml",
    include_str!("../crds/scheduling.volcano.sh_podgroups.yaml"),
);
const SCHEDULER_PLUGINS_POD_GROUP: (&str, &str) = (
    "scheduling.x-k8s.io_podgroups.yaml",
    include_str!("../crds/scheduling.x-k8s.io_podgroups.yaml"),
);

/// Volcano's `scheduling.volcano.sh/v1beta1` PodGroup.
pub fn volcano_pod_group() -> Result<CustomResourceDefinition> {
    parse(VOLCANO_POD_GROUP)
}

/// scheduler-plugins' `scheduling.x-k8s.io/v1alpha1` PodGroup.
pub fn scheduler_plugins_pod_group() -> Result<CustomResourceDefinition> {
    parse(SCHEDULER_PLUGINS_POD_GROUP)
}

/// Both PodGroup CRDs (the gang schedulers kfop supports).
pub fn pod_groups() -> Result<Vec<CustomResourceDefinition>> {
    Ok(vec![volcano_pod_group()?, scheduler_plugins_pod_group()?])
}

fn parse((file, yaml): (&'static str, &str)) -> Result<CustomResourceDefinition> {
    serde_saphyr::from_str(yaml).map_err(|e| Error::Crd {
        file,
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_crds_parse_with_upstream_names() {
        let crds = pod_groups().unwrap();
        let names: Vec<_> = crds.iter().map(|c| c.metadata.name.as_deref().unwrap()).collect();
        assert_eq!(
            names,
            ["podgroups.scheduling.volcano.sh", "podgroups.scheduling.x-k8s.io"]
        );
        for crd in &crds {
            assert_eq!(crd.spec.scope, "Namespaced");
            assert_eq!(crd.spec.names.plural, "podgroups");
            assert_eq!(crd.spec.names.kind, "PodGroup");
            let version = &crd.spec.versions[0];
            assert!(version.subresources.as_ref().unwrap().status.is_some());
        }
    }
}
