//! The launcher: a batch/v1 Job `<job>-launcher` whose pod runs `mpirun` with the hostfile and
//! the SSH key pair (mpi-operator's `newLauncherJob`).
use std::collections::BTreeMap;

use kfop_runtime::FrameworkError;
use kfop_runtime::api::{ReplicaSpec, RestartPolicy};
use kfop_runtime::gang::decorate_pod_template;
use kfop_runtime::k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, KeyToPath, PodSpec, PodTemplateSpec, Volume, VolumeMount,
};
use kfop_runtime::kube::ResourceExt;
use kfop_runtime::labels::{JOB_NAME, JOB_ROLE, OPERATOR_NAME};
use kfop_runtime::plan::Scheduling;
use kfop_runtime::plan::owner_reference;
use kfop_runtime::serde_json::{Value, json};

use crate::api::MPIJob;
use crate::hooks::{ROLE_ENV, append_env, first_container, mount_ssh, set_host};
use crate::spec::MpiImplementation;

pub const CONFIG_VOLUME: &str = "mpi-job-config";
pub const CONFIG_PATH: &str = "/etc/mpi";
pub const HOSTFILE: &str = "hostfile";
pub const DISCOVER_HOSTS: &str = "discover_hosts.sh";
const SSH_ARGS: &str = "-o ConnectionAttempts=10";

/// `<job>-config`.
pub fn config_map_name(job: &str) -> String {
    format!("{job}-config")
}

