#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Kubeflow training-operator's MXJob cases (mxjob_controller_test.go, reference §2.7, §3.2)
//! against the real control plane: resources, MX_CONFIG and DMLC_*, scheduler success, worker
//! failure, the ExitCode policy, suspend and resume.

kfop_testenv::kubeflow_cases!(
    job = mxnet_operator::MXJob,
    framework = mxnet_operator::framework(Default::default()).unwrap(),
    kind = "MXJob",
    controller = "mxjob-controller",
    specs = "mxReplicaSpecs",
    container = "mxnet",
    port_name = "mxjob-port",
    spec = json!({ "jobMode": "MXTrain" }),
);

const ALL: [&str; 4] = [
    "test-job-scheduler-0",
    "test-job-server-0",
    "test-job-worker-0",
    "test-job-worker-1",
];

/// Scheduler x1, Server x1, Workers x`workers`; `worker` is merged into the Worker replica.
fn train(workers: i32, worker: Value) -> Job {
    let roles = [
        ("Scheduler", replica(1, json!({}))),
        ("Server", replica(1, json!({}))),
        ("Worker", replica(workers, worker)),
    ];
    new_job(&roles, json!({}))
}

fn mx_config(role: &str, index: i32) -> String {
    let host = |r: &str, i: i32| format!(r#"{{"url":"test-job-{r}-{i}","port":9091}}"#);
    format!(
        r#"{{"cluster":{{"scheduler":[{}],"server":[{}],"worker":[{},{}]}},"labels":{{"scheduler":"","server":"","worker":""}},"task":{{"type":"{role}","index":{index}}}}}"#,
        host("scheduler", 0),
        host("server", 0),
        host("worker", 0),
        host("worker", 1)
    )
}

/// Scheduler, Server and 2 Workers on the default port 9091: names, labels (the Server is
/// Kubeflow's MXNet master role), owners, and the exact MX_CONFIG and DMLC_* variables.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_and_env() {
    let f = fixture("mx-resources").await;
    let job = f.create(train(2, json!({}))).await;
    let pods = check_resources(&f, &job, &ALL, "test-job-server-0", 9091).await;
    for (name, role, index) in [
        ("test-job-scheduler-0", "scheduler", 0),
        ("test-job-server-0", "server", 0),
        ("test-job-worker-0", "worker", 0),
        ("test-job-worker-1", "worker", 1),
    ] {
        let index_str = index.to_string();
        let mut expected = strings(&[
            ("MX_CONFIG", &mx_config(role, index)),
            ("DMLC_PS_ROOT_PORT", "9091"),
            ("DMLC_PS_ROOT_URI", "test-job-scheduler-0"),
            ("DMLC_NUM_SERVER", "1"),
            ("DMLC_NUM_WORKER", "2"),
            ("DMLC_ROLE", role),
            ("DMLC_USE_KUBERNETES", "1"),
        ]);
        if role == "worker" {
            expected.insert("DMLC_WORKER_ID".into(), index_str);
        }
        assert_eq!(env(&pods[name]), expected, "{name}");
    }
}

/// The scheduler Succeeded succeeds the job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduler_success_succeeds_the_job() {
    let f = fixture("mx-success").await;
    f.create(train(1, json!({}))).await;
    f.wait_pods(&ALL[..3], "Running").await;
    f.condition(C::Running).await;
    pods::finish(&f.pods, "test-job-scheduler-0", 0, 0).await.unwrap();
    let done = |s: &JobStatus| s.is(C::Succeeded) && s.replica_statuses["Scheduler"].succeeded == 1;
    let status = f.wait_status("Succeeded, scheduler counted", done).await;
    assert_eq!(status.condition(C::Succeeded).unwrap().reason, "MXJobSucceeded");
    assert_eq!(status.condition(C::Running).unwrap().status, S::False);
}

/// A Worker exiting 1 under the default policy (Never) fails the job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_failure_fails_the_job() {
    let f = fixture("mx-fail").await;
    f.create(train(1, json!({}))).await;
    let pods = f.wait_pods(&ALL[..3], "Running").await;
    let policy = pods["test-job-worker-0"].spec.clone().unwrap().restart_policy;
    assert_eq!(policy.as_deref(), Some("Never"));
    pods::finish(&f.pods, "test-job-worker-0", 1, 0).await.unwrap();
    let status = f.condition(C::Failed).await;
    let failed = status.condition(C::Failed).unwrap();
    assert_eq!(failed.reason, "MXJobFailed");
    assert!(failed.message.contains("Worker"), "{}", failed.message);
    assert_eq!(status.replica_statuses["Worker"].failed, 1);
}

/// ExitCode policy with exit code 137 on a single-worker job: the pod is replaced and the job
/// is Restarting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_code_137_replaces_the_pod() {
    let f = fixture("mx-restart").await;
    f.create(new_job(
        &[("Worker", replica(1, json!({ "restartPolicy": "ExitCode" })))],
        json!({}),
    ))
    .await;
    let pods = f.wait_pods(&["test-job-worker-0"], "Running").await;
    let policy = pods["test-job-worker-0"].spec.clone().unwrap().restart_policy;
    assert_eq!(policy.as_deref(), Some("Never"));
    f.fail_and_replace("Worker", "test-job-worker-0", 137).await;
    let status = f.condition(C::Restarting).await;
    assert_eq!(status.condition(C::Restarting).unwrap().reason, "MXJobRestarting");
    assert!(
        !status.is(C::Failed) && !status.is(C::Running),
        "{:?}",
        conditions(&status)
    );
    assert_eq!(f.event("MXJobRestarting").await.type_.as_deref(), Some("Warning"));
}

/// §3.2 case 4 for MXNet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_and_resume() {
    let f = fixture("mx-suspend").await;
    f.create(train(1, json!({}))).await;
    suspend_then_resume(&f, &ALL[..3], None).await;
}
