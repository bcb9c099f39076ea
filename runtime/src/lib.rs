//! kfop-runtime: the engine every kfop training-job operator calls into.
//!
//! * [`api`]: the shared API types with Kubeflow's JSON names.
//! * [`manifest`]: a framework as data, `kfop.yaml` loaded into a [`Manifest`].
//! * [`framework`]: a framework's code ([`Framework`], every method defaulted), its job kind
//!   ([`TrainingJob`]), and the two joined ([`Loaded`]): what the engine runs, compiled in or
//!   applied at run time.
//! * [`plan`]: the pure planner, `(framework, job, observed, now) -> Plan`.
//! * [`gang`]: gang scheduling (Volcano / scheduler-plugins PodGroups), pure.
//! * [`cel_rule`]: success and failure rules written in CEL (a manifest's `rule: cel`).
//!
//! It re-exports `kube`, `k8s_openapi`, `schemars`, `serde`, `serde_json` and the
//! [`training_job`] attribute, so an operator needs this one dependency.

mod engine;
mod kit;
mod process;

// The layers are folders; their modules keep the crate's flat paths (`kfop_runtime::plan`, ...).
use engine::{cache, error};
pub use engine::{
    child_index, client, compact, controller, metrics, packed, plan, relist, server, webhook, wire,
};
pub use kit::{
    api, cel_rule, child_view, defaults, env, framework, gang, info, labels, manifest, policy, status_rule,
};
#[cfg(any(test, feature = "testing"))]
pub use process::testing;
pub use process::{dynamic, malloc, manager, operator};

pub use error::{Error, Result};
pub use framework::{
    Framework, FrameworkError, FrameworkInfo, FrameworkPort, JobContext, JobPhase, Loaded, ObservedPod,
    ObservedService, PodContext, Role, TrainingJob,
};
pub use k8s_openapi;
pub use kfop_derive::training_job;
pub use kube;
pub use manifest::{LoadError, Manifest, MasterRule};
pub use plan::{DesiredObject, StatusUpdate};
pub use schemars;
pub use serde;
pub use serde_json;
pub use status_rule::{CelStatus, RuleWording, StatusRule};

/// Paths the code `#[training_job]` generates needs in the user's module.
#[doc(hidden)]
pub mod __private {
    // kube-derive's root schema with CEL rules names `schemars::Schema` unqualified; a glob
    // import of this makes it resolve without clashing with a `schemars` the user imports.
    pub use schemars;
    // The schema transform `#[training_job]` emits calls the shared rule generator.
    pub use kfop_crd_rules as crd_rules;
}

/// A CRD as YAML with an `@generated` header, as operators print and commit it.
pub fn crd_yaml(
    crd: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
) -> Result<String> {
    let yaml = serde_saphyr::to_string(crd).map_err(|source| Error::CrdYaml {
        kind: crd.spec.names.kind.clone(),
        source,
    })?;
    Ok(format!(
        "# @generated from the {} type by its operator's `crd` command. Do not edit.\n{yaml}",
        crd.spec.names.kind
    ))
}
