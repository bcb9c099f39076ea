// Scaffolded by kfop 0.1.0. This file is yours: `kfop gen` never changes it.
//! What an MPIJob owns besides its worker pods, as mpi-operator v2beta1 makes it: the headless
//! Service `<job>`, the ConfigMap `<job>-config` (hostfile, discover_hosts.sh), the SSH Secret
//! `<job>-ssh` and the launcher batch Job `<job>-launcher`. None is deleted while the job
//! exists; garbage collection removes them with it.
mod hostfile;
mod launcher;
mod ssh;

use std::collections::BTreeMap;

use kfop_runtime::k8s_openapi::api::batch::v1::Job;
use kfop_runtime::k8s_openapi::api::core::v1::{ConfigMap, PodTemplateSpec, Secret, Service};
use kfop_runtime::k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kfop_runtime::kube::api::{ApiResource, DynamicObject};
use kfop_runtime::kube::{Resource, ResourceExt};
use kfop_runtime::labels::{JOB_NAME, OPERATOR_NAME, REPLICA_TYPE};
use kfop_runtime::plan::{DesiredObject, SyncPolicy, find, owner_reference};
use kfop_runtime::serde_json::{Map, Value, json};
use kfop_runtime::{FrameworkError, JobContext, JobPhase, ObservedPod};

pub use launcher::{
    CONFIG_PATH, CONFIG_VOLUME, DISCOVER_HOSTS, HOSTFILE, config_map_name, launcher_env, mount_config,
};

use crate::api::MPIJob;
use crate::hooks::{SSH_PRIVATE_KEY, SSH_PUBLIC_KEY, ssh_secret_name};
use crate::spec::LauncherCreationPolicy;
use crate::status::{Launcher, launcher_name, launcher_state};

const SSH_AUTH_TYPE: &str = "kubernetes.io/ssh-auth";

pub fn desired_objects(ctx: &JobContext<'_, MPIJob>) -> Result<Vec<DesiredObject>, FrameworkError> {
    let job = ctx.job;
    let (name, namespace) = (job.name_any(), job.namespace().unwrap_or_default());
    let extra = &job.spec.extra;
    let launcher = launcher_state(&name, &ctx.observed.objects);
    let launcher_done = matches!(launcher, Launcher::Complete { .. } | Launcher::Failed { .. });
    let done = launcher_done || ctx.phase == JobPhase::Finished;
    let object = |kind: &ApiResource, object_name: String, data: Value, policy: SyncPolicy| {
        owned_object(job, kind, object_name, data, policy)
    };
    let [service, config_map, secret, batch_job] = kinds();
    let mut objects = vec![
        object(
            &service,
            name.clone(),
            json!({ "spec": {
                "clusterIP": "None",
                "selector": { OPERATOR_NAME: "mpi-operator", JOB_NAME: name },
            }}),
            SyncPolicy::Sync,
        ),
        object(
            &secret,
            ssh_secret_name(&name),
            json!({ "type": SSH_AUTH_TYPE }),
            SyncPolicy::CreateOnly,
        ),
    ];

    let workers = ctx.specs.get("Worker").map_or(0, |s| s.replicas());
    let worker_pods: Vec<&ObservedPod> = ctx
        .observed
        .pods
        .iter()
        .map(AsRef::as_ref)
        .filter(|p| p.labels().get(REPLICA_TYPE).map(String::as_str) == Some("worker"))
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    let running: Vec<String> = worker_pods
        .iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .map(|p| p.name_any())
        .collect();
    let files = json!({
        HOSTFILE: hostfile::hostfile(
            extra.implementation(),
            &name,
            &namespace,
            workers,
            extra.slots(),
            extra.launcher_as_worker(),
        ),
        DISCOVER_HOSTS: hostfile::discover_hosts(&name, &namespace, &running, extra.launcher_as_worker()),
    });
    // A finished job's files stay as they were, but for one failed without completion time (an
    // evicted worker) whose launcher runs on: mpi-operator syncs it until either.
    let completed = job.status.as_ref().is_some_and(|s| s.completion_time.is_some());
    let files_policy = if launcher_done || (ctx.phase == JobPhase::Finished && completed) {
        SyncPolicy::CreateOnly
    } else {
        SyncPolicy::Sync
    };
    objects.push(object(
        &config_map,
        config_map_name(&name),
        json!({ "data": files }),
        files_policy,
    ));

    let suspended = ctx.phase == JobPhase::Suspended;
    // A Kueue pod group is admitted whole, the launcher with the workers: waiting for the
    // workers to be ready first would wait forever.
    let grouped = ctx
        .observed
        .scheduling
        .kueue_group(job, ctx.specs.values())
        .is_some();
    if launcher != Launcher::Missing {
        // Only `suspend` follows the MPIJob (the rest of a Job's spec is immutable), and on
        // resume the scheduling fields Kueue may have set on the launcher's template.
        let (data, policy) = if done {
            (json!({}), SyncPolicy::CreateOnly)
        } else {
            let mut data = json!({ "spec": { "suspend": suspended } });
            let observed = find(&ctx.observed.objects, &batch_job, &launcher_name(&name));
            if let Some(observed) = observed.filter(|o| !suspended && resumable(o))
                && let Some(spec) = ctx.specs.get("Launcher")
            {
                let template = launcher::pod_template(job, spec, &ctx.observed.scheduling, ctx.specs)?;
                data["spec"]["template"] = scheduling_directives(&template, observed)?;
            }
            (data, SyncPolicy::Sync)
        };
        objects.push(object(&batch_job, launcher_name(&name), data, policy));
    } else if !done && (suspended || grouped || may_start(extra.creation_policy(), workers, &worker_pods)) {
        let spec = ctx
            .specs
            .get("Launcher")
            .ok_or_else(|| FrameworkError::new("spec.mpiReplicaSpecs.Launcher is required; add it"))?;
        let template = launcher::pod_template(job, spec, &ctx.observed.scheduling, ctx.specs)?;
        let data = launcher::job_spec(job, &template, suspended)?;
        objects.push(object(
            &batch_job,
            launcher_name(&name),
            data,
            SyncPolicy::CreateOnly,
        ));
    }
    Ok(objects)
}

