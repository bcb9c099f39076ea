//! Prometheus metrics an operator exposes: Kubeflow training-operator job counters, so existing
//! dashboards and alerts keep working, controller-runtime's reconcile metrics, and the API
//! requests the operator's client sends (`kfop_client_requests_total`); controller-runtime's
//! workqueue depth and wait, and kfop's job lifecycle histograms ([`lifecycle`]).
mod lifecycle;

use std::collections::HashSet;
use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use crate::plan::Progress;

/// controller-runtime's `controller_runtime_reconcile_time_seconds` buckets, in seconds.
const RECONCILE_TIME_BUCKETS: [f64; 11] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// Labels of the Kubeflow job counters, in Kubeflow's order.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct JobLabels {
    job_namespace: String,
    framework: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: String,
}

/// Why work a resync found should already have been done: a lost event, by where it was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overdue {
    /// No trigger ever reached the controller for this job (its own watch event was lost).
    NeverTriggered,
    /// A trigger reached the controller but no reconcile started within `controller::QUEUE_BOUND`.
    TriggerDropped,
    /// The last reconcile ended quietly and the caches have changed since with no trigger (a
    /// child's watch event was lost).
    LostEvent,
}

impl Overdue {
    /// The `cause` label of `kfop_resync_found_work_total`.
    pub fn label(self) -> &'static str {
        match self {
            Self::NeverTriggered => "never_triggered",
            Self::TriggerDropped => "trigger_dropped",
            Self::LostEvent => "lost_event",
        }
    }

    pub const ALL: [Self; 3] = [Self::NeverTriggered, Self::TriggerDropped, Self::LostEvent];
}

/// Labels of `kfop_resync_found_work_total`: the controller and where the event was lost
/// (`never_triggered`, `trigger_dropped`, `lost_event`; see [`Overdue`]).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FoundWorkLabels {
    controller: String,
    cause: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    controller: String,
    result: &'static str,
}

type JobCounter = Family<JobLabels, Counter>;

/// How a job answered a child's failure (`kfop_failure_reaction_seconds`'s `reaction` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reaction {
    /// Restarting written and the failed pod deleted, to be replaced.
    Restarting,
    /// Failed written.
    Failed,
}

impl Reaction {
    /// The answer `plan` writes to a child's failure, if it writes one.
    pub fn of(plan: &crate::plan::Plan) -> Option<Self> {
        use crate::framework::JobMetric;
        if plan.metrics.contains(&JobMetric::Failed) {
            Some(Self::Failed)
        } else if plan.metrics.contains(&JobMetric::Restarted) {
            Some(Self::Restarting)
        } else {
            None
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::Restarting => "restarting",
            Self::Failed => "failed",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReactionLabels {
    kind: String,
    reaction: &'static str,
}

/// `kfop_failure_reaction_seconds` buckets: the target is 1.5 s, and a reaction stuck behind a
/// batch or a queue shows in the upper ones.
const REACTION_BUCKETS: [f64; 12] = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.5, 5.0, 10.0];

/// Labels of controller-runtime's workqueue metrics: the queue's name, which is its controller's.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    name: String,
    controller: String,
}

impl QueueLabels {
    fn of(controller: &str) -> Self {
        Self {
            name: controller.to_owned(),
            controller: controller.to_owned(),
        }
    }
}

/// Reads a controller's queue depth at scrape time.
type DepthSource = Box<dyn Fn() -> usize + Send + Sync>;

/// Labels of `kfop_client_requests_total`: the request verb (`get`, `list`, `watch`, `create`,
/// `update`, `patch`, `delete`), the resource (`pods`, `pytorchjobs/status`, ...) and the response
/// code (`200`, `409`, ... or `error` when no response arrived).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClientRequestLabels {
    pub verb: &'static str,
    pub resource: String,
    pub code: String,
}

/// Labels of `kfop_client_request_attempts_total`: what was sent, before any answer.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClientAttemptLabels {
    pub verb: &'static str,
    pub resource: String,
}

