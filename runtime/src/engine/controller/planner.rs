//! A loaded framework behind an object-safe interface: the one place the controller types a job.
//! Watch, cache, queue, resync and apply see [`PackedJob`]s, so their code exists once in the
//! binary for every kind rather than once per kind (idle RSS is mostly code pages).
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{ApiResource, DynamicObject};

use crate::error::{Error, Result};
use crate::framework::{Framework, FrameworkError, FrameworkInfo, Loaded, Observed};
use crate::packed::PackedJob;
use crate::plan::Plan;

/// What the controller asks of a framework, without its job type.
pub trait Planner: Send + Sync + 'static {
    fn info(&self) -> &FrameworkInfo;
    /// The job kind's API resource.
    fn kind(&self) -> &ApiResource;
    /// Unpacks `job` and plans one reconcile of it.
    fn plan(&self, job: &PackedJob, observed: &Observed, now: &Time) -> Result<Plan>;
    /// [`Framework::prepare_object`].
    fn prepare_object(&self, object: &mut DynamicObject) -> Result<(), FrameworkError>;
}

impl<F: Framework> Planner for Loaded<F> {
    fn info(&self) -> &FrameworkInfo {
        Loaded::info(self)
    }

    fn kind(&self) -> &ApiResource {
        Loaded::kind(self)
    }

    fn plan(&self, packed: &PackedJob, observed: &Observed, now: &Time) -> Result<Plan> {
        let name = || format!("{}/{}", packed.namespace().unwrap_or_default(), packed.name_any());
        let job: F::Job = packed
            .unpack()
            .map_err(|source| Error::Unpack { job: name(), source })?;
        crate::plan::plan(self, &job, observed, now).map_err(|source| Error::Plan { job: name(), source })
    }

    fn prepare_object(&self, object: &mut DynamicObject) -> Result<(), FrameworkError> {
        self.code().prepare_object(object)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::testing::{TestFramework, TestJob};

    #[test]
    fn a_cached_job_its_type_cannot_read_is_an_error_naming_it() {
        let typed = TestFramework::default().loaded();
        assert_eq!(typed.kind().kind, "TestJob");
        let json = serde_json::json!({
            "apiVersion": "test.kfop.dev/v1",
            "kind": "TestJob",
            "metadata": { "name": "odd", "namespace": "ns", "uid": "uid-odd" },
            "spec": { "replicaSpecs": "not a map" },
        });
        let packed: PackedJob = serde_json::from_value(json).unwrap();
        let error = typed
            .plan(&packed, &Observed::default(), &Time(Timestamp::now()))
            .unwrap_err();
        assert!(
            matches!(&error, Error::Unpack { job, .. } if job == "ns/odd"),
            "{error}"
        );
        assert!(packed.unpack::<TestJob>().is_err());
    }
}
