//! The static facts of a framework: its names, default container and port, and roles. A leaf:
//! defaulting, environment templates and policies read it without knowing the framework.
use crate::api::RestartPolicy;

/// A replica type (role) a framework knows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Role {
    /// Canonical CamelCase name, e.g. `Worker`; user keys are normalised to it case-insensitively.
    pub name: String,
    pub default_restart_policy: RestartPolicy,
    /// The replica count when the spec gives none.
    pub default_replicas: i32,
    /// Whether this role's pods carry `training.kubeflow.org/job-role=master` and decide success.
    pub master: bool,
}

impl Role {
    pub fn new(name: impl Into<String>, default_restart_policy: RestartPolicy) -> Self {
        Self {
            name: name.into(),
            default_restart_policy,
            default_replicas: 1,
            master: false,
        }
    }

    #[must_use]
    pub fn master(mut self) -> Self {
        self.master = true;
        self
    }

    #[must_use]
    pub fn default_replicas(mut self, replicas: i32) -> Self {
        self.default_replicas = replicas;
        self
    }
}

/// A framework's default port: a named container port, e.g. `pytorchjob-port` 23456.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameworkPort {
    pub name: String,
    pub number: i32,
}

impl FrameworkPort {
    pub fn new(name: impl Into<String>, number: i32) -> Self {
        Self {
            name: name.into(),
            number,
        }
    }
}

/// The static facts about a framework.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameworkInfo {
    /// Event source and `training.kubeflow.org/operator-name` label, e.g. `pytorchjob-controller`.
    pub controller_name: String,
    /// Metrics label, e.g. `pytorch`.
    pub framework_name: String,
    /// The container that gets the default port and whose ports the headless services expose.
    pub default_container: String,
    /// The port added to the default container; `None` adds none (mpi-operator's processes
    /// talk over SSH).
    pub default_port: Option<FrameworkPort>,
    /// Known roles, in the order they are reconciled and reported.
    pub roles: Vec<Role>,
}

/// The index of the container named `default`, else 0 (the first): how Kubeflow picks the
/// container that gets the port and environment, and whose exit code counts.
pub fn default_or_first<'a>(default: &str, names: impl IntoIterator<Item = &'a str>) -> usize {
    names.into_iter().position(|n| n == default).unwrap_or(0)
}

impl FrameworkInfo {
    /// [`default_or_first`] with this framework's default container.
    pub fn default_container_index<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> usize {
        default_or_first(&self.default_container, names)
    }

    pub fn role(&self, name: &str) -> Option<&Role> {
        self.roles.iter().find(|r| r.name.eq_ignore_ascii_case(name))
    }
}