/// Labels of `kfop_client_forbidden_total`: the request a 403 denied, as a SubjectAccessReview
/// asks it (group `""` is the core group; namespace `""` a cluster-scoped request).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClientForbiddenLabels {
    pub verb: &'static str,
    pub group: String,
    pub resource: String,
    pub namespace: String,
}

/// The client's request counters. They are process-wide because the client is built before any
/// [`Metrics`] exists; every [`Metrics`] registers the same series.
#[derive(Clone, Debug, Default)]
pub struct ClientMetrics {
    /// Requests sent, by verb, resource and response code.
    pub requests: Family<ClientRequestLabels, Counter>,
    /// Requests handed to the connection, counted as they are sent: a request the server never
    /// answers (a frozen API server) counts here and not in `requests`.
    pub attempts: Family<ClientAttemptLabels, Counter>,
    /// 403 responses, by the request denied.
    pub forbidden: Family<ClientForbiddenLabels, Counter>,
    /// Seconds requests waited for a token of the client-side rate limiter.
    pub throttled_seconds: Counter<f64, AtomicU64>,
}

static CLIENT: LazyLock<ClientMetrics> = LazyLock::new(ClientMetrics::default);

/// The process-wide client metrics that [`crate::client::build`]'s layers record into.
pub fn client() -> &'static ClientMetrics {
    &CLIENT
}

/// The reconcile families; cloning shares the underlying series, so a timer can own a copy and
/// need not borrow [`Metrics`].
#[derive(Clone)]
struct ReconcileFamilies {
    total: Family<ResultLabels, Counter>,
    errors: Family<ControllerLabels, Counter>,
    time: Family<ControllerLabels, Histogram>,
}

/// An operator's metrics registry. Every method takes `&self`, so one instance behind an `Arc` serves
/// all reconcile tasks and the `/metrics` endpoint.
pub struct Metrics {
    registry: Registry,
    jobs_created: JobCounter,
    jobs_deleted: JobCounter,
    jobs_successful: JobCounter,
    jobs_failed: JobCounter,
    jobs_restarted: JobCounter,
    reconcile: ReconcileFamilies,
    resyncs: Family<ControllerLabels, Counter>,
    resync_found_work: Family<FoundWorkLabels, Counter>,
    queue_depth: Family<QueueLabels, Gauge>,
    queue_depth_sources: Mutex<Vec<(QueueLabels, DepthSource)>>,
    queue_wait: Family<QueueLabels, Histogram>,
    failure_reaction: Family<ReactionLabels, Histogram>,
    lifecycle: lifecycle::Lifecycle,
}

impl Metrics {
    /// Creates a registry with every metric family registered and no series yet.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        // Counter names omit `_total`: prometheus-client appends it when encoding.
        let mut job_counter = |name: &str, help: &str| {
            let family = JobCounter::default();
            registry.register(name, help, family.clone());
            family
        };
        let jobs_created = job_counter("training_operator_jobs_created", "Counts number of jobs created");
        let jobs_deleted = job_counter("training_operator_jobs_deleted", "Counts number of jobs deleted");
        let jobs_successful = job_counter(
            "training_operator_jobs_successful",
            "Counts number of jobs successfully finished",
        );
        let jobs_failed = job_counter("training_operator_jobs_failed", "Counts number of jobs failed");
        let jobs_restarted = job_counter(
            "training_operator_jobs_restarted",
            "Counts number of jobs restarted",
        );

