#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Kubeflow training-operator's JAXJob (v1.9) behaviour (reference §2.8, §3.2) against the
//! real control plane: resources and the coordinator environment, success when every worker
//! succeeds, failure, the ExitCode policy, suspend and resume.

kfop_testenv::kubeflow_cases!(
    job = jax_operator::JAXJob,
    framework = jax_operator::framework(Default::default()).unwrap(),
    kind = "JAXJob",
    controller = "jaxjob-controller",
    specs = "jaxReplicaSpecs",
    container = "jax",
    port_name = "jaxjob-port",
);

const W2: [&str; 2] = ["test-job-worker-0", "test-job-worker-1"];

fn workers(n: i32, extra: Value) -> Job {
    new_job(&[("Worker", replica(n, extra))], json!({}))
}

/// 2 Workers on the default port 6666: names, labels, owners, service port and the
/// coordinator variables. Kubeflow's JAX `IsMasterRole` is `index == 0`, so worker 0 carries
/// `job-role=master`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_and_env() {
    let f = fixture("jax-resources").await;
    let job = f.create(workers(2, json!({}))).await;
    let pods = check_resources(&f, &job, &W2, "test-job-worker-0", 6666).await;
    check_env(&pods);
}

fn check_env(pods: &BTreeMap<String, Pod>) {
    for (name, id) in [("test-job-worker-0", "0"), ("test-job-worker-1", "1")] {
        let expected = strings(&[
            ("PYTHONUNBUFFERED", "1"),
            ("COORDINATOR_PORT", "6666"),
            ("COORDINATOR_ADDRESS", "test-job-worker-0"),
            ("NUM_PROCESSES", "2"),
            ("PROCESS_ID", id),
        ]);
        assert_eq!(env(&pods[name]), expected, "{name}");
    }
}

/// Every worker Succeeded succeeds the job; one is not enough.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_workers_succeed_the_job() {
    let f = fixture("jax-success").await;
    f.create(workers(2, json!({}))).await;
    f.wait_pods(&W2, "Running").await;
    f.condition(C::Running).await;
    pods::finish(&f.pods, "test-job-worker-0", 0, 0).await.unwrap();
    let one = |s: &JobStatus| s.replica_statuses.get("Worker").is_some_and(|w| w.succeeded == 1);
    let status = f.wait_status("worker 0 counted", one).await;
    assert!(
        !status.is(C::Succeeded) && status.is(C::Running),
        "{:?}",
        conditions(&status)
    );
    pods::finish(&f.pods, "test-job-worker-1", 0, 0).await.unwrap();
    let done = |s: &JobStatus| s.is(C::Succeeded) && s.replica_statuses["Worker"].succeeded == 2;
    let status = f.wait_status("Succeeded, workers counted", done).await;
    assert_eq!(status.condition(C::Succeeded).unwrap().reason, "JAXJobSucceeded");
    assert_eq!(status.condition(C::Running).unwrap().status, S::False);
}

/// A Worker exiting 1 under the default policy (Never) fails the job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_failure_fails_the_job() {
    let f = fixture("jax-fail").await;
    f.create(workers(2, json!({}))).await;
    let pods = f.wait_pods(&W2, "Running").await;
    let policy = pods["test-job-worker-1"].spec.clone().unwrap().restart_policy;
    assert_eq!(policy.as_deref(), Some("Never"));
    pods::finish(&f.pods, "test-job-worker-1", 1, 0).await.unwrap();
    let status = f.condition(C::Failed).await;
    let message = "JAXJob test-job is failed because 1 Worker replica(s) failed.";
    assert_eq!(
        conditions(&status).last(),
        Some(&cond(C::Failed, S::True, "Failed", message))
    );
    assert_eq!(status.replica_statuses["Worker"].failed, 1);
}

/// ExitCode policy with exit code 137: the pod is replaced and the job is Restarting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_code_137_replaces_the_pod() {
    let f = fixture("jax-restart").await;
    f.create(workers(1, json!({ "restartPolicy": "ExitCode" }))).await;
    let pods = f.wait_pods(&W2[..1], "Running").await;
    let policy = pods["test-job-worker-0"].spec.clone().unwrap().restart_policy;
    assert_eq!(policy.as_deref(), Some("Never"));
    f.fail_and_replace("Worker", "test-job-worker-0", 137).await;
    let status = f.condition(C::Restarting).await;
    assert_eq!(
        status.condition(C::Restarting).unwrap().reason,
        "JAXJobRestarting"
    );
    assert!(
        !status.is(C::Failed) && !status.is(C::Running),
        "{:?}",
        conditions(&status)
    );
    assert_eq!(
        f.event("JAXJobRestarting").await.type_.as_deref(),
        Some("Warning")
    );
}

/// §3.2 case 4 for JAX.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_and_resume() {
    let f = fixture("jax-suspend").await;
    f.create(workers(2, json!({}))).await;
    suspend_then_resume(&f, &W2, None).await;
}
