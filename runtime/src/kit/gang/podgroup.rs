//! The desired PodGroup of a job, per scheduler (Kubeflow's `SyncPodGroup` spec fill).
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{ApiResource, DynamicObject};
use kube::{Resource, ResourceExt};
use serde::{Deserialize, Serialize};

use super::min_resources::calc_min_resources;
use super::quantity::QuantityError;
use super::scheduler::GangScheduler;
use crate::api::{ReplicaSpec, RunPolicy};
use crate::labels;

/// Volcano's queue when the job names none.
pub const DEFAULT_QUEUE: &str = "default";

/// `scheduling.volcano.sh/v1beta1` PodGroup.
pub fn volcano_api_resource() -> ApiResource {
    api_resource("scheduling.volcano.sh", "v1beta1")
}

/// `scheduling.x-k8s.io/v1alpha1` PodGroup (scheduler-plugins coscheduling).
pub fn scheduler_plugins_api_resource() -> ApiResource {
    api_resource("scheduling.x-k8s.io", "v1alpha1")
}

/// `scheduling.k8s.io/v1beta1` PodGroup (Kubernetes' native gang scheduling, 1.37).
pub fn native_api_resource() -> ApiResource {
    api_resource("scheduling.k8s.io", "v1beta1")
}

fn api_resource(group: &str, version: &str) -> ApiResource {
    ApiResource {
        group: group.to_owned(),
        version: version.to_owned(),
        api_version: format!("{group}/{version}"),
        kind: "PodGroup".to_owned(),
        plural: "podgroups".to_owned(),
    }
}

impl GangScheduler {
    /// The PodGroup type this scheduler reads; `None` when gang scheduling is off.
    pub fn pod_group_api_resource(&self) -> Option<ApiResource> {
        match self {
            Self::None => None,
            Self::Volcano => Some(volcano_api_resource()),
            Self::SchedulerPlugins { .. } => Some(scheduler_plugins_api_resource()),
            Self::Native { .. } => Some(native_api_resource()),
        }
    }
}

/// What a PodGroup takes from its job: identity for the name, owner reference and labels.
#[derive(Clone, Debug, PartialEq)]
pub struct JobRef {
    pub name: String,
    pub namespace: Option<String>,
    pub annotations: BTreeMap<String, String>,
    /// The operator's controller name, for Kubeflow's job labels.
    pub controller_name: String,
    pub owner: OwnerReference,
}

impl JobRef {
    /// The job's identity, and the job as controlling owner.
    pub fn of<K: Resource>(job: &K, job_type: &K::DynamicType, controller_name: &str) -> Self {
        Self {
            name: job.name_any(),
            namespace: job.namespace(),
            annotations: job.annotations().clone(),
            controller_name: controller_name.to_owned(),
            owner: labels::owner_reference(job, job_type),
        }
    }
}

/// Volcano's `PodGroupSpec`, the fields Kubeflow sets.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolcanoSpec {
    #[serde(default)]
    pub min_member: i32,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub queue: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub priority_class_name: String,
    /// Always written, `{}` when nothing is requested: Volcano's field is a pointer that
    /// Kubeflow always sets.
    #[serde(default)]
    pub min_resources: BTreeMap<String, Quantity>,
}

/// scheduler-plugins' `PodGroupSpec`, the fields Kubeflow sets.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SchedulerPluginsSpec {
    #[serde(default)]
    pub min_member: i32,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub min_resources: BTreeMap<String, Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_timeout_seconds: Option<i32>,
}

/// Kubernetes' `scheduling.k8s.io/v1beta1` `PodGroupSpec`, the fields kfop sets: a gang policy
/// and the priority class. No `workloadRef`: it is optional, and kube-scheduler reads only the
/// PodGroup (a Workload would be a template no controller instantiates here). The API server's
/// priority admission fills `priority` from `priorityClassName` (and refuses a PodGroup naming
/// a PriorityClass that does not exist); both are immutable, `minCount` is not.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NativeSpec {
    pub min_count: i32,
    pub priority_class_name: String,
}

/// The spec of a job's PodGroup, for the scheduler in use.
#[derive(Clone, Debug, PartialEq)]
pub enum PodGroupSpec {
    Volcano(VolcanoSpec),
    SchedulerPlugins(SchedulerPluginsSpec),
    Native(NativeSpec),
}

