//! A job of a kind registered at run time: the shared fields typed (replica specs, run policy,
//! status), everything else kept as the user wrote it.
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::LazyLock;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::ApiResource;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::api::{JobStatus, ReplicaSpec, RunPolicy};
use crate::framework::TrainingJob;
use crate::info::FrameworkInfo;

/// What a run-time job kind is to kube's typed APIs: its API resource. The default (empty) value
/// exists only because compiled kinds use `()`; a loaded run-time framework always says its own.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct JobKind(pub Option<ApiResource>);

impl crate::framework::JobType for JobKind {
    fn of_kind(kind: &ApiResource) -> Self {
        Self(Some(kind.clone()))
    }
}

impl JobKind {
    fn get(&self) -> Cow<'_, ApiResource> {
        match &self.0 {
            Some(resource) => Cow::Borrowed(resource),
            None => Cow::Owned(ApiResource {
                group: String::new(),
                version: String::new(),
                api_version: String::new(),
                kind: String::new(),
                plural: String::new(),
            }),
        }
    }
}

/// A job of a run-time kind.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RuntimeJob {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: RuntimeJobSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<JobStatus>,
}

/// The spec: the replica specs map (the one field named `<something>ReplicaSpecs`, as every
/// Kubeflow kind names it), the run policy, and the rest as given.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RuntimeJobSpec {
    pub replica_specs_field: String,
    pub replica_specs: BTreeMap<String, ReplicaSpec>,
    pub run_policy: RunPolicy,
    pub rest: serde_json::Map<String, serde_json::Value>,
}

const RUN_POLICY: &str = "runPolicy";

impl<'de> Deserialize<'de> for RuntimeJobSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut rest = serde_json::Map::<String, serde_json::Value>::deserialize(deserializer)?;
        let run_policy = match rest.remove(RUN_POLICY) {
            Some(value) => {
                serde_json::from_value(value).map_err(|e| D::Error::custom(format!("spec.runPolicy: {e}")))?
            }
            None => RunPolicy::default(),
        };
        let field = rest.keys().find(|k| k.ends_with("ReplicaSpecs")).cloned();
        let (replica_specs_field, replica_specs) = match field {
            Some(field) => {
                let value = rest.remove(&field).unwrap_or_default();
                let specs = serde_json::from_value(value)
                    .map_err(|e| D::Error::custom(format!("spec.{field}: {e}")))?;
                (field, specs)
            }
            None => (String::new(), BTreeMap::new()),
        };
        Ok(Self {
            replica_specs_field,
            replica_specs,
            run_policy,
            rest,
        })
    }
}

impl Serialize for RuntimeJobSpec {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeMap};
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in &self.rest {
            map.serialize_entry(key, value)?;
        }
        map.serialize_entry(RUN_POLICY, &self.run_policy)?;
        if !self.replica_specs_field.is_empty() {
            map.serialize_entry(&self.replica_specs_field, &self.replica_specs)?;
        } else if !self.replica_specs.is_empty() {
            return Err(S::Error::custom("replica specs without a field name"));
        }
        map.end()
    }
}

impl Resource for RuntimeJob {
    type DynamicType = JobKind;
    type Scope = NamespaceResourceScope;

    fn kind(dt: &JobKind) -> Cow<'_, str> {
        Cow::Owned(dt.get().kind.clone())
    }

    fn group(dt: &JobKind) -> Cow<'_, str> {
        Cow::Owned(dt.get().group.clone())
    }

    fn version(dt: &JobKind) -> Cow<'_, str> {
        Cow::Owned(dt.get().version.clone())
    }

    fn api_version(dt: &JobKind) -> Cow<'_, str> {
        Cow::Owned(dt.get().api_version.clone())
    }

    fn plural(dt: &JobKind) -> Cow<'_, str> {
        Cow::Owned(dt.get().plural.clone())
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl TrainingJob for RuntimeJob {
    /// A run-time kind's facts are its framework's ([`crate::Framework::info`]); the engine asks
    /// the framework, never the type, so this is an empty placeholder.
    fn framework_info() -> &'static FrameworkInfo {
        static NONE: LazyLock<FrameworkInfo> = LazyLock::new(|| FrameworkInfo {
            controller_name: String::new(),
            framework_name: String::new(),
            default_container: String::new(),
            default_port: None,
            roles: Vec::new(),
        });
        &NONE
    }

    fn replica_specs(&self) -> &BTreeMap<String, ReplicaSpec> {
        &self.spec.replica_specs
    }

    fn run_policy(&self) -> &RunPolicy {
        &self.spec.run_policy
    }

    fn status(&self) -> Option<&JobStatus> {
        self.status.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_replica_specs_field_and_the_rest_round_trip() {
        let value = json!({
            "metadata": {"name": "a", "namespace": "ns"},
            "spec": {
                "fooReplicaSpecs": {"Worker": {"replicas": 2, "template": {}}},
                "runPolicy": {"backoffLimit": 3},
                "elastic": {"max": 4},
            },
        });
        let job: RuntimeJob = serde_json::from_value(value).unwrap();
        assert_eq!(job.spec.replica_specs_field, "fooReplicaSpecs");
        assert_eq!(job.replica_specs()["Worker"].replicas, Some(2));
        assert_eq!(job.run_policy().backoff_limit, Some(3));
        let back = serde_json::to_value(&job).unwrap();
        assert_eq!(back["spec"]["elastic"], json!({"max": 4}));
        assert_eq!(back["spec"]["fooReplicaSpecs"]["Worker"]["replicas"], 2);
    }

    #[test]
    fn a_bad_replica_spec_names_its_field() {
        let value = json!({"metadata": {}, "spec": {"fooReplicaSpecs": {"Worker": {"replicas": "two"}}}});
        let error = serde_json::from_value::<RuntimeJob>(value)
            .unwrap_err()
            .to_string();
        assert!(error.contains("spec.fooReplicaSpecs"), "{error}");
    }

    #[test]
    fn the_kind_comes_from_the_dynamic_type() {
        let kind = JobKind(Some(ApiResource {
            group: "example.com".into(),
            version: "v1".into(),
            api_version: "example.com/v1".into(),
            kind: "FooJob".into(),
            plural: "foojobs".into(),
        }));
        assert_eq!(
            RuntimeJob::url_path(&kind, Some("ns")),
            "/apis/example.com/v1/namespaces/ns/foojobs"
        );
        assert_eq!(RuntimeJob::kind(&kind), "FooJob");
    }
}
