//! `--runtime-frameworks N`: the operator's memory with run-time frameworks. The release operator
//! runs with one bundled kind; then 1, then N Framework resources are applied (each its own job
//! kind), each runs one job to Succeeded, and the idle RSS after each step is compared with the
//! operator's idle RSS before any Framework, all in one run on one plane.
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use kfop_runtime::dynamic::Framework;
use kfop_runtime::kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kfop_runtime::kube::{Client, CustomResourceExt};
use kfop_testenv::pods::COMPLETE_AFTER_MS_ANNOTATION;
use serde::Serialize;
use serde_json::json;

use crate::cli::Args;
use crate::error::{Error, Result};
use crate::operator::{self, Operator};
use crate::run::start_plane;
use crate::sample;

/// How long the operator settles before its idle RSS is read, and over how many samples.
const SETTLE: Duration = Duration::from_secs(5);
const SAMPLES: usize = 8;
const NAMESPACE: &str = "default";

/// The idle RSS after one step.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    pub frameworks: usize,
    pub rss_mb: f64,
    /// Seconds from applying the step's Frameworks to every one Ready.
    pub ready_s: f64,
}

/// The manifest of run-time framework `i`: a JAX-like kind of its own.
pub fn manifest(i: usize) -> serde_json::Value {
    json!({
        "apiVersion": "kfop.dev/v1alpha1",
        "kind": "Framework",
        "metadata": {"name": format!("bench{i}")},
        "spec": {
            "group": "bench.kfop.dev",
            "version": "v1",
            "kind": format!("Bench{i}Job"),
            "container": {"name": "main", "portName": "bench-port", "port": 6666},
            "roles": [{"name": "Worker", "restartPolicy": "Never"}],
            "masterPods": "indexZero",
            "env": [
                {"name": "COORDINATOR_ADDRESS", "value": "{host.Worker.0}:{port.Worker}"},
                {"name": "PROCESS_ID", "value": "{index}"},
            ],
            "status": {"rule": "leaderOrFollowers", "followers": "Worker"},
        },
    })
}

/// The job kind of framework `i`.
pub fn kind(i: usize) -> ApiResource {
    ApiResource {
        group: "bench.kfop.dev".into(),
        version: "v1".into(),
        api_version: "bench.kfop.dev/v1".into(),
        kind: format!("Bench{i}Job"),
        plural: format!("bench{i}jobs"),
    }
}

fn kube_error(context: String) -> impl FnOnce(kfop_runtime::kube::Error) -> Error {
    move |source| Error::Kube { context, source }
}