impl PodGroupSpec {
    /// Kubeflow's spec: `minMember` = `minAvailable` else all replicas; `minResources` as given
    /// else computed; Volcano's queue defaults to `default`. Native: `minCount` is that same
    /// count, and the priority class Volcano's PodGroup would name. `None` when gang scheduling
    /// is off.
    /// `specs` are the defaulted replica specs; `priority_classes` maps PriorityClass name to value.
    pub fn for_job(
        scheduler: &GangScheduler,
        run_policy: &RunPolicy,
        specs: &BTreeMap<String, ReplicaSpec>,
        priority_classes: &BTreeMap<String, i32>,
    ) -> Result<Option<Self>, QuantityError> {
        if !scheduler.is_enabled() {
            return Ok(None);
        }
        let policy = run_policy.scheduling_policy.clone().unwrap_or_default();
        let min_member = policy
            .min_available
            .unwrap_or_else(|| ReplicaSpec::total(specs.values()));
        if let GangScheduler::Native { .. } = scheduler {
            return Ok(Some(Self::Native(NativeSpec {
                min_count: min_member,
                priority_class_name: policy.priority_class.unwrap_or_default(),
            })));
        }
        let min_resources = match policy.min_resources {
            Some(given) => given,
            None => calc_min_resources(min_member, specs, priority_classes)?,
        };
        Ok(Some(match scheduler {
            GangScheduler::Volcano => Self::Volcano(VolcanoSpec {
                min_member,
                queue: policy
                    .queue
                    .filter(|q| !q.is_empty())
                    .unwrap_or_else(|| DEFAULT_QUEUE.to_owned()),
                priority_class_name: policy.priority_class.unwrap_or_default(),
                min_resources,
            }),
            _ => Self::SchedulerPlugins(SchedulerPluginsSpec {
                min_member,
                min_resources,
                schedule_timeout_seconds: policy.schedule_timeout_seconds,
            }),
        }))
    }

    /// Volcano keeps the queue an existing PodGroup already has (it may have been admitted to
    /// it), and a native PodGroup its priority class (immutable: a patch changing it would be
    /// refused on every pass); call with the observed PodGroup before building the desired one.
    pub fn keep_observed_queue(&mut self, observed: Option<&DynamicObject>) {
        let Some(spec) = observed.and_then(|pg| pg.data.get("spec")) else {
            return;
        };
        let text = |field: &str| spec.get(field).and_then(|v| v.as_str()).filter(|v| !v.is_empty());
        match self {
            Self::Volcano(volcano) => {
                if let Some(queue) = text("queue") {
                    queue.clone_into(&mut volcano.queue);
                }
            }
            // Without one it stays without (admission may have given it the global default).
            Self::Native(native) => {
                text("priorityClassName")
                    .unwrap_or_default()
                    .clone_into(&mut native.priority_class_name);
            }
            Self::SchedulerPlugins(_) => {}
        }
    }

    pub fn api_resource(&self) -> ApiResource {
        match self {
            Self::Volcano(_) => volcano_api_resource(),
            Self::SchedulerPlugins(_) => scheduler_plugins_api_resource(),
            Self::Native(_) => native_api_resource(),
        }
    }

    /// The spec as JSON, without empty optional fields.
    pub fn to_json(&self) -> serde_json::Value {
        let value = match self {
            Self::Volcano(spec) => serde_json::to_value(spec),
            Self::SchedulerPlugins(spec) => serde_json::to_value(spec),
            Self::Native(spec) => {
                let mut value = serde_json::json!({
                    "schedulingPolicy": { "gang": { "minCount": spec.min_count } },
                });
                if !spec.priority_class_name.is_empty() {
                    value["priorityClassName"] = spec.priority_class_name.clone().into();
                }
                Ok(value)
            }
        };
        // Both are plain structs of strings, numbers and string maps: serializing cannot fail.
        value.unwrap_or_default()
    }

    /// The whole PodGroup object: named after the job, in its namespace, with its annotations,
    /// Kubeflow's job labels (so a label-filtered watch sees it) and the job as controller.
    pub fn to_pod_group(&self, job: &JobRef) -> DynamicObject {
        let mut pod_group = DynamicObject::new(&job.name, &self.api_resource())
            .data(serde_json::json!({ "spec": self.to_json() }));
        let meta = &mut pod_group.metadata;
        meta.namespace.clone_from(&job.namespace);
        meta.annotations = (!job.annotations.is_empty()).then(|| job.annotations.clone());
        meta.labels = Some(labels::job_labels(&job.controller_name, &job.name));
        meta.owner_references = Some(vec![job.owner.clone()]);
        pod_group
    }
}

/// The PodGroup to create or compare with: `None` when gang scheduling is off. `observed` is the
/// job's current PodGroup, whose Volcano queue is kept.
pub fn desired_pod_group(
    scheduler: &GangScheduler,
    job: &JobRef,
    run_policy: &RunPolicy,
    specs: &BTreeMap<String, ReplicaSpec>,
    priority_classes: &BTreeMap<String, i32>,
    observed: Option<&DynamicObject>,
) -> Result<Option<DynamicObject>, QuantityError> {
    let Some(mut spec) = PodGroupSpec::for_job(scheduler, run_policy, specs, priority_classes)? else {
        return Ok(None);
    };
    spec.keep_observed_queue(observed);
    Ok(Some(spec.to_pod_group(job)))
}
