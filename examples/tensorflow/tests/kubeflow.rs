#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Kubeflow training-operator's TFJob cases (tfjob_controller_test.go, job_test.go,
//! status_test.go; reference §3.2) against the real control plane: resources, exact TF_CONFIG,
//! chief success, worker failure, the ExitCode policy, suspend and resume.

kfop_testenv::kubeflow_cases!(
    job = tensorflow_operator::TFJob,
    framework = tensorflow_operator::framework(Default::default()).unwrap(),
    kind = "TFJob",
    controller = "tfjob-controller",
    specs = "tfReplicaSpecs",
    container = "tensorflow",
    port_name = "tfjob-port",
);

/// Kubeflow's TF_CONFIG of `role` `index` in namespace `ns` for 1 PS and 2 Workers on 2222.
fn tf_config(ns: &str, role: &str, index: i32) -> String {
    let host = |r: &str, i: i32| format!("\"test-job-{r}-{i}.{ns}.svc:2222\"");
    format!(
        r#"{{"cluster":{{"ps":[{}],"worker":[{},{}]}},"task":{{"type":"{role}","index":{index}}},"environment":"cloud"}}"#,
        host("ps", 0),
        host("worker", 0),
        host("worker", 1)
    )
}

/// 1 PS + 2 Workers, no chief: worker 0 is the master; TF_CONFIG is Kubeflow's exact string.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_and_tf_config() {
    let f = fixture("tf-resources").await;
    let roles = [("PS", replica(1, json!({}))), ("Worker", replica(2, json!({})))];
    let job = f.create(new_job(&roles, json!({}))).await;
    let names = ["test-job-ps-0", "test-job-worker-0", "test-job-worker-1"];
    let pods = check_resources(&f, &job, &names, "test-job-worker-0", 2222).await;
    let ns = f.ns.name();
    for (name, role, index) in [
        ("test-job-ps-0", "ps", 0),
        ("test-job-worker-0", "worker", 0),
        ("test-job-worker-1", "worker", 1),
    ] {
        let expected = strings(&[("TF_CONFIG", &tf_config(ns, role, index))]);
        assert_eq!(env(&pods[name]), expected, "{name}");
        let ports = pods[name].spec.clone().unwrap().containers[0]
            .ports
            .clone()
            .unwrap();
        assert_eq!(
            (ports[0].name.as_deref(), ports[0].container_port),
            (Some(PORT_NAME), 2222)
        );
    }
}

/// With a Chief, the chief is the master and its success succeeds the job; the still-active
/// worker is counted as succeeded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chief_success_succeeds_the_job() {
    let f = fixture("tf-success").await;
    let roles = [
        ("Chief", replica(1, json!({}))),
        ("Worker", replica(1, json!({}))),
    ];
    let job = f.create(new_job(&roles, json!({}))).await;
    let names = ["test-job-chief-0", "test-job-worker-0"];
    check_resources(&f, &job, &names, "test-job-chief-0", 2222).await;
    f.condition(C::Running).await;
    pods::finish(&f.pods, "test-job-chief-0", 0, 0).await.unwrap();
    let done = |s: &JobStatus| {
        s.is(C::Succeeded)
            && s.replica_statuses["Chief"].succeeded == 1
            && s.replica_statuses["Worker"].succeeded == 1
    };
    let status = f.wait_status("Succeeded, replicas counted", done).await;
    let message = format!("TFJob {}/test-job successfully completed.", f.ns.name());
    assert_eq!(
        conditions(&status).last(),
        Some(&cond(C::Succeeded, S::True, "Succeeded", &message))
    );
    assert_eq!(status.replica_statuses["Worker"].active, 0);
    assert_eq!(status.condition(C::Running).unwrap().status, S::False);
}

/// A Worker exiting 1 under the default policy (Never) fails the job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_failure_fails_the_job() {
    let f = fixture("tf-fail").await;
    let roles = [("PS", replica(1, json!({}))), ("Worker", replica(2, json!({})))];
    f.create(new_job(&roles, json!({}))).await;
    let pods = f
        .wait_pods(
            &["test-job-ps-0", "test-job-worker-0", "test-job-worker-1"],
            "Running",
        )
        .await;
    let policy = pods["test-job-worker-1"].spec.clone().unwrap().restart_policy;
    assert_eq!(policy.as_deref(), Some("Never"));
    pods::finish(&f.pods, "test-job-worker-1", 1, 0).await.unwrap();
    let status = f.condition(C::Failed).await;
    let message = format!(
        "TFJob {}/test-job has failed because 1 Worker replica(s) failed.",
        f.ns.name()
    );
    assert_eq!(
        conditions(&status).last(),
        Some(&cond(C::Failed, S::True, "Failed", &message))
    );
    assert_eq!(status.replica_statuses["Worker"].failed, 1);
    assert!(status.completion_time.is_some());
}

/// ExitCode policy: the pod runs with restartPolicy Never; exit code 137 replaces it and the
/// job is Restarting. A single replica gets no TF_CONFIG.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_code_137_replaces_the_pod() {
    let f = fixture("tf-restart").await;
    f.create(new_job(
        &[("Worker", replica(1, json!({ "restartPolicy": "ExitCode" })))],
        json!({}),
    ))
    .await;
    let pods = f.wait_pods(&["test-job-worker-0"], "Running").await;
    let spec = pods["test-job-worker-0"].spec.clone().unwrap();
    assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
    assert_eq!(
        env(&pods["test-job-worker-0"]),
        BTreeMap::new(),
        "no TF_CONFIG for one replica"
    );
    f.fail_and_replace("Worker", "test-job-worker-0", 137).await;
    let status = f.condition(C::Restarting).await;
    assert_eq!(status.condition(C::Restarting).unwrap().reason, "TFJobRestarting");
    assert!(
        !status.is(C::Failed) && !status.is(C::Running),
        "{:?}",
        conditions(&status)
    );
    assert_eq!(f.event("TFJobRestarting").await.type_.as_deref(), Some("Warning"));
}

/// ExitCode policy with exit code 1 (permanent) fails the job with Kubeflow's message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_code_1_fails_the_job() {
    let f = fixture("tf-exit1").await;
    f.create(new_job(
        &[("Worker", replica(2, json!({ "restartPolicy": "ExitCode" })))],
        json!({}),
    ))
    .await;
    let before = f
        .wait_pods(&["test-job-worker-0", "test-job-worker-1"], "Running")
        .await;
    pods::finish(&f.pods, "test-job-worker-1", 1, 0).await.unwrap();
    let status = f.condition(C::Failed).await;
    let message = r#"job "test-job" is failing because "Worker" replica(s) failed."#;
    let failed = status.condition(C::Failed).unwrap();
    assert_eq!(
        (failed.reason.as_str(), failed.message.as_str()),
        ("TFJobFailed", message)
    );
    let after = f.pods.get("test-job-worker-1").await.unwrap();
    assert_eq!(
        after.uid(),
        before["test-job-worker-1"].uid(),
        "a permanent failure is not retried"
    );
}

/// §3.2 case 4 with TF's messages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_and_resume() {
    let f = fixture("tf-suspend").await;
    let roles = [
        ("Chief", replica(1, json!({}))),
        ("Worker", replica(1, json!({}))),
    ];
    f.create(new_job(&roles, json!({}))).await;
    let running = format!("TFJob {}/test-job is running.", f.ns.name());
    suspend_then_resume(&f, &["test-job-chief-0", "test-job-worker-0"], Some(&running)).await;
}
