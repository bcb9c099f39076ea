//! The parts of a kind's declaration its rules depend on, whether it comes from
//! `#[training_job(...)]` or from a manifest loaded at run time.

/// A job kind, as its rules see it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shape {
    /// The JSON name of the replica-specs map, e.g. `pytorchReplicaSpecs`.
    pub replica_specs: String,
    /// The JSON name of the run policy, `runPolicy` for every Kubeflow kind.
    pub run_policy: String,
    /// The container every replica must run, by name, as Kubeflow's v1 webhooks require (they
    /// take the Service ports and the exit code from it); `None` when any will do.
    pub required_container: Option<String>,
    pub roles: Vec<RoleShape>,
}

/// One role (replica type).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoleShape {
    /// Canonical CamelCase name, e.g. `Worker`.
    pub name: String,
    /// A master role: a job has at most one of its kind's master roles.
    pub master: bool,
    /// Every job must have a replica spec for this role.
    pub required: bool,
    /// The replica count a spec without one gets; `None` is 1.
    pub default_replicas: Option<i32>,
    pub min_replicas: Option<i32>,
    pub max_replicas: Option<i32>,
}

impl Shape {
    /// The role names as prose, e.g. `Chief, PS, Worker`.
    pub(crate) fn role_names(&self) -> String {
        let names: Vec<&str> = self.roles.iter().map(|r| r.name.as_str()).collect();
        names.join(", ")
    }
}
