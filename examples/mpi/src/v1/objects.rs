//! What a job created as v1 owns besides its pods, as training-operator v1.8.1 makes it: the
//! ConfigMap `<job>-config` (`kubexec.sh`, `hostfile`, `discover_hosts.sh`) and the launcher's
//! ServiceAccount, Role (read pods, exec into the workers) and RoleBinding, all `<job>-launcher`.
//! None is deleted while the job exists; garbage collection removes them with it.
use kfop_runtime::k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use kfop_runtime::k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kfop_runtime::kube::ResourceExt;
use kfop_runtime::kube::api::ApiResource;
use kfop_runtime::labels::REPLICA_TYPE;
use kfop_runtime::plan::{DesiredObject, SyncPolicy};
use kfop_runtime::serde_json::json;
use kfop_runtime::{FrameworkError, JobContext, JobPhase, ObservedPod};

use super::pods::gpu_launcher;
use crate::api::MPIJob;
use crate::objects::{DISCOVER_HOSTS, HOSTFILE, config_map_name, owned_object};
use crate::status::launcher_name;

/// The script Open MPI and Intel MPI run instead of ssh: `kubectl exec` into the worker.
pub const KUBEXEC: &str = "kubexec.sh";

/// The kinds a v1 job owns besides the ConfigMap.
pub fn kinds() -> [ApiResource; 3] {
    [
        ApiResource::erase::<ServiceAccount>(&()),
        ApiResource::erase::<Role>(&()),
        ApiResource::erase::<RoleBinding>(&()),
    ]
}

pub fn desired_objects(ctx: &JobContext<'_, MPIJob>) -> Result<Vec<DesiredObject>, FrameworkError> {
    let job = ctx.job;
    let name = job.name_any();
    let namespace = job.namespace().unwrap_or_default();
    let slots = job.spec.extra.slots();
    let workers = ctx.specs.get("Worker").map_or(0, |s| s.replicas());
    let gpu = gpu_launcher(job);
    let launcher = launcher_name(&name);
    let done = ctx.phase == JobPhase::Finished || launcher_finished(ctx, &launcher);

    let running: Vec<String> = ctx
        .observed
        .pods
        .iter()
        .map(AsRef::as_ref)
        .filter(|p| p.labels().get(REPLICA_TYPE).map(String::as_str) == Some("worker"))
        .filter(|p| phase(p) == Some("Running"))
        .map(ResourceExt::name_any)
        .collect();
    let files = json!({
        KUBEXEC: kubexec(super::main_container(job).as_deref()),
        HOSTFILE: hostfile(&name, workers, slots, gpu),
        DISCOVER_HOSTS: discover_hosts(&name, &running, slots, gpu),
    });
    // A finished job's files stay as they were.
    let files_policy = if done {
        SyncPolicy::CreateOnly
    } else {
        SyncPolicy::Sync
    };
    let mut objects = vec![owned_object(
        job,
        &ApiResource::erase::<ConfigMap>(&()),
        config_map_name(&name),
        json!({ "data": files }),
        files_policy,
    )];

    let [service_account, role, binding] = kinds();
    // The template's own ServiceAccount is used as it is.
    let account = match launcher_template_account(job) {
        Some(account) => account,
        None => {
            objects.push(owned_object(
                job,
                &service_account,
                launcher.clone(),
                json!({}),
                SyncPolicy::CreateOnly,
            ));
            launcher.clone()
        }
    };
    let mut rules =
        vec![json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]})];
    // training-operator writes the rule with no names when there are no workers, which allows
    // exec into every pod of the namespace; kfop then grants no exec at all.
    if workers > 0 {
        let names: Vec<String> = (0..workers).map(|i| format!("{name}-worker-{i}")).collect();
        rules.push(json!({"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"], "resourceNames": names}));
    }
    objects.push(owned_object(
        job,
        &role,
        launcher.clone(),
        json!({ "rules": rules }),
        SyncPolicy::Sync,
    ));
    objects.push(owned_object(
        job,
        &binding,
        launcher.clone(),
        json!({
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": launcher},
        }),
        SyncPolicy::CreateOnly,
    ));
    Ok(objects)
}

fn phase(pod: &ObservedPod) -> Option<&str> {
    pod.status.as_ref()?.phase.as_deref()
}

/// Whether the launcher pod ended (succeeded or failed).
fn launcher_finished(ctx: &JobContext<'_, MPIJob>, launcher: &str) -> bool {
    ctx.observed
        .pods
        .iter()
        .any(|p| p.name_any() == launcher && matches!(phase(p), Some("Succeeded" | "Failed")))
}

fn launcher_template_account(job: &MPIJob) -> Option<String> {
    let spec = job
        .spec
        .mpi_replica_specs
        .get("Launcher")?
        .template
        .spec
        .as_ref()?;
    spec.service_account_name.clone().filter(|a| !a.is_empty())
}

/// `kubectl exec` into the pod named by the first argument, in `main_container` if given.
pub fn kubexec(main_container: Option<&str>) -> String {
    let container = main_container.map_or(String::new(), |c| format!(" --container {c}"));
    format!(
        "#!/bin/sh\nset -x\nPOD_NAME=$1\nshift\n/opt/kube/kubectl exec ${{POD_NAME}}{container} -- /bin/sh -c \"$*\""
    )
}

/// `<pod> slots=<n>` per worker index (the launcher first when it has a GPU), whatever the
/// pods' state.
pub fn hostfile(job: &str, workers: i32, slots: i32, gpu_launcher: bool) -> String {
    let launcher = gpu_launcher.then(|| launcher_name(job));
    launcher
        .into_iter()
        .chain((0..workers).map(|i| format!("{job}-worker-{i}")))
        .map(|host| format!("{host} slots={slots}\n"))
        .collect()
}

/// `echo <pod>:<slots>` per running worker, sorted by name as strings (Horovod's elastic
/// discovery), the launcher first when it has a GPU; training-operator's layout, blank line
/// included.
pub fn discover_hosts(job: &str, running_workers: &[String], slots: i32, gpu_launcher: bool) -> String {
    let mut names = running_workers.to_vec();
    names.sort();
    let mut script = String::from("#!/bin/sh");
    if gpu_launcher {
        script.push_str(&format!("\necho {}:{slots}\n", launcher_name(job)));
    }
    for name in names {
        script.push_str(&format!("\necho {name}:{slots}"));
    }
    script
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_as_training_operator_writes_them() {
        assert_eq!(
            kubexec(None),
            "#!/bin/sh\nset -x\nPOD_NAME=$1\nshift\n/opt/kube/kubectl exec ${POD_NAME} -- /bin/sh -c \"$*\""
        );
        assert!(kubexec(Some("mpi")).ends_with("exec ${POD_NAME} --container mpi -- /bin/sh -c \"$*\""));
        assert_eq!(
            hostfile("pi", 2, 1, false),
            "pi-worker-0 slots=1\npi-worker-1 slots=1\n"
        );
        assert_eq!(
            hostfile("pi", 1, 4, true),
            "pi-launcher slots=4\npi-worker-0 slots=4\n"
        );
        let running = ["pi-worker-2".to_owned(), "pi-worker-10".to_owned()];
        assert_eq!(
            discover_hosts("pi", &running, 2, false),
            "#!/bin/sh\necho pi-worker-10:2\necho pi-worker-2:2"
        );
        assert_eq!(
            discover_hosts("pi", &[], 1, true),
            "#!/bin/sh\necho pi-launcher:1\n"
        );
    }
}
