//! `kfop-bench --soak DURATION --chaos`: the soak's workload while faults are injected in turn —
//! the operator SIGKILLed every 5 s and restarted at once, kube-apiserver restarted (same etcd),
//! etcd restarted (data kept), kube-apiserver frozen (SIGSTOP) for up to 30 s so the operator's
//! connections hang, and a leader failover: two `--leader-elect` replicas, the leader SIGKILLed.
//! Each job is labelled with the fault running when it was created, so the results say per fault
//! what converged.
use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kfop_operator::deploy;
use kfop_testenv::ControlPlane;
use kube::Client;
use kube::api::{Api, PostParams};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::operator::{self, Operator};

/// How often the operator is killed during the kill phase.
const KILL_EVERY: Duration = Duration::from_secs(5);
/// The longest outage.
const MAX_OUTAGE: Duration = Duration::from_secs(30);
/// Requests per second the operator may send while the API server is frozen: its watches back off
/// (0.8 s doubling to 30 s) and its reconciles wait on requests that hang, so a few at most; an
/// operator retrying in a loop sends hundreds.
pub const MAX_OUTAGE_ATTEMPTS_PER_SECOND: f64 = 10.0;

/// The faults, in the order they run, each from its fraction of the run on.
const SCHEDULE: [(f64, Fault); 6] = [
    (0.0, Fault::OperatorKills),
    (0.25, Fault::ApiServerRestart),
    (0.4, Fault::EtcdRestart),
    (0.5, Fault::ApiServerOutage),
    (0.65, Fault::LeaderFailover),
    (0.85, Fault::Calm),
];

/// The replicas' Lease, and how long it lasts (the operator's `--leader-elect` lease).
const LEASE: &str = "kfop-chaos";
const LEASE_SECONDS: f64 = 15.0;
/// The slowest failover accepted: the lease expires at most its duration after the leader's last
/// renewal, and the standby must then notice and take it.
pub const MAX_FAILOVER_SECONDS: f64 = LEASE_SECONDS + 5.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Fault {
    OperatorKills,
    ApiServerRestart,
    EtcdRestart,
    ApiServerOutage,
    LeaderFailover,
    Calm,
}

/// The fault running at `elapsed` of a run lasting `duration`.
pub fn fault_at(elapsed: Duration, duration: Duration) -> Fault {
    let at = elapsed.as_secs_f64() / duration.as_secs_f64().max(1.0);
    SCHEDULE
        .iter()
        .rev()
        .find(|(from, _)| at >= *from)
        .map_or(Fault::Calm, |(_, fault)| *fault)
}

/// What the injection did and measured.
#[derive(Debug, Default, Serialize)]
pub struct Injected {
    pub operator_kills: usize,
    /// Seconds from a restarted operator's start to its `/readyz`, the longest.
    pub max_operator_ready_seconds: f64,
    /// Seconds for the API server to be ready after its restart, and after etcd's.
    pub apiserver_restart_seconds: f64,
    pub etcd_restart_seconds: f64,
    pub outage_seconds: f64,
    /// API requests the operator sent while the API server was frozen.
    pub outage_attempts: f64,
    /// API requests per second the operator sent while the API server was frozen (it must back
    /// off, not spin), counted as they were sent (`kfop_client_request_attempts_total`).
    pub outage_attempts_per_second: f64,
    /// Requests per second answered (or failed) meanwhile (`kfop_client_requests_total`): ~0
    /// whatever the operator does, as a frozen server answers nothing; shown for contrast.
    pub outage_answered_per_second: f64,
    /// Seconds from SIGKILL of the leader to the standby's first write (the lease lasts 15 s).
    pub failover_seconds: f64,
    /// Resync passes and found work summed over every operator process of the run.
    pub resyncs: f64,
    pub resync_found_work: f64,
    /// 403 responses to the operator, which runs as its ServiceAccount, summed over every
    /// process by the request denied; [`classify`] says which its ClusterRole really lacks.
    pub forbidden: Vec<Denial>,
}

/// 403 responses to one kind of request (`kfop_client_forbidden_total`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Denial {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub namespace: String,
    pub responses: f64,
    /// Whether a SubjectAccessReview of the operator's ServiceAccount, asked after the run, denies
    /// the request too: the ClusterRole lacks the permission. When it allows it, the 403s were
    /// the API server's (a restarted one denies until its RBAC cache has synced).
    pub permission_missing: Option<bool>,
}

impl std::fmt::Display for Denial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        write!(f, "{} {group}/{}", self.verb, self.resource)?;
        if !self.namespace.is_empty() {
            write!(f, " in {}", self.namespace)?;
        }
        let cause = match self.permission_missing {
            Some(true) => "the ClusterRole lacks it",
            Some(false) => "the ClusterRole grants it: transient",
            None => "not reviewed",
        };
        write!(f, ": {} responses ({cause})", self.responses)
    }
}