        let reconcile = ReconcileFamilies {
            total: Family::default(),
            errors: Family::default(),
            time: Family::new_with_constructor(|| Histogram::new(RECONCILE_TIME_BUCKETS)),
        };
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            reconcile.total.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            reconcile.errors.clone(),
        );
        // With a unit the name gains `_seconds` and OpenMetrics gets its `# UNIT` line.
        registry.register_with_unit(
            "controller_runtime_reconcile_time",
            "Length of time per reconciliation per controller",
            Unit::Seconds,
            reconcile.time.clone(),
        );

        let resyncs = Family::<ControllerLabels, Counter>::default();
        registry.register(
            "kfop_resyncs",
            "Periodic passes over every live job (--resync-period)",
            resyncs.clone(),
        );
        let resync_found_work = Family::<FoundWorkLabels, Counter>::default();
        registry.register(
            "kfop_resync_found_work",
            "Jobs a periodic resync found work for that no watch event had triggered, by where it \
             was lost: never_triggered (no trigger ever came), trigger_dropped (no reconcile \
             started within 2 min of a trigger), lost_event (a quiet reconcile, then work with no \
             trigger); 0 in a healthy run",
            resync_found_work.clone(),
        );

        let queue_depth = Family::<QueueLabels, Gauge>::default();
        registry.register(
            "workqueue_depth",
            "Jobs waiting for a reconcile: triggered (their own or a child's watch event, a \
             resync) with no reconcile started since. kube-runtime's controller keeps its queue \
             to itself, so this is counted where kfop hands triggers to it; a job triggered while \
             its reconcile runs waits for the next one",
            queue_depth.clone(),
        );
        // controller-runtime's buckets: 10 ns to 1,000 s, by tens.
        let queue_wait = Family::<QueueLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(1e-8, 10.0, 12))
        });
        registry.register_with_unit(
            "workqueue_queue_duration",
            "How long a job waited from its first trigger to the start of its reconcile (the \
             wait workqueue_depth counts); timer requeues are not counted",
            Unit::Seconds,
            queue_wait.clone(),
        );
        let failure_reaction =
            Family::<ReactionLabels, Histogram>::new_with_constructor(|| Histogram::new(REACTION_BUCKETS));
        registry.register_with_unit(
            "kfop_failure_reaction",
            "From a child pod's failure (failed, being deleted or gone) reaching the operator to \
             the job's answer written: Restarting (the pod deleted to be replaced) or Failed, by \
             job kind",
            Unit::Seconds,
            failure_reaction.clone(),
        );
        let lifecycle = lifecycle::Lifecycle::register(&mut registry);

        let client = client();
        registry.register(
            "kfop_client_requests",
            "API requests sent by the operator's client, by verb, resource and response code",
            client.requests.clone(),
        );
        registry.register(
            "kfop_client_request_attempts",
            "API requests the operator's client sent, by verb and resource, counted when sent \
             (kfop_client_requests_total counts them when an answer or error comes back)",
            client.attempts.clone(),
        );
        registry.register(
            "kfop_client_forbidden",
            "403 responses to the operator's client, by the verb, API group, resource and \
             namespace denied",
            client.forbidden.clone(),
        );
        registry.register_with_unit(
            "kfop_client_rate_limiter_wait",
            "Time requests waited for the client-side rate limiter (--kube-api-qps/--kube-api-burst)",
            Unit::Seconds,
            client.throttled_seconds.clone(),
        );

        Self {
            registry,
            jobs_created,
            jobs_deleted,
            jobs_successful,
            jobs_failed,
            jobs_restarted,
            reconcile,
            resyncs,
            resync_found_work,
            queue_depth,
            queue_depth_sources: Mutex::default(),
            queue_wait,
            failure_reaction,
            lifecycle,
        }
    }

    /// Counts a job the operator created (`training_operator_jobs_created_total`).
    pub fn job_created(&self, namespace: &str, framework: &str) {
        inc_job(&self.jobs_created, namespace, framework);
    }

    /// Counts a job that was deleted (`training_operator_jobs_deleted_total`).
    pub fn job_deleted(&self, namespace: &str, framework: &str) {
        inc_job(&self.jobs_deleted, namespace, framework);
    }

    /// Counts a job that finished successfully (`training_operator_jobs_successful_total`).
    pub fn job_succeeded(&self, namespace: &str, framework: &str) {
        inc_job(&self.jobs_successful, namespace, framework);
    }

    /// Counts a job that failed (`training_operator_jobs_failed_total`).
    pub fn job_failed(&self, namespace: &str, framework: &str) {
        inc_job(&self.jobs_failed, namespace, framework);
    }

    /// Counts a job restart (`training_operator_jobs_restarted_total`).
    pub fn job_restarted(&self, namespace: &str, framework: &str) {
        inc_job(&self.jobs_restarted, namespace, framework);
    }

    /// Exports `controller`'s resync series at 0, so a dashboard sees them before the first
    /// resync.
    pub fn controller_started(&self, controller: &str) {
        let labels = ControllerLabels {
            controller: controller.to_owned(),
        };
        let _ = self.resyncs.get_or_create(&labels);
        for cause in Overdue::ALL {
            let _ = self.resync_found_work.get_or_create(&FoundWorkLabels {
                controller: controller.to_owned(),
                cause: cause.label(),
            });
        }
    }

    /// Counts one resync pass of `controller` (`kfop_resyncs_total`).
    pub fn resynced(&self, controller: &str) {
        self.resyncs
            .get_or_create(&ControllerLabels {
                controller: controller.to_owned(),
            })
            .inc();
    }

    /// Counts a job a resync found work for (`kfop_resync_found_work_total`), by `cause`.
    pub fn resync_found_work(&self, controller: &str, cause: &'static str) {
        self.resync_found_work
            .get_or_create(&FoundWorkLabels {
                controller: controller.to_owned(),
                cause,
            })
            .inc();
    }

    /// Exports `controller`'s queue depth (`workqueue_depth`), read from `depth` at each scrape.
    pub fn queue(&self, controller: &str, depth: impl Fn() -> usize + Send + Sync + 'static) {
        let labels = QueueLabels::of(controller);
        let _ = self.queue_depth.get_or_create(&labels);
        let _ = self.queue_wait.get_or_create(&labels);
        if let Ok(mut sources) = self.queue_depth_sources.lock() {
            sources.push((labels, Box::new(depth)));
        }
    }

    /// A job of `controller` waited `waited` from its trigger to its reconcile
    /// (`workqueue_queue_duration_seconds`).
    pub fn queue_waited(&self, controller: &str, waited: Duration) {
        self.queue_wait
            .get_or_create(&QueueLabels::of(controller))
            .observe(waited.as_secs_f64());
    }

    /// Records how long a job of `kind` took to answer a child's failure.
    pub fn failure_reaction(&self, kind: &str, reaction: Reaction, took: Duration) {
        self.failure_reaction
            .get_or_create(&ReactionLabels {
                kind: kind.to_owned(),
                reaction: reaction.label(),
            })
            .observe(took.as_secs_f64());
    }

    /// Records where the job `job` of `kind` stands after a plan (`kfop_job_pods_created_seconds`,
    /// `kfop_job_pods_running_seconds`, `kfop_job_held_seconds`), timed from its creation to now.
    pub fn job_progress(&self, kind: &str, job: &impl kube::ResourceExt, progress: Progress) {
        if let (Some(uid), Some(created)) = (job.uid(), job.creation_timestamp()) {
            self.lifecycle.observe(
                kind,
                &uid,
                created.0,
                progress,
                k8s_openapi::jiff::Timestamp::now(),
            );
        }
    }

    /// Forgets the lifecycle of the job with `uid`, gone.
    pub fn forget_job(&self, uid: &str) {
        self.lifecycle.forget(uid);
    }

    /// Forgets the lifecycle of every job of `kind` whose UID is not in `live`.
    pub fn retain_jobs(&self, kind: &str, live: &HashSet<String>) {
        self.lifecycle.retain(kind, live);
    }

    /// Starts timing one reconcile; dropping the guard records duration, and `result` counts.
    ///
    /// The result defaults to [`ReconcileResult::Success`]; call [`ReconcileTimer::set_result`]
    /// before the guard drops to record an error or a requeue. The guard owns what it needs, so it
    /// can be held across `.await` points and moved between tasks.
    pub fn reconcile(&self, controller: &str) -> ReconcileTimer {
        let labels = ControllerLabels {
            controller: controller.to_owned(),
        };
        // Like controller-runtime, export every series of a controller at 0 once it reconciles, so
        // `rate()` and absence-based alerts see the error series before the first error. Creating a
        // series is all that is needed, hence the discarded guards.
        if self.reconcile.errors.get(&labels).is_none() {
            let _ = self.reconcile.errors.get_or_create(&labels);
            for result in [
                ReconcileResult::Success,
                ReconcileResult::Error,
                ReconcileResult::Requeue,
            ] {
                let _ = self
                    .reconcile
                    .total
                    .get_or_create(&result_labels(&labels, result));
            }
        }
        ReconcileTimer {
            families: self.reconcile.clone(),
            labels,
            result: ReconcileResult::default(),
            start: Instant::now(),
        }
    }

    /// Encodes every metric in the OpenMetrics text format, ending with `# EOF`.
    pub fn encode(&self) -> String {
        if let Ok(sources) = self.queue_depth_sources.lock() {
            for (labels, depth) in sources.iter() {
                let depth = i64::try_from(depth()).unwrap_or(i64::MAX);
                self.queue_depth.get_or_create(labels).set(depth);
            }
        }
        let mut text = String::new();
        if let Err(error) = prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            // Unreachable in practice (a `String` sink and infallible label encoders); a truncated
            // exposition lacks `# EOF`, so Prometheus fails the scrape instead of storing partial data.
            tracing::error!(%error, "encoding metrics failed");
        }
        text
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

