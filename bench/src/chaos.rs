//! `kfop-bench --soak DURATION --chaos`: the soak's workload while faults are injected in turn —
//! the operator SIGKILLed every 5 s and restarted at once, kube-apiserver restarted (same etcd),
//! etcd restarted (data kept), kube-apiserver frozen (SIGSTOP) for up to 30 s so the operator's
//! connections hang, and a leader failover: two `--leader-elect` replicas, the leader SIGKILLed.
//! Each job is labelled with the fault running when it was created, so the results say per fault
//! what converged.
use std::path::PathBuf;
use std::time::{Duration, Instant};

use kfop_testenv::ControlPlane;
use serde::Serialize;

use crate::error::Result;
use crate::operator::{self, Operator};

/// How often the operator is killed during the kill phase.
const KILL_EVERY: Duration = Duration::from_secs(5);
/// The longest outage.
const MAX_OUTAGE: Duration = Duration::from_secs(30);

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
    /// API requests per second the operator sent while the API server was frozen (it must back
    /// off, not spin).
    pub outage_requests_per_second: f64,
    /// Seconds from SIGKILL of the leader to the standby's first write (the lease lasts 15 s).
    pub failover_seconds: f64,
    /// Resync passes and found work summed over every operator process of the run.
    pub resyncs: f64,
    pub resync_found_work: f64,
    /// Responses 403 to the operator, which runs as its ServiceAccount: a permission missing from
    /// its ClusterRole.
    pub forbidden_responses: f64,
    /// Of those, the ones between the kube-apiserver restart and the outage: a restarting API
    /// server answers before its `/readyz` is ok and denies while its RBAC cache is empty, which
    /// is not a permission the ClusterRole lacks.
    pub forbidden_after_restarts: f64,
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
        Operator::spawn_as(&self.bin, &self.kubeconfig, &flags, &self.log, Some(identity)).await
    }

    /// Adds the current process's resync and forbidden counters to `into`.
    pub async fn count(&self, into: &mut Injected) {
        if let Some(current) = &self.current
            && let Ok(metrics) = current.scrape().await
        {
            into.resyncs += operator::sum(&metrics, "kfop_resyncs_total", |_| true);
            into.resync_found_work += operator::sum(&metrics, "kfop_resync_found_work_total", |_| true);
            into.forbidden_responses += operator::sum(&metrics, "kfop_client_requests_total", forbidden);
        }
    }

    /// The current process's API requests whose labels satisfy `filter`.
    async fn requests(&self, filter: impl Fn(&Labels) -> bool) -> f64 {
        match &self.current {
            Some(current) => current
                .scrape()
                .await
                .map_or(0.0, |m| operator::sum(&m, "kfop_client_requests_total", filter)),
            None => 0.0,
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

type Labels = std::collections::BTreeMap<String, String>;

fn forbidden(labels: &Labels) -> bool {
    labels.get("code").is_some_and(|c| c == "403")
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
    let forbidden_before = operators.requests(forbidden).await;
    let restarted = Instant::now();
    plane.restart("kube-apiserver", Duration::from_secs(120)).await?;
    done.apiserver_restart_seconds = restarted.elapsed().as_secs_f64();

    tokio::time::sleep_until(from(Fault::EtcdRestart).into()).await;
    let restarted = Instant::now();
    plane.restart("etcd", Duration::from_secs(120)).await?;
    done.etcd_restart_seconds = restarted.elapsed().as_secs_f64();

    tokio::time::sleep_until(from(Fault::ApiServerOutage).into()).await;
    done.forbidden_after_restarts = operators.requests(forbidden).await - forbidden_before;
    let outage = MAX_OUTAGE.min(until(Fault::ApiServerOutage).saturating_duration_since(Instant::now()) / 2);
    let before = operators.requests(|_| true).await;
    plane.freeze("kube-apiserver", true)?;
    tokio::time::sleep(outage).await;
    let during = operators.requests(|_| true).await - before;
    plane.freeze("kube-apiserver", false)?;
    done.outage_seconds = outage.as_secs_f64();
    done.outage_requests_per_second = during / outage.as_secs_f64().max(1.0);

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
}