/// Adds the 403s of one process's `/metrics` text to `into`.
fn add_forbidden(metrics: &str, into: &mut Vec<Denial>) {
    for (labels, count) in operator::series(metrics, "kfop_client_forbidden_total") {
        let label = |key: &str| labels.get(key).cloned().unwrap_or_default();
        let denial = Denial {
            verb: label("verb"),
            group: label("group"),
            resource: label("resource"),
            namespace: label("namespace"),
            responses: count,
            permission_missing: None,
        };
        let same = |d: &&mut Denial| {
            (&d.verb, &d.group, &d.resource, &d.namespace)
                == (&denial.verb, &denial.group, &denial.resource, &denial.namespace)
        };
        match into.iter_mut().find(same) {
            Some(known) => known.responses += count,
            None => into.push(denial),
        }
    }
}

/// Asks the API server, with a SubjectAccessReview of the operator's ServiceAccount, whether each
/// denied request is allowed now that the run is over: the cause of its 403s.
pub async fn classify(client: &Client, denials: &mut [Denial]) -> Result<()> {
    let reviews: Api<SubjectAccessReview> = Api::all(client.clone());
    for denial in denials.iter_mut().filter(|d| d.responses > 0.0) {
        if denial.resource.is_empty() {
            // A non-resource path (`/version`): its path is not kept, so it cannot be reviewed.
            continue;
        }
        let (resource, subresource) = match denial.resource.split_once('/') {
            Some((resource, sub)) => (resource, Some(sub.to_owned())),
            None => (denial.resource.as_str(), None),
        };
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(deploy::service_account_user()),
                groups: Some(deploy::service_account_groups().to_vec()),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(denial.verb.clone()),
                    group: Some(denial.group.clone()),
                    resource: Some(resource.to_owned()),
                    subresource,
                    namespace: (!denial.namespace.is_empty()).then(|| denial.namespace.clone()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let answer = reviews
            .create(&PostParams::default(), &review)
            .await
            .map_err(Error::kube(format!("reviewing {denial}")))?;
        denial.permission_missing = Some(!answer.status.is_some_and(|s| s.allowed));
    }
    Ok(())
}

/// The operator processes of a run: one at a time, restarted as the faults demand.
pub struct Operators {
    pub bin: PathBuf,
    /// Who the operator is: a kubeconfig acting as its ServiceAccount.
    pub kubeconfig: PathBuf,
    pub flags: Vec<String>,
    pub log: PathBuf,
    pub current: Option<Operator>,
}

impl Operators {
    /// Starts a new process and waits until it is ready; returns how long that took (s).
    pub async fn start(&mut self) -> Result<f64> {
        let started = Instant::now();
        let mut next = Operator::spawn(&self.bin, &self.kubeconfig, &self.flags, &self.log).await?;
        next.wait_ready(Duration::from_secs(120)).await?;
        self.current = Some(next);
        Ok(started.elapsed().as_secs_f64())
    }

    /// A replica holding (or waiting for) the chaos Lease.
    async fn replica(&self, identity: &str, namespace: &str) -> Result<Operator> {
        let mut flags = self.flags.clone();
        flags.extend([
            "--leader-elect".to_owned(),
            format!("--leader-election-id={LEASE}"),
            format!("--leader-election-namespace={namespace}"),
        ]);
        Operator::spawn_as(
            &self.bin,
            &self.kubeconfig,
            &flags,
            &self.log,
            Some(identity),
            &[],
        )
        .await
    }

    /// Adds the current process's resync and forbidden counters to `into`.
    pub async fn count(&self, into: &mut Injected) {
        if let Some(current) = &self.current
            && let Ok(metrics) = current.scrape().await
        {
            into.resyncs += operator::sum(&metrics, "kfop_resyncs_total", |_| true);
            into.resync_found_work += operator::sum(&metrics, "kfop_resync_found_work_total", |_| true);
            add_forbidden(&metrics, &mut into.forbidden);
        }
    }

    /// The current process's requests sent so far, and answered so far; NaN when they cannot
    /// be read, so a failed scrape shows as no figure rather than as 0.
    async fn requests(&self) -> (f64, f64) {
        match &self.current {
            Some(current) => current.scrape().await.map_or((f64::NAN, f64::NAN), |m| {
                (
                    operator::sum(&m, "kfop_client_request_attempts_total", |_| true),
                    operator::sum(&m, "kfop_client_requests_total", |_| true),
                )
            }),
            None => (f64::NAN, f64::NAN),
        }
    }

    /// Counts the last process and stops it.
    pub async fn finish(&mut self, into: &mut Injected) -> Result<()> {
        self.count(into).await;
        match self.current.take() {
            Some(current) => current.stop(Duration::from_secs(10)).await,
            None => Ok(()),
        }
    }
}

/// Writes a process sent, but for its Lease and its events: what a leader does and a standby
/// does not.
async fn writes(operator: &Operator) -> f64 {
    operator.scrape().await.map_or(0.0, |m| {
        operator::sum(&m, "kfop_client_requests_total", |l| {
            matches!(
                l.get("verb").map(String::as_str),
                Some("create" | "patch" | "update" | "delete")
            ) && !matches!(l.get("resource").map(String::as_str), Some("leases" | "events"))
        })
    })
}

/// Runs the fault schedule over `duration` from `start`; the replicas' Lease lives in `namespace`.
pub async fn inject(
    plane: &mut ControlPlane,
    operators: &mut Operators,
    start: Instant,
    duration: Duration,
    namespace: &str,
) -> Result<Injected> {
    let mut done = Injected::default();
    let from = |fault: Fault| {
        let fraction = SCHEDULE
            .iter()
            .find(|(_, f)| *f == fault)
            .map_or(1.0, |(at, _)| *at);
        start + duration.mul_f64(fraction)
    };
    let until = |fault: Fault| {
        SCHEDULE
            .iter()
            .skip_while(|(_, f)| *f != fault)
            .nth(1)
            .map_or(start + duration, |(_, next)| from(*next))
    };

    // The operator killed every few seconds and restarted at once.
    while Instant::now() + KILL_EVERY < until(Fault::OperatorKills) {
        tokio::time::sleep(KILL_EVERY).await;
        operators.count(&mut done).await;
        if let Some(current) = operators.current.take() {
            current.kill().await;
        }
        done.operator_kills += 1;
        let ready = operators.start().await?;
        done.max_operator_ready_seconds = done.max_operator_ready_seconds.max(ready);
    }

    tokio::time::sleep_until(from(Fault::ApiServerRestart).into()).await;
    let restarted = Instant::now();
    plane.restart("kube-apiserver", Duration::from_secs(120)).await?;
    done.apiserver_restart_seconds = restarted.elapsed().as_secs_f64();

    tokio::time::sleep_until(from(Fault::EtcdRestart).into()).await;
    let restarted = Instant::now();
    plane.restart("etcd", Duration::from_secs(120)).await?;
    done.etcd_restart_seconds = restarted.elapsed().as_secs_f64();

    tokio::time::sleep_until(from(Fault::ApiServerOutage).into()).await;
    let outage = MAX_OUTAGE.min(until(Fault::ApiServerOutage).saturating_duration_since(Instant::now()) / 2);
    let (sent, answered) = operators.requests().await;
    plane.freeze("kube-apiserver", true)?;
    tokio::time::sleep(outage).await;
    // Scraped before the thaw: what was sent while nothing could answer.
    let (sent_after, answered_after) = operators.requests().await;
    plane.freeze("kube-apiserver", false)?;
    done.outage_seconds = outage.as_secs_f64();
    let per_second = |n: f64| n / outage.as_secs_f64().max(1.0);
    done.outage_attempts = sent_after - sent;
    done.outage_attempts_per_second = per_second(sent_after - sent);
    done.outage_answered_per_second = per_second(answered_after - answered);

    // Two replicas under leader election in place of the single operator; the leader dies.
    tokio::time::sleep_until(from(Fault::LeaderFailover).into()).await;
    operators.count(&mut done).await;
    if let Some(single) = operators.current.take() {
        single.stop(Duration::from_secs(10)).await?;
    }
    let mut leader = operators.replica("replica-a", namespace).await?;
    leader.wait_ready(Duration::from_secs(120)).await?;
    let standby = operators.replica("replica-b", namespace).await?;
    // The standby must be waiting, not leading, before the leader goes.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = writes(&standby).await;
    let killed = Instant::now();
    operators.current = Some(leader);
    operators.count(&mut done).await;
    if let Some(leader) = operators.current.take() {
        leader.kill().await;
    }
    let deadline = killed + Duration::from_secs_f64(LEASE_SECONDS * 4.0);
    while writes(&standby).await <= before && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    done.failover_seconds = killed.elapsed().as_secs_f64();
    operators.current = Some(standby);
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_follow_the_schedule() {
        let d = Duration::from_secs(100);
        let f = |s: u64| fault_at(Duration::from_secs(s), d);
        assert_eq!(f(0), Fault::OperatorKills);
        assert_eq!(f(24), Fault::OperatorKills);
        assert_eq!(f(25), Fault::ApiServerRestart);
        assert_eq!(f(45), Fault::EtcdRestart);
        assert_eq!(f(60), Fault::ApiServerOutage);
        assert_eq!(f(70), Fault::LeaderFailover);
        assert_eq!(f(90), Fault::Calm);
        assert_eq!(f(500), Fault::Calm);
    }

    #[test]
    fn forbidden_counts_add_up_over_processes_by_request() {
        let first = "kfop_client_forbidden_total{verb=\"create\",group=\"events.k8s.io\",resource=\"events\",namespace=\"soak\"} 3\n";
        let second = "kfop_client_forbidden_total{verb=\"create\",group=\"events.k8s.io\",resource=\"events\",namespace=\"soak\"} 2\n\
                      kfop_client_forbidden_total{verb=\"list\",group=\"\",resource=\"pods\",namespace=\"\"} 1\n";
        let mut denials = Vec::new();
        add_forbidden(first, &mut denials);
        add_forbidden(second, &mut denials);
        assert_eq!(denials.len(), 2);
        assert_eq!(denials[0].responses, 5.0);
        assert_eq!(
            denials[0].to_string(),
            "create events.k8s.io/events in soak: 5 responses (not reviewed)"
        );
        assert_eq!(
            denials[1].to_string(),
            "list core/pods: 1 responses (not reviewed)"
        );
    }
}
