// Scaffolded by kfop 0.1.0. This file is yours: `kfop gen` never changes it.
//! MPIJob's own spec fields (mpi-operator's `kubeflow.org/v2beta1` `MPIJobSpec`), flattened into
//! `MPIJobSpec`, with mpi-operator's defaults.
use kfop_runtime::api::rules::Validation;
use kfop_runtime::schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where the SSH key pair is mounted unless the job says otherwise.
pub const ROOT_SSH_PATH: &str = "/root/.ssh";

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(crate = "kfop_runtime::schemars")]
// mpi-operator's validation (the Launcher it requires is `required: true` in kfop.yaml): at least
// one worker once a Worker spec is given (its count defaults to 0), and restart policy Never or
// OnFailure (the launcher is a batch Job).
#[schemars(transform = Validation::new(
    "self.mpiReplicaSpecs.all(k, k.lowerAscii() != 'worker' || (has(self.mpiReplicaSpecs[k].replicas) && self.mpiReplicaSpecs[k].replicas >= 1))",
    "spec.mpiReplicaSpecs.Worker.replicas must be at least 1: set it to 1 or more, or remove the Worker replica spec",
).at(".mpiReplicaSpecs"))]
#[schemars(transform = Validation::new(
    "self.mpiReplicaSpecs.all(k, !has(self.mpiReplicaSpecs[k].restartPolicy) || self.mpiReplicaSpecs[k].restartPolicy in ['Never', 'OnFailure'])",
    "spec.mpiReplicaSpecs[*].restartPolicy must be Never or OnFailure: use one of those, or remove it for the default",
).at(".mpiReplicaSpecs"))]
pub struct MPIJobExtra {
    /// Slots per worker in the hostfile (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub slots_per_worker: Option<i32>,
    /// The launcher also runs MPI processes: it is listed first in the hostfile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_launcher_as_worker: Option<bool>,
    /// Where the SSH Secret is mounted (default `/root/.ssh`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_auth_mount_path: Option<String>,
    /// When the launcher Job is created (default AtStartup).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launcher_creation_policy: Option<LauncherCreationPolicy>,
    /// The MPI implementation: hostfile format and launcher environment (default OpenMPI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mpi_implementation: Option<MpiImplementation>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(crate = "kfop_runtime::schemars")]
pub enum LauncherCreationPolicy {
    #[default]
    AtStartup,
    /// Only once every worker pod is Ready.
    WaitForWorkersReady,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(crate = "kfop_runtime::schemars")]
pub enum MpiImplementation {
    #[default]
    OpenMPI,
    Intel,
    #[serde(rename = "MPICH")]
    Mpich,
}

impl MPIJobExtra {
    pub fn slots(&self) -> i32 {
        self.slots_per_worker.unwrap_or(1)
    }

    pub fn launcher_as_worker(&self) -> bool {
        self.run_launcher_as_worker.unwrap_or(false)
    }

    pub fn ssh_path(&self) -> &str {
        match self.ssh_auth_mount_path.as_deref() {
            None | Some("") => ROOT_SSH_PATH,
            Some(path) => path,
        }
    }

    pub fn creation_policy(&self) -> LauncherCreationPolicy {
        self.launcher_creation_policy.unwrap_or_default()
    }

    pub fn implementation(&self) -> MpiImplementation {
        self.mpi_implementation.unwrap_or_default()
    }
}
