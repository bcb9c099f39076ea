//! training-operator v1.8.1's MPIJob, `kubeflow.org/v1`, served beside mpi-operator's
//! `v2beta1` by the same CRD (v2beta1 stored; [`crate::convert`] moves objects between them).
//! The fields are training-operator's: `slotsPerWorker`, the top-level `cleanPodPolicy` (which
//! its controller reads when `runPolicy.cleanPodPolicy` is unset), `runPolicy`,
//! `mpiReplicaSpecs` and `mainContainer`. Like v1.8.1 the API sets no spec defaults.
use std::collections::BTreeMap;

use kfop_runtime::api::{CleanPodPolicy, ReplicaSpec, RunPolicy};

#[kfop_runtime::training_job(
    group = "kubeflow.org",
    version = "v1",
    kind = "MPIJob",
    plural = "mpijobs",
    controller = "mpijob-controller",
    framework = "mpi",
    container = "mpi",
    scale = "Worker",
    role(
        name = "Launcher",
        master,
        restart_policy = "Never",
        min_replicas = 1,
        max_replicas = 1
    ),
    role(name = "Worker", restart_policy = "Never")
)]
pub struct MPIJobSpec {
    /// Slots per worker in the hostfile (the controller reads unset as 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slots_per_worker: Option<i32>,
    /// Which pods to delete once the job ends; `runPolicy.cleanPodPolicy` wins when both are set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clean_pod_policy: Option<CleanPodPolicy>,
    #[serde(default)]
    pub run_policy: RunPolicy,
    #[kfop(replica_specs)]
    pub mpi_replica_specs: BTreeMap<String, ReplicaSpec>,
    /// The container `kubectl exec` runs MPI processes in (its `--container`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub main_container: String,
}