/// Whether the launcher Job may take new scheduling fields: suspended and never started (the
/// API server refuses a template change otherwise).
fn resumable(launcher: &DynamicObject) -> bool {
    launcher.data["spec"]["suspend"] == true && launcher.data["status"]["startTime"].is_null()
}

/// The template fields a suspended Job's template may change (KEP-2926), as mpi-operator
/// v0.8 syncs them to the launcher Job on resume (`syncLauncherSchedulingDirectives`): labels
/// and annotations merged into the Job's, nodeSelector, tolerations and schedulingGates
/// replaced.
fn scheduling_directives(
    desired: &PodTemplateSpec,
    launcher: &DynamicObject,
) -> Result<Value, FrameworkError> {
    let desired = kfop_runtime::serde_json::to_value(desired)
        .map_err(|e| FrameworkError::with_source("serializing the launcher template", e))?;
    let (meta, spec) = (&desired["metadata"], &desired["spec"]);
    // A merge patch merges maps: the keys only the Job's selector has are removed.
    let mut selector: Map<String, Value> = launcher.data["spec"]["template"]["spec"]["nodeSelector"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.keys())
        .map(|k| (k.clone(), Value::Null))
        .collect();
    if let Some(wanted) = spec["nodeSelector"].as_object() {
        selector.extend(wanted.clone());
    }
    let mut metadata = Map::new();
    for field in ["labels", "annotations"] {
        if meta[field].is_object() {
            metadata.insert(field.to_owned(), meta[field].clone());
        }
    }
    Ok(json!({
        "metadata": metadata,
        "spec": {
            "nodeSelector": if selector.is_empty() { Value::Null } else { Value::Object(selector) },
            "tolerations": spec["tolerations"],
            "schedulingGates": spec["schedulingGates"],
        },
    }))
}

/// An object `job` owns, with mpi-operator's `app` label and Kubeflow's, so kfop's
/// label-filtered watches see it.
pub fn owned_object(
    job: &MPIJob,
    kind: &ApiResource,
    name: String,
    data: Value,
    policy: SyncPolicy,
) -> DesiredObject {
    let job_name = job.name_any();
    let labels = BTreeMap::from([
        ("app".to_owned(), job_name.clone()),
        (OPERATOR_NAME.to_owned(), "mpi-operator".to_owned()),
        (JOB_NAME.to_owned(), job_name),
    ]);
    let metadata = ObjectMeta {
        name: Some(name),
        namespace: job.namespace(),
        labels: Some(labels),
        owner_references: Some(vec![job_owner(job)]),
        ..ObjectMeta::default()
    };
    DesiredObject::new(
        kind,
        DynamicObject {
            types: None,
            metadata,
            data,
        },
        policy,
    )
}

/// The controller owner reference of `job`'s children, naming the job at the version it was
/// created in (training-operator's children name a v1 job `kubeflow.org/v1`).
pub fn job_owner(job: &MPIJob) -> OwnerReference {
    let mut owner = owner_reference(job, &());
    if crate::v1::created_as_v1(job) {
        owner.api_version = crate::v1::api_version();
    }
    owner
}

/// The kinds a job created as v2beta1 owns: its one Service, the hostfile ConfigMap, the SSH
/// Secret and the launcher batch Job.
pub fn kinds() -> [ApiResource; 4] {
    [
        ApiResource::erase::<Service>(&()),
        ApiResource::erase::<ConfigMap>(&()),
        ApiResource::erase::<Secret>(&()),
        ApiResource::erase::<Job>(&()),
    ]
}

/// AtStartup at once; WaitForWorkersReady once every worker pod has `Ready=True` (Running is
/// not enough).
fn may_start(policy: LauncherCreationPolicy, workers: i32, pods: &[&ObservedPod]) -> bool {
    let ready = pods
        .iter()
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .count();
    policy == LauncherCreationPolicy::AtStartup || i32::try_from(ready).is_ok_and(|r| r >= workers)
}

/// Fills the SSH Secret with a fresh key pair just before it is created.
pub fn prepare_object(object: &mut DynamicObject) -> Result<(), FrameworkError> {
    let is_secret = object.types.as_ref().is_some_and(|t| t.kind == Secret::kind(&()));
    if !is_secret || object.data["type"] != SSH_AUTH_TYPE {
        return Ok(());
    }
    let (private, public) = ssh::key_pair()?;
    object.data["stringData"] = json!({ SSH_PRIVATE_KEY: private, SSH_PUBLIC_KEY: public });
    Ok(())
}