// Manual so that debug output does not dump every series.
impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

fn inc_job(family: &JobCounter, namespace: &str, framework: &str) {
    family
        .get_or_create(&JobLabels {
            job_namespace: namespace.to_owned(),
            framework: framework.to_owned(),
        })
        .inc();
}

fn result_labels(labels: &ControllerLabels, result: ReconcileResult) -> ResultLabels {
    ResultLabels {
        controller: labels.controller.clone(),
        result: result.as_label(),
    }
}

/// How a reconcile ended, the `result` label of `controller_runtime_reconcile_total`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ReconcileResult {
    /// The reconcile completed and needs no requeue.
    #[default]
    Success,
    /// The reconcile failed; also counts in `controller_runtime_reconcile_errors_total`.
    Error,
    /// The reconcile completed but asked to run again.
    Requeue,
}

impl ReconcileResult {
    /// The label value controller-runtime uses.
    fn as_label(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Error => "error",
            Self::Requeue => "requeue",
        }
    }
}

/// Guard from [`Metrics::reconcile`]; records the reconcile's duration and result when dropped.
#[must_use = "dropping the timer immediately records a zero-length reconcile"]
pub struct ReconcileTimer {
    families: ReconcileFamilies,
    labels: ControllerLabels,
    result: ReconcileResult,
    start: Instant,
}

