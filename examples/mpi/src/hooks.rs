// Scaffolded by kfop 0.1.0. This file is yours: `kfop gen` never changes it.
//! MPIJob: a job runs with the semantics of the API it was created in, one framework per version.
//! Created as v2beta1 ([`V2beta1`], mpi-operator): the worker pods' SSH setup and DNS, the
//! environment both roles get, and the status, which the launcher batch Job decides. Created as
//! v1 ([`v1::V1`], training-operator v1.8.1): the launcher is a pod.
use std::collections::BTreeMap;

use kfop_runtime::k8s_openapi::api::core::v1::{
    EnvVar, KeyToPath, PodDNSConfig, PodSpec, PodTemplateSpec, SecretVolumeSource, Volume, VolumeMount,
};
use kfop_runtime::kube::ResourceExt;
use kfop_runtime::kube::api::{ApiResource, DynamicObject};
use kfop_runtime::labels::{JOB_ROLE, child_name};
use kfop_runtime::plan::{JobName, LifecycleWording};
use kfop_runtime::{DesiredObject, Framework, FrameworkError, JobContext, PodContext, StatusUpdate};

use crate::api::MPIJob;
use crate::{objects, status, v1};

pub const ROLE_ENV: &str = "K_MPI_JOB_ROLE";
pub const SSH_VOLUME: &str = "ssh-auth";
/// Keys of the `kubernetes.io/ssh-auth` Secret.
pub const SSH_PRIVATE_KEY: &str = "ssh-privatekey";
pub const SSH_PUBLIC_KEY: &str = "ssh-publickey";
/// The SSH daemon workers run when the template gives no command.
const WORKER_COMMAND: [&str; 2] = ["/usr/sbin/sshd", "-De"];

/// `<job>-ssh`: the job's SSH Secret.
pub fn ssh_secret_name(job: &str) -> String {
    format!("{job}-ssh")
}

/// The MPIJob framework: one per API version on one CRD, each job run by the version it was
/// created in (the conversion webhook records it).
#[derive(Debug, Clone, Default)]
pub struct Mpi {
    pub v2beta1: V2beta1,
    pub v1: v1::V1,
}

impl Framework for Mpi {
    type Job = MPIJob;

    fn for_job(&self, job: &MPIJob) -> &dyn Framework<Job = MPIJob> {
        if v1::created_as_v1(job) {
            &self.v1
        } else {
            &self.v2beta1
        }
    }

    /// One Service for the whole job instead of one per replica, in both versions.
    fn creates_services(&self) -> bool {
        false
    }

    fn owned_kinds(&self) -> Vec<ApiResource> {
        objects::kinds().into_iter().chain(v1::objects::kinds()).collect()
    }

    fn prepare_object(&self, object: &mut DynamicObject) -> Result<(), FrameworkError> {
        objects::prepare_object(object)
    }
}

/// An MPIJob created as `v2beta1`, run as mpi-operator v0.6.0 runs it.
#[derive(Debug, Clone, Copy, Default)]
pub struct V2beta1;

impl Framework for V2beta1 {
    type Job = MPIJob;

    /// A worker pod as mpi-operator's `newWorker` shapes it: hostname and subdomain behind the job's
    /// headless Service, the service's DNS search domain, sshd as the default command, the role
    /// variable and the SSH key pair.
    fn decorate_pod(
        &self,
        ctx: &PodContext<'_, MPIJob>,
        template: &mut PodTemplateSpec,
    ) -> Result<(), FrameworkError> {
        if ctx.role != "Worker" {
            return Ok(());
        }
        let job = ctx.job.name_any();
        let namespace = ctx.job.namespace().unwrap_or_default();
        template
            .metadata
            .get_or_insert_with(Default::default)
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(JOB_ROLE.to_owned(), "worker".to_owned());
        let spec = template.spec.get_or_insert_with(PodSpec::default);
        set_host(spec, child_name(&job, "Worker", ctx.index), &job);
        // mpi-operator writes the cluster domain literally here.
        let search = format!("{job}.{namespace}.svc.cluster.local");
        spec.dns_config
            .get_or_insert_with(PodDNSConfig::default)
            .searches
            .get_or_insert_with(Vec::new)
            .push(search);
        let container = first_container(spec)?;
        if container.command.as_ref().is_none_or(Vec::is_empty)
            && container.args.as_ref().is_none_or(Vec::is_empty)
        {
            container.command = Some(WORKER_COMMAND.iter().map(|s| (*s).to_owned()).collect());
        }
        append_env(container, &[(ROLE_ENV, "worker")]);
        mount_ssh(spec, &job, ctx.job.spec.extra.ssh_path())
    }

    /// The launcher batch Job decides (mpi-operator's `updateMPIJobStatus`).
    fn update_status(&self, job: &MPIJob, update: &mut StatusUpdate<'_>) {
        status::update_status(job, update);
    }

