//! Building the pods and headless services of a job (pure).
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;

use crate::api::ReplicaSpec;
use crate::framework::{Framework, FrameworkError, Loaded, PodContext, Scheduling, TrainingJob};
use crate::gang;
use crate::labels::{self, JOB_ROLE};

/// A pod built from the role's template; whether the template's own restartPolicy was
/// overridden (Kubeflow warns about that with an event).
#[derive(Debug)]
pub struct BuiltPod {
    pub pod: Pod,
    pub overrode_restart_policy: bool,
}

/// The one decoration chain of a pod, run once: the role's defaulted template, the framework's
/// decoration (the manifest's env, then its hooks), then the gang scheduler's marks and the
/// Kueue pod group's.
pub fn build_pod<F: Framework>(
    framework: &Loaded<F>,
    job: &F::Job,
    specs: &BTreeMap<String, ReplicaSpec>,
    (role, index): (&str, i32),
    scheduling: &Scheduling,
) -> Result<BuiltPod, FrameworkError> {
    let info = framework.info();
    let spec = specs
        .get(role)
        .ok_or_else(|| FrameworkError::new(format!("no replica spec for {role}")))?;
    let name = job.name_any();
    let mut template: PodTemplateSpec = (*spec.template).clone();
    framework.decorate_pod(
        &PodContext {
            job,
            info,
            specs,
            role,
            index,
        },
        &mut template,
    )?;
    gang::decorate_pod_template(&scheduling.scheduler, &name, role, &mut template);
    if let Some(group) = scheduling.kueue_group(job, specs.values()) {
        group.decorate(role, &mut template);
    }

    let mut pod_spec = template.spec.unwrap_or_default();
    let overrode_restart_policy = pod_spec.restart_policy.is_some();
    pod_spec.restart_policy = spec.restart_policy.map(|p| p.pod_restart_policy().to_owned());
    let meta = template.metadata.unwrap_or_default();
    // The template's and the framework's labels, under Kubeflow's (which win).
    let mut labels = meta.labels.unwrap_or_default();
    labels.extend(labels::replica_labels(&info.controller_name, &name, role, index));
    if framework.is_master(job, specs, role, index) {
        labels.insert(JOB_ROLE.to_owned(), "master".to_owned());
    }
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some(framework.code_for(job).pod_name(job, role, index)),
            namespace: job.namespace(),
            labels: Some(labels),
            annotations: meta.annotations,
            owner_references: Some(vec![framework.owner_reference(job)]),
            ..ObjectMeta::default()
        },
        spec: Some(pod_spec),
        status: None,
    };
    Ok(BuiltPod {
        pod,
        overrode_restart_policy,
    })
}

/// The headless service of one replica: same name and labels as its pod (without job-role),
/// selecting exactly that pod, exposing the default container's ports; `owner` is the job's
/// ([`Loaded::owner_reference`]).
pub fn build_service<J: TrainingJob>(
    info: &crate::framework::FrameworkInfo,
    job: &J,
    owner: OwnerReference,
    spec: &ReplicaSpec,
    role: &str,
    index: i32,
) -> Service {
    let name = job.name_any();
    let labels = labels::replica_labels(&info.controller_name, &name, role, index);
    let containers = spec
        .template
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    // Kubeflow requires a container named after the framework; falling back to the first
    // container keeps services working for templates that name theirs differently.
    let container = containers.get(info.default_container_index(containers.iter().map(|c| c.name.as_str())));
    let mut ports: Vec<ServicePort> = container
        .and_then(|c| c.ports.as_ref())
        .into_iter()
        .flatten()
        .map(|p| ServicePort {
            name: p.name.clone(),
            port: p.container_port,
            ..ServicePort::default()
        })
        .collect();
    ports.sort_by(|a, b| a.name.cmp(&b.name));
    Service {
        metadata: ObjectMeta {
            name: Some(labels::child_name(&name, role, index)),
            namespace: job.namespace(),
            labels: Some(labels.clone()),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".to_owned()),
            selector: Some(labels),
            ports: Some(ports),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}