/// Polls `check` every 200 ms until it holds or `timeout` passes.
async fn until<F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    while !check().await {
        if Instant::now() > deadline {
            return Err(Error::Phase {
                phase: "runtime-frameworks".into(),
                message: format!("{what} not within {timeout:?}"),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// Applies frameworks `range` and waits until each is Ready; the seconds that took.
pub async fn apply_ready(client: &Client, range: std::ops::Range<usize>, timeout: Duration) -> Result<f64> {
    let frameworks: Api<Framework> = Api::all(client.clone());
    let started = Instant::now();
    for i in range.clone() {
        let name = format!("bench{i}");
        let object: Framework = serde_json::from_value(manifest(i))?;
        frameworks
            .patch(
                &name,
                &PatchParams::apply("kfop-bench").force(),
                &Patch::Apply(&object),
            )
            .await
            .map_err(kube_error(format!("applying Framework {name}")))?;
    }
    for i in range {
        let name = format!("bench{i}");
        until(&format!("Framework {name} Ready"), timeout, || async {
            frameworks
                .get(&name)
                .await
                .ok()
                .and_then(|f| f.status)
                .is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.status == "True")
                })
        })
        .await?;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// A job of framework `i` named `name`: two Workers whose pods the local plane ends with exit 0
/// after `complete_after`, if given.
pub fn job(i: usize, name: &str, complete_after: Option<Duration>) -> Result<DynamicObject> {
    let mut template = json!({"spec": {"containers": [{"name": "main", "image": "busybox"}]}});
    if let Some(after) = complete_after {
        template["metadata"] =
            json!({"annotations": {COMPLETE_AFTER_MS_ANNOTATION: after.as_millis().to_string()}});
    }
    Ok(serde_json::from_value(json!({
        "apiVersion": "bench.kfop.dev/v1",
        "kind": format!("Bench{i}Job"),
        "metadata": {"name": name},
        "spec": {format!("bench{i}ReplicaSpecs"): {"Worker": {"replicas": 2, "template": template}}},
    }))?)
}

/// Applies frameworks `range`, waits until each is Ready, runs one job of each to Succeeded
/// (named apart: pod names are `<job>-<role>-<index>` whatever the kind).
async fn add(client: &Client, range: std::ops::Range<usize>, timeout: Duration) -> Result<f64> {
    let ready_s = apply_ready(client, range.clone(), timeout).await?;
    for i in range.clone() {
        let jobs: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &kind(i));
        let job = job(i, &format!("job{i}"), Some(Duration::from_millis(500)))?;
        jobs.create(&PostParams::default(), &job)
            .await
            .map_err(kube_error(format!("creating a Bench{i}Job")))?;
    }
    for i in range {
        let jobs: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &kind(i));
        until(&format!("Bench{i}Job job{i} Succeeded"), timeout, || async {
            jobs.get(&format!("job{i}")).await.ok().is_some_and(|j| {
                j.data["status"]["conditions"].as_array().is_some_and(|c| {
                    c.iter()
                        .any(|c| c["type"] == "Succeeded" && c["status"] == "True")
                })
            })
        })
        .await?;
    }
    Ok(ready_s)
}

/// The operator's mean RSS over a few samples after it settled.
async fn idle_rss(pid: u32) -> Result<f64> {
    tokio::time::sleep(SETTLE).await;
    let mut total = 0.0;
    for _ in 0..SAMPLES {
        total += sample::read(pid, 0.0)?.rss_mb;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    #[allow(clippy::cast_precision_loss)]
    Ok(total / SAMPLES as f64)
}

/// Runs the comparison with up to `count` run-time frameworks.
pub async fn run(args: &Args, count: usize) -> Result<Vec<Step>> {
    let (plane, client) = start_plane(args).await?;
    kfop_testenv::install_crds(&client, [Framework::crd()]).await?;
    std::fs::create_dir_all(&args.results).map_err(|e| Error::io(&args.results, e))?;
    let bin = operator::locate(args.operator_bin.as_deref())?;
    let log = args.results.join("operator.log");
    let flags = vec!["--enable-scheme=pytorchjob".to_owned()];
    let mut operator = Operator::spawn(&bin, plane.kubeconfig(), &flags, &log).await?;
    operator.wait_ready(Duration::from_secs(60)).await?;
    let mut steps = vec![Step {
        frameworks: 0,
        rss_mb: idle_rss(operator.pid()).await?,
        ready_s: 0.0,
    }];
    for (from, to) in [(0, 1), (1, count.max(2))] {
        let ready_s = add(&client, from..to, args.timeout).await?;
        steps.push(Step {
            frameworks: to,
            rss_mb: idle_rss(operator.pid()).await?,
            ready_s,
        });
        tracing::info!(frameworks = to, "step measured");
    }
    operator.stop(Duration::from_secs(10)).await?;
    drop(plane);
    let text = markdown(&steps);
    std::fs::write(args.results.join("results.md"), &text).map_err(|e| Error::io(&args.results, e))?;
    std::fs::write(
        args.results.join("results.json"),
        serde_json::to_string_pretty(&steps)?,
    )
    .map_err(|e| Error::io(&args.results, e))?;
    Ok(steps)
}

/// The steps as a table, each RSS as a ratio of the one-framework step's.
pub fn markdown(steps: &[Step]) -> String {
    let one = steps.iter().find(|s| s.frameworks == 1).map_or(0.0, |s| s.rss_mb);
    let mut out = String::from(
        "# Run-time frameworks: idle RSS\n\nThe release all-in-one operator (PyTorchJob compiled in), \
         after each step's Frameworks are Ready and one job of each kind has succeeded.\n\n\
         | run-time frameworks | idle RSS (MB) | vs one | applied -> all Ready (s) |\n|---|---|---|---|\n",
    );
    for s in steps {
        let ratio = if one > 0.0 { s.rss_mb / one } else { 0.0 };
        let _ = writeln!(
            out,
            "| {} | {:.1} | {ratio:.2}x | {:.1} |",
            s.frameworks, s.rss_mb, s.ready_s
        );
    }
    out
}