/// The launcher's variables per implementation, after `K_MPI_JOB_ROLE=launcher`.
pub fn launcher_env(
    implementation: MpiImplementation,
    slots: i32,
    launcher_as_worker: bool,
) -> Vec<(String, String)> {
    let hostfile = format!("{CONFIG_PATH}/{HOSTFILE}");
    let mut vars: Vec<(&str, String)> = vec![(ROLE_ENV, "launcher".to_owned())];
    match implementation {
        MpiImplementation::OpenMPI => vars.extend([
            ("OMPI_MCA_orte_keep_fqdn_hostnames", "true".to_owned()),
            ("OMPI_MCA_orte_default_hostfile", hostfile),
            ("OMPI_MCA_plm_rsh_args", SSH_ARGS.to_owned()),
            ("OMPI_MCA_orte_set_default_slots", slots.to_string()),
        ]),
        MpiImplementation::Intel => vars.extend([
            ("I_MPI_HYDRA_HOST_FILE", hostfile),
            ("I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", SSH_ARGS.to_owned()),
            ("I_MPI_PERHOST", slots.to_string()),
        ]),
        MpiImplementation::Mpich => vars.extend([
            ("HYDRA_HOST_FILE", hostfile),
            ("HYDRA_LAUNCH_EXTRA_ARGS", SSH_ARGS.to_owned()),
        ]),
    }
    // A launcher that is not a worker must not grab the node's GPUs.
    if !launcher_as_worker {
        vars.extend([
            ("NVIDIA_VISIBLE_DEVICES", String::new()),
            ("NVIDIA_DRIVER_CAPABILITIES", String::new()),
        ]);
    }
    vars.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// The launcher's pod template, gang-decorated as the engine decorates worker pods (the launcher
/// is one of the PodGroup's members; mpi-operator decorates it too), and a member of the job's
/// Kueue pod group under `--kueue-pod-groups` (`specs`: every role, to count the group).
pub fn pod_template(
    job: &MPIJob,
    spec: &ReplicaSpec,
    scheduling: &Scheduling,
    specs: &BTreeMap<String, ReplicaSpec>,
) -> Result<PodTemplateSpec, FrameworkError> {
    let name = job.name_any();
    let extra = &job.spec.extra;
    let mut template = (*spec.template).clone();
    let metadata = template.metadata.get_or_insert_with(Default::default);
    let labels = metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(OPERATOR_NAME.to_owned(), "mpi-operator".to_owned());
    labels.insert(JOB_NAME.to_owned(), name.clone());
    labels.insert(JOB_ROLE.to_owned(), "launcher".to_owned());
    metadata.owner_references = Some(vec![owner_reference(job, &())]);
    let pod = template.spec.get_or_insert_with(PodSpec::default);
    set_host(pod, format!("{name}-launcher"), &name);
    let vars = launcher_env(extra.implementation(), extra.slots(), extra.launcher_as_worker());
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    append_env(first_container(pod)?, &vars);
    mount_ssh(pod, &name, extra.ssh_path())?;
    pod.restart_policy = Some(
        match spec.restart_policy.unwrap_or(RestartPolicy::OnFailure) {
            RestartPolicy::ExitCode | RestartPolicy::Never => "Never",
            RestartPolicy::OnFailure => "OnFailure",
            RestartPolicy::Always => "Always",
        }
        .to_owned(),
    );
    mount_config(pod, &name, &[(HOSTFILE, 0o444), (DISCOVER_HOSTS, 0o555)])?;
    decorate_pod_template(&scheduling.scheduler, &name, "Launcher", &mut template);
    if let Some(group) = scheduling.kueue_group(job, specs.values()) {
        group.decorate("Launcher", &mut template);
    }
    Ok(template)
}

/// Mounts `files` (key and mode) of the job's `<job>-config` at [`CONFIG_PATH`] in the first
/// container.
pub fn mount_config(pod: &mut PodSpec, job: &str, files: &[(&str, i32)]) -> Result<(), FrameworkError> {
    let items = files
        .iter()
        .map(|(key, mode)| KeyToPath {
            key: (*key).to_owned(),
            path: (*key).to_owned(),
            mode: Some(*mode),
            ..Default::default()
        })
        .collect();
    pod.volumes.get_or_insert_with(Vec::new).push(Volume {
        name: CONFIG_VOLUME.to_owned(),
        config_map: Some(ConfigMapVolumeSource {
            name: config_map_name(job),
            items: Some(items),
            ..ConfigMapVolumeSource::default()
        }),
        ..Volume::default()
    });
    first_container(pod)?
        .volume_mounts
        .get_or_insert_with(Vec::new)
        .push(VolumeMount {
            name: CONFIG_VOLUME.to_owned(),
            mount_path: CONFIG_PATH.to_owned(),
            ..VolumeMount::default()
        });
    Ok(())
}

/// The launcher Job's content: run policy limits passed through, suspended with the MPIJob.
pub fn job_spec(job: &MPIJob, template: &PodTemplateSpec, suspended: bool) -> Result<Value, FrameworkError> {
    let run = &job.spec.run_policy;
    let template = kfop_runtime::serde_json::to_value(template)
        .map_err(|e| FrameworkError::with_source("serializing the launcher template", e))?;
    let mut spec = json!({ "template": template });
    let fields = [
        (
            "ttlSecondsAfterFinished",
            run.ttl_seconds_after_finished.map(i64::from),
        ),
        ("activeDeadlineSeconds", run.active_deadline_seconds),
        ("backoffLimit", run.backoff_limit.map(i64::from)),
    ];
    for (field, value) in fields {
        if let Some(value) = value {
            spec[field] = json!(value);
        }
    }
    if suspended {
        spec["suspend"] = json!(true);
    }
    Ok(json!({ "spec": spec }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launcher_env_per_implementation() {
        let names = |vars: Vec<(String, String)>| {
            vars.into_iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(launcher_env(MpiImplementation::OpenMPI, 2, false)),
            [
                "K_MPI_JOB_ROLE=launcher",
                "OMPI_MCA_orte_keep_fqdn_hostnames=true",
                "OMPI_MCA_orte_default_hostfile=/etc/mpi/hostfile",
                "OMPI_MCA_plm_rsh_args=-o ConnectionAttempts=10",
                "OMPI_MCA_orte_set_default_slots=2",
                "NVIDIA_VISIBLE_DEVICES=",
                "NVIDIA_DRIVER_CAPABILITIES=",
            ]
        );
        assert_eq!(
            names(launcher_env(MpiImplementation::Intel, 4, true)),
            [
                "K_MPI_JOB_ROLE=launcher",
                "I_MPI_HYDRA_HOST_FILE=/etc/mpi/hostfile",
                "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS=-o ConnectionAttempts=10",
                "I_MPI_PERHOST=4",
            ]
        );
        assert_eq!(
            names(launcher_env(MpiImplementation::Mpich, 1, true)),
            [
                "K_MPI_JOB_ROLE=launcher",
                "HYDRA_HOST_FILE=/etc/mpi/hostfile",
                "HYDRA_LAUNCH_EXTRA_ARGS=-o ConnectionAttempts=10",
            ]
        );
    }
}
