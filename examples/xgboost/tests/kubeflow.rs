#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Kubeflow training-operator's XGBoostJob cases (xgboostjob_controller_test.go, reference
//! §3.2) against the real control plane: resources and the Rabit/LightGBM environment, master
//! success, worker failure, the ExitCode policy, suspend and resume.

kfop_testenv::kubeflow_cases!(
    job = xgboost_operator::XGBoostJob,
    framework = xgboost_operator::framework(Default::default()).unwrap(),
    kind = "XGBoostJob",
    controller = "xgboostjob-controller",
    specs = "xgbReplicaSpecs",
    container = "xgboost",
    port_name = "xgboostjob-port",
);

const MW2: [&str; 3] = ["test-job-master-0", "test-job-worker-0", "test-job-worker-1"];

fn master_workers(workers: i32) -> Job {
    new_job(
        &[
            ("Master", replica(1, json!({}))),
            ("Worker", replica(workers, json!({}))),
        ],
        json!({}),
    )
}

/// 1 Master + 2 Workers on the default port 9999: names, labels, owners, and Kubeflow's
/// `SetPodEnv` (PYTHONUNBUFFERED is "0" in Kubeflow's xgboost.go).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_and_env() {
    let f = fixture("xgb-resources").await;
    let job = f.create(master_workers(2)).await;
    let pods = check_resources(&f, &job, &MW2, "test-job-master-0", 9999).await;
    for (name, rank) in [
        ("test-job-master-0", "0"),
        ("test-job-worker-0", "1"),
        ("test-job-worker-1", "2"),
    ] {
        let expected = strings(&[
            ("MASTER_PORT", "9999"),
            ("MASTER_ADDR", "test-job-master-0"),
            ("WORLD_SIZE", "3"),
            ("RANK", rank),
            ("PYTHONUNBUFFERED", "1"),
            ("WORKER_PORT", "9999"),
            ("WORKER_ADDRS", "test-job-worker-0,test-job-worker-1"),
        ]);
        assert_eq!(env(&pods[name]), expected, "{name}");
    }
}

/// The master Succeeded succeeds the job; the still-active workers are counted as succeeded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn master_success_succeeds_the_job() {
    let f = fixture("xgb-success").await;
    f.create(master_workers(2)).await;
    f.wait_pods(&MW2, "Running").await;
    f.condition(C::Running).await;
    pods::finish(&f.pods, "test-job-master-0", 0, 0).await.unwrap();
    let done = |s: &JobStatus| {
        s.is(C::Succeeded)
            && s.replica_statuses["Master"].succeeded == 1
            && s.replica_statuses["Worker"].succeeded == 2
    };
    let status = f.wait_status("Succeeded, replicas counted", done).await;
    assert_eq!(
        status.condition(C::Succeeded).unwrap().reason,
        "XGBoostJobSucceeded"
    );
    assert_eq!(status.condition(C::Running).unwrap().status, S::False);
    assert!(status.completion_time.is_some());
}

/// A Worker exiting 1 under the default policy (Never) fails the job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_failure_fails_the_job() {
    let f = fixture("xgb-fail").await;
    f.create(master_workers(1)).await;
    let pods = f.wait_pods(&MW2[..2], "Running").await;
    let policy = pods["test-job-worker-0"].spec.clone().unwrap().restart_policy;
    assert_eq!(policy.as_deref(), Some("Never"));
    pods::finish(&f.pods, "test-job-worker-0", 1, 0).await.unwrap();
    let status = f.condition(C::Failed).await;
    let failed = status.condition(C::Failed).unwrap();
    assert_eq!(failed.reason, "XGBoostJobFailed");
    assert!(failed.message.contains("Worker"), "{}", failed.message);
    assert_eq!(status.replica_statuses["Worker"].failed, 1);
}

/// ExitCode policy with exit code 137: the pod is replaced and the job is Restarting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_code_137_replaces_the_pod() {
    let f = fixture("xgb-restart").await;
    f.create(new_job(
        &[("Master", replica(1, json!({ "restartPolicy": "ExitCode" })))],
        json!({}),
    ))
    .await;
    let pods = f.wait_pods(&["test-job-master-0"], "Running").await;
    let policy = pods["test-job-master-0"].spec.clone().unwrap().restart_policy;
    assert_eq!(policy.as_deref(), Some("Never"));
    f.fail_and_replace("Master", "test-job-master-0", 137).await;
    let status = f.condition(C::Restarting).await;
    assert_eq!(
        status.condition(C::Restarting).unwrap().reason,
        "XGBoostJobRestarting"
    );
    assert!(
        !status.is(C::Failed) && !status.is(C::Running),
        "{:?}",
        conditions(&status)
    );
    assert_eq!(
        f.event("XGBoostJobRestarting").await.type_.as_deref(),
        Some("Warning")
    );
}

/// §3.2 case 4 for XGBoost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_and_resume() {
    let f = fixture("xgb-suspend").await;
    f.create(master_workers(1)).await;
    suspend_then_resume(&f, &MW2[..2], None).await;
}
