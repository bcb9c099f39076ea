//! The end-to-end check every operator's test makes: a job of its kind gets its pods with the
//! expected environment and succeeds when they do. Kind-agnostic (the job is JSON), so one copy
//! serves every scaffolded operator.
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::{Client, ResourceExt};

use crate::{Error, Result, TestEnv, pods, wait};

/// A job to run and what its pods must look like.
#[derive(Debug, Clone)]
pub struct JobCheck<'a> {
    pub crd: CustomResourceDefinition,
    /// The job object (apiVersion, kind, metadata.name, spec); the namespace is filled in.
    pub job: serde_json::Value,
    /// The container whose environment is checked.
    pub container: &'a str,
    /// Every pod of the job and the variables its container must carry.
    pub pods: &'a [(&'a str, &'a [&'a str])],
}

fn resource(crd: &CustomResourceDefinition) -> ApiResource {
    let version = crd
        .spec
        .versions
        .iter()
        .find(|v| v.storage)
        .or(crd.spec.versions.first());
    let version = version.map(|v| v.name.clone()).unwrap_or_default();
    ApiResource {
        api_version: format!("{}/{version}", crd.spec.group),
        group: crd.spec.group.clone(),
        version,
        kind: crd.spec.names.kind.clone(),
        plural: crd.spec.names.plural.clone(),
    }
}

/// The pod named `name`, or the pod a workload (a batch Job, as MPI's launcher) created for it:
/// `<job>-<role>-<index>` stands for `<job>-<role>-<random suffix>`.
async fn find_pod(api: &Api<Pod>, name: &str) -> Result<Option<Pod>> {
    let read = Error::kube(format!("reading pod {name}"));
    if let Some(pod) = api.get_opt(name).await.map_err(read)? {
        return Ok(Some(pod));
    }
    let Some((prefix, index)) = name.rsplit_once('-') else {
        return Ok(None);
    };
    if index.parse::<u32>().is_err() {
        return Ok(None);
    }
    let listed = api
        .list(&kube::api::ListParams::default())
        .await
        .map_err(Error::kube(format!("listing pods for {name}")))?;
    Ok(listed.items.into_iter().find(|p| {
        let n = p.name_any();
        n.strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|suffix| suffix.parse::<u32>().is_err() && !suffix.contains('-'))
    }))
}

/// In a fresh namespace: installs the CRD, starts the operator with `start(client, namespace)`
/// (the returned guard lives until the check ends), creates the job, waits for each listed pod
/// to run with its variables, ends every pod with exit code 0 and waits for `Succeeded=True`.
pub async fn job_succeeds<G>(
    env: &TestEnv,
    prefix: &str,
    check: JobCheck<'_>,
    start: impl FnOnce(Client, &str) -> G,
) -> Result<()> {
    env.install_crds([check.crd.clone()]).await?;
    let ns = env.namespace(prefix).await?;
    let guard = start(ns.client(), ns.name());
    let ar = resource(&check.crd);
    let jobs: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &ar);
    let mut job: DynamicObject =
        serde_json::from_value(check.job.clone()).map_err(|e| Error::Startup(format!("job object: {e}")))?;
    job.metadata.namespace = Some(ns.name().to_owned());
    let name = job.name_any();
    jobs.create(&PostParams::default(), &job)
        .await
        .map_err(Error::kube(format!("creating {}/{name}", ar.kind)))?;

    let pods_api: Api<Pod> = ns.api();
    let mut running = Vec::with_capacity(check.pods.len());
    for (pod_name, vars) in check.pods {
        let pod = wait::until(
            &format!("pod {pod_name} Running"),
            wait::default_timeout(),
            || async {
                Ok(find_pod(&pods_api, pod_name)
                    .await?
                    .filter(|p| pods::phase(p) == "Running"))
            },
        )
        .await?;
        let pod_name = pod.name_any();
        let container = pod
            .spec
            .and_then(|s| s.containers.into_iter().find(|c| c.name == check.container));
        let set: Vec<String> = container
            .and_then(|c| c.env)
            .unwrap_or_default()
            .into_iter()
            .map(|e| e.name)
            .collect();
        if let Some(missing) = vars.iter().find(|v| !set.iter().any(|s| s == *v)) {
            return Err(Error::Startup(format!(
                "pod {pod_name} lacks {missing}; it has {set:?}"
            )));
        }
        running.push(pod_name);
    }
    for pod_name in &running {
        pods::finish(&pods_api, pod_name, 0, 0).await?;
    }
    wait::until(
        &format!("{}/{name} to succeed", ar.kind),
        wait::default_timeout(),
        || async {
            let job = jobs
                .get(&name)
                .await
                .map_err(Error::kube(format!("reading {name}")))?;
            let succeeded = job.data["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Succeeded" && c["status"] == "True")
            });
            Ok(succeeded.then_some(()))
        },
    )
    .await?;
    drop(guard);
    ns.delete().await
}