    /// mpi-operator's wording: the job's namespace in Created (with an event) and in the
    /// Running=False of a suspended job; no name in Suspended and Resumed; its suspension.
    fn lifecycle_wording(&self, job: &MPIJob, name: JobName<'_>) -> LifecycleWording {
        let _ = job;
        let JobName {
            kind,
            name,
            namespace,
        } = name;
        LifecycleWording {
            created: format!("{kind} {namespace}/{name} is created."),
            created_event: true,
            suspended: format!("{kind} suspended"),
            running_suspended: format!("{kind} {namespace}/{name} is suspended."),
            resumed: format!("{kind} resumed"),
            suspension_reports_every_role: true,
        }
    }

    /// mpi-operator gives the TTL to the launcher batch Job (`newLauncherJob`) and never deletes
    /// the MPIJob.
    fn deletes_job_after_ttl(&self, job: &MPIJob) -> bool {
        let _ = job;
        false
    }

    /// The launcher runs in its batch Job.
    fn creates_pods(&self, job: &MPIJob, role: &str) -> bool {
        let _ = job;
        role != "Launcher"
    }

    /// `<job>-launcher` names the launcher's batch Job (and so its pods' prefix).
    fn pod_name(&self, job: &MPIJob, role: &str, index: i32) -> String {
        launcher_or_child(job, role, index)
    }

    fn desired_objects(&self, ctx: &JobContext<'_, MPIJob>) -> Result<Vec<DesiredObject>, FrameworkError> {
        objects::desired_objects(ctx)
    }
}

/// `<job>-launcher` for the launcher, Kubeflow's `<job>-<role>-<index>` for the rest.
pub fn launcher_or_child(job: &MPIJob, role: &str, index: i32) -> String {
    let name = job.name_any();
    if role == "Launcher" {
        status::launcher_name(&name)
    } else {
        child_name(&name, role, index)
    }
}

/// Hostname and subdomain so the pod resolves as `<hostname>.<job>.<ns>.svc`.
pub fn set_host(spec: &mut PodSpec, hostname: String, job: &str) {
    spec.hostname = Some(hostname);
    spec.subdomain = Some(job.to_owned());
    if spec.host_network == Some(true) {
        spec.dns_policy = Some("ClusterFirstWithHostNet".to_owned());
    }
}

/// mpi-operator sets up only the first container.
pub fn first_container(
    spec: &mut PodSpec,
) -> Result<&mut kfop_runtime::k8s_openapi::api::core::v1::Container, FrameworkError> {
    spec.containers
        .first_mut()
        .ok_or_else(|| FrameworkError::new("the pod template has no container; add one"))
}

/// Appends variables after the user's (an empty value is written as no value, as Go does).
pub fn append_env(
    container: &mut kfop_runtime::k8s_openapi::api::core::v1::Container,
    vars: &[(&str, &str)],
) {
    let env = container.env.get_or_insert_with(Vec::new);
    env.extend(vars.iter().map(|(name, value)| EnvVar {
        name: (*name).to_owned(),
        value: (!value.is_empty()).then(|| (*value).to_owned()),
        value_from: None,
    }));
}

/// The SSH Secret as `id_rsa`, `id_rsa.pub` and `authorized_keys` at `path` in the first
/// container; mode 0600 only at `/root/.ssh` (sshd refuses looser keys there).
pub fn mount_ssh(spec: &mut PodSpec, job: &str, path: &str) -> Result<(), FrameworkError> {
    let item = |key: &str, path: &str| KeyToPath {
        key: key.to_owned(),
        path: path.to_owned(),
        mode: None,
        ..Default::default()
    };
    spec.volumes.get_or_insert_with(Vec::new).push(Volume {
        name: SSH_VOLUME.to_owned(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(ssh_secret_name(job)),
            default_mode: (path == crate::spec::ROOT_SSH_PATH).then_some(0o600),
            items: Some(vec![
                item(SSH_PRIVATE_KEY, "id_rsa"),
                item(SSH_PUBLIC_KEY, "id_rsa.pub"),
                item(SSH_PUBLIC_KEY, "authorized_keys"),
            ]),
            optional: None,
            ..Default::default()
        }),
        ..Volume::default()
    });
    first_container(spec)?
        .volume_mounts
        .get_or_insert_with(Vec::new)
        .push(VolumeMount {
            name: SSH_VOLUME.to_owned(),
            mount_path: path.to_owned(),
            ..VolumeMount::default()
        });
    Ok(())
}

#[cfg(test)]
mod tests {
    use kfop_runtime::api::RestartPolicy;
    use kfop_runtime::serde_json::{self, json};

    use super::*;

    fn job(annotations: serde_json::Value) -> MPIJob {
        serde_json::from_value(json!({
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "metadata": { "name": "pi", "annotations": annotations },
            "spec": { "mpiReplicaSpecs": {} },
        }))
        .unwrap()
    }

    #[test]
    fn only_a_v1_launcher_defaults_to_never() {
        let mpi = Mpi::default();
        let v1 = job(json!({ crate::convert::CREATED_AS: "v1" }));
        let restart = |j: &MPIJob, role| mpi.for_job(j).default_restart_policy(j, role);
        assert_eq!(restart(&v1, "Launcher"), Some(RestartPolicy::Never));
        assert_eq!(restart(&v1, "Worker"), None);
        assert_eq!(restart(&job(json!({})), "Launcher"), None);
    }
}
