//! `kfop-operator adopt`: labels the children Kubeflow's MPI operators made so that kfop sees
//! them, before kfop takes over their jobs. kfop watches a job's children by label: pods with
//! `training.kubeflow.org/operator-name`, other kinds with the operator name of the framework
//! owning them, and it tells a pod's role and index by `replica-type` and `replica-index`.
//! mpi-operator labels its launcher Job, ConfigMap, Secret and Service with `app: <job>` only
//! and its workers with `job-role` but no `replica-type`; training-operator's MPIJob v1 labels
//! its launcher pod without an index and its ConfigMap, ServiceAccount, Role and RoleBinding
//! without the operator name. Unlabelled, kfop would not see them: it would try to create them
//! again (refused, the names are taken) and never read the launcher's end. Labels only are
//! added (never changed or removed), so nothing is recreated and Kubeflow, if handed back,
//! reads the objects as before.
use std::collections::BTreeMap;

use kfop_runtime::k8s_openapi::api::batch::v1::Job;
use kfop_runtime::k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service, ServiceAccount};
use kfop_runtime::k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kfop_runtime::kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kfop_runtime::kube::{Client, ResourceExt};
use kfop_runtime::labels::{JOB_NAME, JOB_ROLE, OPERATOR_NAME, REPLICA_INDEX, REPLICA_TYPE};
use kfop_runtime::serde_json::{Map, Value, json};

/// The operator name kfop's MPIJob controller labels its children with, in both versions.
pub const MPI_OPERATOR_NAME: &str = "mpi-operator";

#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub struct AdoptError {
    what: String,
    source: kfop_runtime::kube::Error,
}

/// Objects labelled, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Adopted {
    pub by_kind: BTreeMap<String, usize>,
}

impl std::fmt::Display for Adopted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let total: usize = self.by_kind.values().sum();
        let kinds: Vec<String> = self.by_kind.iter().map(|(k, n)| format!("{n} {k}")).collect();
        if kinds.is_empty() {
            write!(
                f,
                "adopted 0 objects: every child of an MPIJob is labelled already"
            )
        } else {
            write!(f, "adopted {total} objects of MPIJobs ({})", kinds.join(", "))
        }
    }
}

/// Labels every child of an MPIJob in `namespace` (all when `None`) that kfop would not see.
#[tracing::instrument(skip(client))]
pub async fn adopt(client: &Client, namespace: Option<&str>) -> Result<Adopted, AdoptError> {
    let kinds = [
        ApiResource::erase::<Pod>(&()),
        ApiResource::erase::<Job>(&()),
        ApiResource::erase::<ConfigMap>(&()),
        ApiResource::erase::<Secret>(&()),
        ApiResource::erase::<Service>(&()),
        ApiResource::erase::<ServiceAccount>(&()),
        ApiResource::erase::<Role>(&()),
        ApiResource::erase::<RoleBinding>(&()),
    ];
    let mut adopted = Adopted::default();
    for kind in &kinds {
        let all: Api<DynamicObject> = match namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, kind),
            None => Api::all_with(client.clone(), kind),
        };
        let objects = all
            .list(&ListParams::default())
            .await
            .map_err(|source| AdoptError {
                what: format!("listing {}", kind.plural),
                source,
            })?;
        for object in objects {
            let Some(labels) = missing_labels(&kind.kind, &object) else {
                continue;
            };
            let ns = object.namespace().unwrap_or_default();
            let name = object.name_any();
            let patch = json!({ "metadata": { "labels": labels } });
            Api::<DynamicObject>::namespaced_with(client.clone(), &ns, kind)
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|source| AdoptError {
                    what: format!("labelling {} {ns}/{name}", kind.kind),
                    source,
                })?;
            *adopted.by_kind.entry(kind.kind.clone()).or_default() += 1;
        }
    }
    Ok(adopted)
}

/// The labels `object` (of `kind`) lacks for kfop to see it as a child of its MPIJob, if it is
/// one (an MPIJob is its controller) and lacks any.
fn missing_labels(kind: &str, object: &DynamicObject) -> Option<Map<String, Value>> {
    let owner = object.owner_references().iter().find(|o| {
        o.controller == Some(true)
            && o.kind == "MPIJob"
            && o.api_version.split('/').next() == Some(mpi_operator::convert::GROUP)
    })?;
    let labels = object.labels();
    let mut missing = Map::new();
    let mut add = |key: &str, value: &str| {
        if !labels.contains_key(key) {
            missing.insert(key.to_owned(), Value::from(value));
        }
    };
    add(JOB_NAME, &owner.name);
    if kind == "Pod" {
        // mpi-operator's workers and training-operator's v1 launcher: role from job-role or the
        // name, index 0 for the one launcher.
        let role = labels
            .get(REPLICA_TYPE)
            .or_else(|| labels.get(JOB_ROLE))
            .cloned()
            .unwrap_or_default();
        if !role.is_empty() {
            add(REPLICA_TYPE, &role);
        }
        if role == "launcher" && object.name_any() == format!("{}-launcher", owner.name) {
            add(REPLICA_INDEX, "0");
        }
    }
    // Pods are watched by the label's presence (a pod keeps Kubeflow's value), other kinds by
    // kfop's MPIJob controller name.
    add(OPERATOR_NAME, MPI_OPERATOR_NAME);
    (!missing.is_empty()).then_some(missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(labels: Value, owner_kind: &str) -> DynamicObject {
        kfop_runtime::serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "pi-launcher", "namespace": "ns", "labels": labels,
                "ownerReferences": [{
                    "apiVersion": "kubeflow.org/v1", "kind": owner_kind, "name": "pi", "uid": "u",
                    "controller": true,
                }],
            },
        }))
        .unwrap()
    }

    #[test]
    fn training_operators_v1_launcher_gets_a_type_and_index_and_keeps_its_operator_name() {
        let launcher = object(
            json!({ JOB_NAME: "pi", JOB_ROLE: "launcher", OPERATOR_NAME: "mpijob-controller" }),
            "MPIJob",
        );
        let missing = missing_labels("Pod", &launcher).unwrap();
        assert_eq!(
            Value::Object(missing),
            json!({ REPLICA_TYPE: "launcher", REPLICA_INDEX: "0" })
        );
    }

    #[test]
    fn only_children_of_mpijobs_missing_a_label_are_touched() {
        let labelled = object(
            json!({ JOB_NAME: "pi", REPLICA_TYPE: "worker", OPERATOR_NAME: "mpi-operator" }),
            "MPIJob",
        );
        assert_eq!(missing_labels("Pod", &labelled), None);
        assert_eq!(missing_labels("Pod", &object(json!({}), "PyTorchJob")), None);
        let launcher_job = object(json!({ "app": "pi" }), "MPIJob");
        assert_eq!(
            missing_labels("Job", &launcher_job).map(Value::Object),
            Some(json!({ JOB_NAME: "pi", OPERATOR_NAME: MPI_OPERATOR_NAME }))
        );
    }
}
