//! The kustomize base and overlays in `deploy/kustomize/`: the objects of [`super`] with their
//! fixed defaults. They sit at the repository root next to `charts/`, the two install paths a
//! platform team points at (`kubectl apply -k <repo>//deploy/kustomize/overlays/standalone`),
//! rather than inside the crate. The CRDs are copies of the chart's: kustomize loads no file from
//! outside a kustomization's folder.
use std::collections::BTreeSet;
use std::path::PathBuf;

use super::{DeployError, GENERATED, Generated, Mode, NAMESPACE};
use crate::schemes::Scheme;

/// The folder, from the repository root.
pub const DIR: &str = "deploy/kustomize";
/// The standalone overlay's namespace (it creates it).
pub const STANDALONE_NAMESPACE: &str = "kfop-system";

fn file(path: &str, text: String) -> Generated {
    Generated {
        path: PathBuf::from(format!("{DIR}/{path}")),
        text: format!("{GENERATED}\n{text}"),
    }
}

/// The base, the ServiceMonitor component and the `standalone` and `kubeflow` overlays.
pub fn files(enabled: &BTreeSet<Scheme>) -> Result<Vec<Generated>, DeployError> {
    // The base's objects are in `kubeflow`; the overlays' `namespace:` moves them, and kustomize
    // follows with the ClusterRoleBinding's subject.
    let m = Mode::Fixed { namespace: NAMESPACE };
    let mut files = Vec::new();
    let mut crds = Vec::new();
    for crd in crate::crds::all(enabled) {
        let name = format!("crds/{}.yaml", crd.spec.names.plural);
        files.push(file(&format!("base/{name}"), kfop_runtime::crd_yaml(&crd)?));
        crds.push(name);
    }
    let objects = [
        ("rbac.yaml", super::rbac_in(m, enabled)),
        ("deployment.yaml", super::deployment(m)?),
        ("poddisruptionbudget.yaml", super::pod_disruption_budget(m)),
        ("service.yaml", super::metrics_service(m)?),
        ("webhook-service.yaml", super::webhook_service_object(m)),
        ("created-as-policy.yaml", super::created_as_policy(enabled)),
    ];
    let resources: String = crds
        .iter()
        .map(String::as_str)
        .chain(objects.iter().map(|(name, _)| *name))
        .map(|name| format!("  - {name}\n"))
        .collect();
    files.push(file(
        "base/kustomization.yaml",
        format!(
            "# The all-in-one operator: CRDs, least-privilege RBAC, Deployment, PodDisruptionBudget, \
             metrics Service.\n# Install through an overlay (standalone or kubeflow), which sets the \
             namespace.\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n{resources}"
        ),
    ));
    for (name, text) in objects {
        files.push(file(&format!("base/{name}"), text));
    }
    files.push(file(
        "components/service-monitor/kustomization.yaml",
        "# A Prometheus Operator ServiceMonitor for the metrics Service; add it to an overlay with\n\
         # `components: [../../components/service-monitor]` (needs the ServiceMonitor CRD).\n\
         apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources:\n  - servicemonitor.yaml\n"
            .to_owned(),
    ));
    files.push(file(
        "components/service-monitor/servicemonitor.yaml",
        super::service_monitor(m),
    ));
    files.push(file(
        "overlays/standalone/kustomization.yaml",
        format!(
            "# kfop on its own: everything in the `{STANDALONE_NAMESPACE}` namespace, which it creates.\n\
             apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
             namespace: {STANDALONE_NAMESPACE}\nresources:\n  - namespace.yaml\n  - ../../base\n"
        ),
    ));
    files.push(file(
        "overlays/standalone/namespace.yaml",
        format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {STANDALONE_NAMESPACE}\n"),
    ));
    files.push(file(
        "overlays/kubeflow/kustomization.yaml",
        format!(
            "# kfop in place of Kubeflow's training-operator: the `{NAMESPACE}` namespace, which Kubeflow's\n\
             # manifests create (as their training-operator overlay `kubeflow` assumes).\n\
             apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
             namespace: {NAMESPACE}\nresources:\n  - ../../base\n"
        ),
    ));
    Ok(files)
}
