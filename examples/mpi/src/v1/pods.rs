//! The pods of a job created as v1, as training-operator v1.8.1's `newLauncher` and `newWorker`
//! shape them: the launcher reaches the workers with `kubectl exec` through `kubexec.sh`, using
//! a kubectl its `kubectl-delivery` init container copies in; workers only wait to be exec'd
//! into. No hostname, subdomain, Service or SSH.
use kfop_runtime::FrameworkError;
use kfop_runtime::k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, EnvVar, PodSpec, PodTemplateSpec, ResourceRequirements, Volume,
    VolumeMount,
};
use kfop_runtime::k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kfop_runtime::kube::ResourceExt;

use super::objects::KUBEXEC;
use crate::api::MPIJob;
use crate::hooks::{append_env, first_container};
use crate::objects::{CONFIG_PATH, DISCOVER_HOSTS, HOSTFILE, mount_config};
use crate::status::launcher_name;

const KUBECTL_VOLUME: &str = "mpi-job-kubectl";
const KUBECTL_PATH: &str = "/opt/kube";

/// Whether the launcher asks for a GPU (it is then listed in the hostfile, and keeps the node's
/// GPUs visible).
pub fn gpu_launcher(job: &MPIJob) -> bool {
    let Some(spec) = job.spec.mpi_replica_specs.get("Launcher") else {
        return false;
    };
    spec.template
        .spec
        .iter()
        .flat_map(|s| &s.containers)
        .filter_map(|c| c.resources.as_ref()?.limits.as_ref())
        .any(|limits| limits.keys().any(|k| k.contains("gpu")))
}

/// The launcher: its ServiceAccount unless the template names one, the `kubectl-delivery` init
/// container, and in the first container the Open MPI and Intel MPI variables pointing at
/// `kubexec.sh` and the hostfile.
pub fn decorate_launcher(
    job: &MPIJob,
    template: &mut PodTemplateSpec,
    kubectl_delivery_image: &str,
) -> Result<(), FrameworkError> {
    let name = job.name_any();
    let gpu = gpu_launcher(job);
    let spec = template.spec.get_or_insert_with(PodSpec::default);
    if spec.service_account_name.as_deref().is_none_or(str::is_empty) {
        spec.service_account_name = Some(launcher_name(&name));
    }
    let kubectl_mount = VolumeMount {
        name: KUBECTL_VOLUME.to_owned(),
        mount_path: KUBECTL_PATH.to_owned(),
        ..VolumeMount::default()
    };
    let config_mount = VolumeMount {
        name: crate::objects::CONFIG_VOLUME.to_owned(),
        mount_path: CONFIG_PATH.to_owned(),
        ..VolumeMount::default()
    };
    let limits = [("cpu", "100m"), ("memory", "512Mi"), ("ephemeral-storage", "5Gi")]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), Quantity(v.to_owned())))
        .collect::<std::collections::BTreeMap<_, _>>();
    let env = |name: &str, value: String| EnvVar {
        name: name.to_owned(),
        value: Some(value),
        value_from: None,
    };
    spec.init_containers.get_or_insert_with(Vec::new).push(Container {
        name: "kubectl-delivery".to_owned(),
        image: Some(kubectl_delivery_image.to_owned()),
        image_pull_policy: Some("IfNotPresent".to_owned()),
        env: Some(vec![
            env("TARGET_DIR", KUBECTL_PATH.to_owned()),
            env("NAMESPACE", job.namespace().unwrap_or_default()),
        ]),
        volume_mounts: Some(vec![kubectl_mount.clone(), config_mount]),
        resources: Some(ResourceRequirements {
            limits: Some(limits.clone()),
            requests: Some(limits),
            ..ResourceRequirements::default()
        }),
        ..Container::default()
    });

    let kubexec = format!("{CONFIG_PATH}/{KUBEXEC}");
    let hostfile = format!("{CONFIG_PATH}/{HOSTFILE}");
    let container = first_container(spec)?;
    let mut vars = vec![
        ("OMPI_MCA_plm_rsh_agent", kubexec.as_str()),
        ("OMPI_MCA_orte_default_hostfile", hostfile.as_str()),
    ];
    if !gpu {
        vars.extend([("NVIDIA_VISIBLE_DEVICES", ""), ("NVIDIA_DRIVER_CAPABILITIES", "")]);
    }
    // Intel MPI's only where the user set none of their own.
    for (var, value) in [
        ("I_MPI_HYDRA_BOOTSTRAP", "rsh"),
        ("I_MPI_HYDRA_BOOTSTRAP_EXEC", kubexec.as_str()),
    ] {
        if !container.env.iter().flatten().any(|e| e.name == var) {
            vars.push((var, value));
        }
    }
    append_env(container, &vars);
    container
        .volume_mounts
        .get_or_insert_with(Vec::new)
        .push(kubectl_mount);
    spec.volumes.get_or_insert_with(Vec::new).push(Volume {
        name: KUBECTL_VOLUME.to_owned(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    });
    mount_config(
        spec,
        &name,
        &[(KUBEXEC, 0o555), (HOSTFILE, 0o444), (DISCOVER_HOSTS, 0o555)],
    )
}

/// A worker: `sleep 365d` unless the template gives a command, and `kubexec.sh` mounted.
pub fn decorate_worker(job: &MPIJob, template: &mut PodTemplateSpec) -> Result<(), FrameworkError> {
    let spec = template.spec.get_or_insert_with(PodSpec::default);
    let container = first_container(spec)?;
    if container.command.as_ref().is_none_or(Vec::is_empty) {
        container.command = Some(vec!["sleep".to_owned()]);
        container.args = Some(vec!["365d".to_owned()]);
    }
    mount_config(spec, &job.name_any(), &[(KUBEXEC, 0o555)])
}