impl ReconcileTimer {
    /// Sets the result recorded on drop; the last call wins.
    pub fn set_result(&mut self, result: ReconcileResult) {
        self.result = result;
    }
}

impl fmt::Debug for ReconcileTimer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReconcileTimer")
            .field("controller", &self.labels.controller)
            .field("result", &self.result)
            .field("start", &self.start)
            .finish_non_exhaustive()
    }
}

impl Drop for ReconcileTimer {
    fn drop(&mut self) {
        self.families
            .time
            .get_or_create(&self.labels)
            .observe(self.start.elapsed().as_secs_f64());
        self.families
            .total
            .get_or_create(&result_labels(&self.labels, self.result))
            .inc();
        if self.result == ReconcileResult::Error {
            self.families.errors.get_or_create(&self.labels).inc();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(metrics: &Metrics) -> Vec<String> {
        metrics.encode().lines().map(str::to_owned).collect()
    }

    fn assert_line(metrics: &Metrics, expected: &str) {
        let lines = lines(metrics);
        assert!(
            lines.iter().any(|line| line == expected),
            "missing `{expected}` in:\n{}",
            lines.join("\n")
        );
    }

    #[test]
    fn is_send_and_sync() {
        fn check<T: Send + Sync + 'static>() {}
        check::<Metrics>();
        check::<ReconcileTimer>();
    }

    #[test]
    fn no_series_before_any_event() {
        // prometheus-client leaves out families without series, so only the process-wide client
        // counters (shared with other tests of this process) and the EOF marker remain.
        let text = Metrics::new().encode();
        assert!(text.ends_with("# EOF\n"), "{text}");
        let other: Vec<&str> = text
            .lines()
            .filter(|l| !l.contains("kfop_client_") && *l != "# EOF")
            .collect();
        assert!(other.is_empty(), "{other:?}");
    }

    #[test]
    fn descriptors_name_each_family_once_without_a_doubled_suffix() {
        let metrics = Metrics::new();
        metrics.job_created("ns", "pytorch");
        metrics.job_deleted("ns", "pytorch");
        metrics.job_succeeded("ns", "pytorch");
        metrics.job_failed("ns", "pytorch");
        metrics.job_restarted("ns", "pytorch");
        drop(metrics.reconcile("pytorchjob"));
        let text = metrics.encode();

        for name in [
            "training_operator_jobs_created",
            "training_operator_jobs_deleted",
            "training_operator_jobs_successful",
            "training_operator_jobs_failed",
            "training_operator_jobs_restarted",
            "controller_runtime_reconcile",
            "controller_runtime_reconcile_errors",
        ] {
            assert_eq!(
                text.matches(&format!("# TYPE {name} counter\n")).count(),
                1,
                "{name} in:\n{text}"
            );
        }
        assert_line(
            &metrics,
            "# TYPE controller_runtime_reconcile_time_seconds histogram",
        );
        assert_line(
            &metrics,
            "# UNIT controller_runtime_reconcile_time_seconds seconds",
        );
        assert_line(
            &metrics,
            "# HELP training_operator_jobs_created Counts number of jobs created.",
        );
        assert!(!text.contains("_total_total"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn job_counters_expose_kubeflow_names_and_labels() {
        let metrics = Metrics::default();
        metrics.job_created("ns", "pytorch");
        metrics.job_created("ns", "pytorch");
        metrics.job_created("other", "tensorflow");
        metrics.job_deleted("ns", "pytorch");
        metrics.job_succeeded("ns", "pytorch");
        metrics.job_failed("ns", "xgboost");
        metrics.job_restarted("ns", "pytorch");

        assert_line(
            &metrics,
            r#"training_operator_jobs_created_total{job_namespace="ns",framework="pytorch"} 2"#,
        );
        assert_line(
            &metrics,
            r#"training_operator_jobs_created_total{job_namespace="other",framework="tensorflow"} 1"#,
        );
        assert_line(
            &metrics,
            r#"training_operator_jobs_deleted_total{job_namespace="ns",framework="pytorch"} 1"#,
        );
        assert_line(
            &metrics,
            r#"training_operator_jobs_successful_total{job_namespace="ns",framework="pytorch"} 1"#,
        );
        assert_line(
            &metrics,
            r#"training_operator_jobs_failed_total{job_namespace="ns",framework="xgboost"} 1"#,
        );
        assert_line(
            &metrics,
            r#"training_operator_jobs_restarted_total{job_namespace="ns",framework="pytorch"} 1"#,
        );
    }

    #[test]
    fn label_values_are_escaped() {
        let metrics = Metrics::new();
        metrics.job_created("a\"b", "x\\y");
        assert_line(
            &metrics,
            r#"training_operator_jobs_created_total{job_namespace="a\"b",framework="x\\y"} 1"#,
        );
    }

    #[test]
    fn dropped_timer_records_success_and_duration() {
        let metrics = Metrics::new();
        drop(metrics.reconcile("pytorchjob"));

        assert_line(
            &metrics,
            r#"controller_runtime_reconcile_total{controller="pytorchjob",result="success"} 1"#,
        );
        assert_line(
            &metrics,
            r#"controller_runtime_reconcile_total{controller="pytorchjob",result="error"} 0"#,
        );
        assert_line(
            &metrics,
            r#"controller_runtime_reconcile_total{controller="pytorchjob",result="requeue"} 0"#,
        );
        assert_line(
            &metrics,
            r#"controller_runtime_reconcile_errors_total{controller="pytorchjob"} 0"#,
        );
        assert_line(
            &metrics,
            r#"controller_runtime_reconcile_time_seconds_count{controller="pytorchjob"} 1"#,
        );
        assert_line(
            &metrics,
            r#"controller_runtime_reconcile_time_seconds_bucket{le="+Inf",controller="pytorchjob"} 1"#,
        );
        // Counts in the finite buckets depend on how fast the machine ran the test, so check bounds only.
        let text = metrics.encode();
        let bounds: Vec<&str> = text
            .lines()
            .filter_map(|line| line.strip_prefix("controller_runtime_reconcile_time_seconds_bucket{le=\""))
            .filter_map(|rest| rest.split('"').next())
            .collect();
        assert_eq!(
            bounds,
            [
                "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0", "+Inf"
            ]
        );
    }

    #[test]
    fn error_result_counts_an_error() {
        let metrics = Metrics::new();
        let mut timer = metrics.reconcile("tfjob");
        timer.set_result(ReconcileResult::Error);
        drop(timer);
        let mut timer = metrics.reconcile("tfjob");
        timer.set_result(ReconcileResult::Requeue);
        drop(timer);

        assert_line(
            &metrics,
            r#"controller_runtime_reconcile_errors_total{controller="tfjob"} 1"#,
        );
        assert_line(
            &metrics,
            r#"controller_runtime_reconcile_total{controller="tfjob",result="error"} 1"#,
        );
        assert_line(
            &metrics,
            r#"controller_runtime_reconcile_total{controller="tfjob",result="requeue"} 1"#,
        );
        assert_line(
            &metrics,
            r#"controller_runtime_reconcile_total{controller="tfjob",result="success"} 0"#,
        );
        assert_line(
            &metrics,
            r#"controller_runtime_reconcile_time_seconds_count{controller="tfjob"} 2"#,
        );
    }

    #[test]
    fn nothing_is_recorded_until_the_timer_drops() {
        let metrics = Metrics::new();
        let timer = metrics.reconcile("mpijob");
        assert_line(
            &metrics,
            r#"controller_runtime_reconcile_total{controller="mpijob",result="success"} 0"#,
        );
        assert!(
            !metrics
                .encode()
                .contains("controller_runtime_reconcile_time_seconds_count")
        );
        drop(timer);
        assert_line(
            &metrics,
            r#"controller_runtime_reconcile_total{controller="mpijob",result="success"} 1"#,
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn timers_from_many_tasks_all_count() {
        let metrics = std::sync::Arc::new(Metrics::new());
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let metrics = metrics.clone();
                tokio::spawn(async move {
                    let timer = metrics.reconcile("jaxjob");
                    tokio::task::yield_now().await;
                    drop(timer);
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        assert_line(
            &metrics,
            r#"controller_runtime_reconcile_total{controller="jaxjob",result="success"} 16"#,
        );
        assert_line(
            &metrics,
            r#"controller_runtime_reconcile_time_seconds_count{controller="jaxjob"} 16"#,
        );
    }

    #[test]
    fn queue_depth_is_read_at_each_scrape_and_waits_count() {
        let metrics = Metrics::new();
        let depth = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(3));
        let read = depth.clone();
        metrics.queue("tfjob-controller", move || {
            read.load(std::sync::atomic::Ordering::Relaxed)
        });
        let labels = r#"{name="tfjob-controller",controller="tfjob-controller"}"#;
        assert_line(&metrics, &format!("workqueue_depth{labels} 3"));
        depth.store(0, std::sync::atomic::Ordering::Relaxed);
        assert_line(&metrics, &format!("workqueue_depth{labels} 0"));
        assert_line(
            &metrics,
            &format!("workqueue_queue_duration_seconds_count{labels} 0"),
        );
        metrics.queue_waited("tfjob-controller", Duration::from_millis(20));
        assert_line(
            &metrics,
            &format!("workqueue_queue_duration_seconds_count{labels} 1"),
        );
        assert_line(
            &metrics,
            &format!("workqueue_queue_duration_seconds_sum{labels} 0.02"),
        );
    }

    #[test]
    fn client_requests_are_served() {
        let labels = ClientRequestLabels {
            verb: "create",
            resource: "metrics-test-widgets".into(),
            code: "201".into(),
        };
        client().requests.get_or_create(&labels).inc();
        let metrics = Metrics::new();
        let text = metrics.encode();
        assert!(
            text.lines().any(|l| l.starts_with(
                r#"kfop_client_requests_total{verb="create",resource="metrics-test-widgets",code="201"} "#
            )),
            "{text}"
        );
        assert!(
            text.contains("# TYPE kfop_client_rate_limiter_wait_seconds counter"),
            "{text}"
        );
    }
}
