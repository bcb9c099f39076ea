//! A local control plane, the all-in-one operator, one sample job per kind, and each job driven
//! to Succeeded. kwok plays the kubelet, so the demo ends every running pod with exit
//! code 0 after a short "training" time.
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use kfop_operator::schemes::FrameworkConfig;
use kfop_operator::schemes::Scheme;
use kfop_operator::{register, samples, say};
use kfop_runtime::api::{JobConditionType, JobStatus};
use kfop_runtime::controller::ControllerConfig;
use kfop_runtime::k8s_openapi::api::core::v1::Pod;
use kfop_runtime::kube::api::{Api, DynamicObject, ListParams, PostParams};
use kfop_runtime::kube::{Client, ResourceExt};
use kfop_runtime::manager::{Manager, ManagerConfig};
use kfop_testenv::{ControlPlane, PlaneOptions, pods};

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Use this cluster instead of starting a local control plane (its pods must really run)
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Seconds each pod "trains" before the demo ends it (local plane only)
    #[arg(long, default_value_t = 2)]
    train_seconds: u64,
    /// Give up after this many seconds
    #[arg(long, default_value_t = 180)]
    timeout_seconds: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error(transparent)]
    Plane(#[from] kfop_testenv::Error),
    #[error(transparent)]
    Load(#[from] kfop_runtime::LoadError),
    #[error("{context}: {source}")]
    Kube {
        context: String,
        source: kfop_runtime::kube::Error,
    },
    #[error("sample {0}: {1}")]
    Sample(&'static str, String),
    #[error("jobs not Succeeded after {seconds}s: {jobs}")]
    Timeout { seconds: u64, jobs: String },
    #[error("{0} failed")]
    Failed(String),
}

const NAMESPACE: &str = "default";

fn kube(context: impl Into<String>) -> impl FnOnce(kfop_runtime::kube::Error) -> DemoError {
    let context = context.into();
    move |source| DemoError::Kube { context, source }
}

pub async fn run(args: &DemoArgs, enabled: &BTreeSet<Scheme>) -> Result<(), DemoError> {
    let started = Instant::now();
    let (client, _plane) = match &args.kubeconfig {
        Some(path) => {
            let kc = kfop_runtime::kube::config::Kubeconfig::read_from(path)
                .map_err(|e| DemoError::Sample("kubeconfig", e.to_string()))?;
            let config = kfop_runtime::kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .map_err(|e| DemoError::Sample("kubeconfig", e.to_string()))?;
            (Client::try_from(config).map_err(kube("client"))?, None)
        }
        None => {
            say("starting the local control plane (the first run builds it from Go modules: minutes)");
            kfop_testenv::Assets::locate_or_build()?;
            let plane = ControlPlane::start(PlaneOptions::default()).await?;
            say(&format!(
                "control plane up in {:.1}s: export KUBECONFIG={}",
                started.elapsed().as_secs_f64(),
                plane.kubeconfig().display()
            ));
            (plane.client().await?, Some(plane))
        }
    };
    let local = args.kubeconfig.is_none();
    // The demo's operator runs in process, without the conversion webhook: one version each.
    let crds: Vec<_> = enabled.iter().map(|s| s.crd_without_conversion()).collect();
    kfop_testenv::install_crds(&client, crds.clone()).await?;

    let config = ManagerConfig {
        controller: ControllerConfig::default(),
        reporter: "kfop-operator".into(),
        ..ManagerConfig::default()
    };
    let manager = register(
        Manager::new(client.clone(), config),
        enabled,
        &FrameworkConfig::default(),
    )?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let operator = tokio::spawn(manager.run(async move {
        let _ = stopped.await;
    }));
    say(&format!("operator running {} kinds", enabled.len()));

    let mut jobs = Vec::new();
    for scheme in enabled {
        let (file, mut obj) = samples::sample(*scheme).map_err(|e| DemoError::Sample(e.file, e.message))?;
        obj.metadata.namespace = Some(NAMESPACE.to_owned());
        let ar = samples::api_resource(*scheme);
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &ar);
        let name = obj.name_any();
        let _ = api.delete(&name, &Default::default()).await;
        api.create(&PostParams::default(), &obj)
            .await
            .map_err(kube(format!("creating {file}")))?;
        say(&format!("submitted {}/{name}", ar.kind));
        jobs.push((ar.kind.clone(), name, api));
    }

    let result = watch(&client, &jobs, local, args).await;
    let _ = stop.send(());
    let _ = operator.await;
    result?;
    say(&format!(
        "all {} jobs Succeeded in {:.1}s",
        jobs.len(),
        started.elapsed().as_secs_f64()
    ));
    Ok(())
}

/// Prints each job's condition changes until all succeed; on the local plane, ends running pods
/// with exit code 0 after `train_seconds`.
async fn watch(
    client: &Client,
    jobs: &[(String, String, Api<DynamicObject>)],
    local: bool,
    args: &DemoArgs,
) -> Result<(), DemoError> {
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let deadline = Instant::now() + Duration::from_secs(args.timeout_seconds);
    let mut last: BTreeMap<String, String> = BTreeMap::new();
    let mut running_since: BTreeMap<String, Instant> = BTreeMap::new();
    loop {
        let mut pending = Vec::new();
        for (kind, name, api) in jobs {
            let job = api
                .get(name)
                .await
                .map_err(kube(format!("reading {kind}/{name}")))?;
            let status: JobStatus = job
                .data
                .get("status")
                .cloned()
                .and_then(|s| kfop_runtime::serde_json::from_value(s).ok())
                .unwrap_or_default();
            let state = status
                .conditions
                .last()
                .map(|c| c.type_.as_str().to_owned())
                .unwrap_or_default();
            let key = format!("{kind}/{name}");
            if last.get(&key) != Some(&state) && !state.is_empty() {
                say(&format!("{key:<40} {state}"));
                last.insert(key.clone(), state);
            }
            if status.is(JobConditionType::Failed) {
                return Err(DemoError::Failed(key));
            }
            if !status.is(JobConditionType::Succeeded) {
                pending.push(key);
            }
        }
        if pending.is_empty() {
            return Ok(());
        }
        if local {
            let selector = ListParams::default().labels("training.kubeflow.org/operator-name");
            for pod in pods_api.list(&selector).await.map_err(kube("listing pods"))? {
                if pods::phase(&pod) != "Running"
                    || pod.annotations().contains_key(pods::EXIT_CODE_ANNOTATION)
                {
                    continue;
                }
                let since = *running_since.entry(pod.name_any()).or_insert_with(Instant::now);
                if since.elapsed() >= Duration::from_secs(args.train_seconds) {
                    pods::finish(&pods_api, &pod.name_any(), 0, 0).await?;
                }
            }
        }
        if Instant::now() >= deadline {
            return Err(DemoError::Timeout {
                seconds: args.timeout_seconds,
                jobs: pending.join(", "),
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
