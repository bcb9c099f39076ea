#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Issue #12's chaos smoke in the test suite: the soak's mixed work for 100 s while the operator
//! is SIGKILLed every 5 s and restarted, kube-apiserver and etcd are restarted and the API server
//! is frozen, then the leader of two `--leader-elect` replicas is killed, with 20 PyTorchJobs
//! submitted at once at the start; the operator runs as its ServiceAccount. `kfop-bench --soak
//! --chaos` fails unless every job still reaches its expected end with no pod made twice for one
//! replica, no orphan, no lost event, no request its ClusterRole does not grant and no spin while
//! the API server is frozen. This test checks its verdict and that every fault really ran. The
//! resync period (10 min) outlasts the run plus a job's 300 s deadline, so no resync heals a
//! stranded job before it is counted.
mod support;
use support::bench;

#[test]
fn faults_strand_double_and_orphan_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let output = bench(
        &[
            "--soak",
            "100s",
            "--chaos",
            "--rate",
            "0.5",
            "--soak-resync",
            "10m",
            "--nodes",
            "2",
            "--burst-jobs",
            "20",
        ],
        dir.path(),
    );
    let report = std::fs::read_to_string(dir.path().join("chaos.md")).unwrap_or_default();
    assert!(
        output.status.success(),
        "chaos failed:\n{report}\n{}\noperator log tail:\n{}",
        String::from_utf8_lossy(&output.stderr),
        std::fs::read_to_string(dir.path().join("operator-soak.log"))
            .unwrap_or_default()
            .lines()
            .rev()
            .take(40)
            .collect::<Vec<_>>()
            .join("\n")
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("chaos.json")).unwrap()).unwrap();
    let jobs = json["jobs"].as_u64().unwrap();
    assert!(jobs >= 40, "{report}");
    assert_eq!(json["converged"].as_u64(), Some(jobs), "{report}");
    assert_eq!(
        json["duplicate_pods"].as_array().map(Vec::len),
        Some(0),
        "{report}"
    );
    assert_eq!(json["orphans"].as_array().map(Vec::len), Some(0), "{report}");
    assert_eq!(
        json["duplicate_create_events"].as_array().map(Vec::len),
        Some(0),
        "{report}"
    );
    assert_eq!(json["resync_found_work"].as_f64(), Some(0.0), "{report}");
    assert_eq!(json["resync_could_heal"].as_bool(), Some(false), "{report}");
    // The operator ran as its ServiceAccount with exactly its generated ClusterRole: any 403 was
    // the restarted API server's, to a request the role grants.
    assert_eq!(json["forbidden_responses"].as_f64(), Some(0.0), "{report}");
    for denial in json["forbidden"].as_array().unwrap() {
        assert!(
            denial.as_str().unwrap().contains("transient"),
            "{denial}: {report}"
        );
    }
    let burst = &json["burst"];
    assert_eq!(burst["succeeded"].as_u64(), Some(20), "{report}");
    for list in ["stranded", "regressed", "wrong_counts", "not_deleted"] {
        assert_eq!(burst[list].as_array().map(Vec::len), Some(0), "{list}: {report}");
    }
    let injected = &json["injected"];
    assert!(injected["operator_kills"].as_u64().unwrap() >= 3, "{report}");
    // Measured as sent: a frozen server answers nothing whatever the operator does.
    assert!(
        injected["outage_attempts_per_second"].as_f64().is_some(),
        "{report}"
    );
    for restart in [
        "apiserver_restart_seconds",
        "etcd_restart_seconds",
        "outage_seconds",
    ] {
        assert!(injected[restart].as_f64().unwrap() > 0.0, "{restart}: {report}");
    }
    for fault in [
        "OperatorKills",
        "ApiServerRestart",
        "EtcdRestart",
        "ApiServerOutage",
    ] {
        assert!(
            json["by_fault"][fault]["converged"].as_u64().unwrap() > 0,
            "{fault}: {report}"
        );
    }
}
