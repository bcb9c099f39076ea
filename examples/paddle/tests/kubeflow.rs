#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Kubeflow training-operator's PaddleJob cases (paddlepaddle_controller_test.go, reference
//! §3.2) against the real control plane: resources and PADDLE_MASTER in parameter-server and
//! collective mode, master success, worker failure, restart, suspend and resume.

kfop_testenv::kubeflow_cases!(
    job = paddle_operator::PaddleJob,
    framework = paddle_operator::framework(Default::default()).unwrap(),
    kind = "PaddleJob",
    controller = "paddlejob-controller",
    specs = "paddleReplicaSpecs",
    container = "paddle",
    port_name = "master",
);

const MW2: [&str; 3] = ["test-job-master-0", "test-job-worker-0", "test-job-worker-1"];

fn master_workers(workers: i32, worker: Value) -> Job {
    new_job(
        &[
            ("Master", replica(1, json!({}))),
            ("Worker", replica(workers, worker)),
        ],
        json!({}),
    )
}

/// POD_IP_DUMMY must precede PADDLE_MASTER for `$(POD_IP_DUMMY)` to expand.
fn assert_pod_ip_first(pod: &Pod) {
    let names: Vec<String> = pod.spec.clone().unwrap().containers[0]
        .env
        .iter()
        .flatten()
        .map(|e| e.name.clone())
        .collect();
    let at = |n: &str| names.iter().position(|x| x == n).unwrap();
    assert!(at("POD_IP_DUMMY") < at("PADDLE_MASTER"), "{names:?}");
}

/// Parameter-server mode (1 Master + 2 Workers, default port 36543): master 0 gets
/// `PADDLE_MASTER=$(POD_IP_DUMMY):36543`, the others the master's service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_and_env_with_master() {
    let f = fixture("pd-resources").await;
    let job = f.create(master_workers(2, json!({}))).await;
    let pods = check_resources(&f, &job, &MW2, "test-job-master-0", 36543).await;
    let common = [
        ("PYTHONUNBUFFERED", "1"),
        ("PADDLE_JOB_ID", JOB),
        ("PADDLE_NNODES", "3"),
    ];
    let mut master = strings(&common);
    master.extend(strings(&[
        ("POD_IP_DUMMY", "<status.podIP>"),
        ("PADDLE_MASTER", "$(POD_IP_DUMMY):36543"),
        ("PADDLE_SERVER_NUM", "1"),
    ]));
    assert_eq!(env(&pods["test-job-master-0"]), master);
    assert_pod_ip_first(&pods["test-job-master-0"]);
    let mut worker = strings(&common);
    worker.extend(strings(&[
        ("PADDLE_MASTER", "test-job-master-0:36543"),
        ("PADDLE_TRAINER_NUM", "1"),
    ]));
    for name in &MW2[1..] {
        assert_eq!(env(&pods[*name]), worker, "{name}");
    }
}

/// Collective mode (Workers only): worker 0 hosts the rendezvous on its pod IP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collective_env() {
    let f = fixture("pd-collective").await;
    f.create(new_job(&[("Worker", replica(2, json!({})))], json!({})))
        .await;
    let pods = f.wait_pods(&MW2[1..], "Running").await;
    let common = [
        ("PYTHONUNBUFFERED", "1"),
        ("PADDLE_JOB_ID", JOB),
        ("PADDLE_NNODES", "2"),
    ];
    let mut first = strings(&common);
    first.extend(strings(&[
        ("POD_IP_DUMMY", "<status.podIP>"),
        ("PADDLE_MASTER", "$(POD_IP_DUMMY):36543"),
    ]));
    assert_eq!(env(&pods["test-job-worker-0"]), first);
    assert_pod_ip_first(&pods["test-job-worker-0"]);
    let mut second = strings(&common);
    second.insert("PADDLE_MASTER".into(), "test-job-worker-0:36543".into());
    assert_eq!(env(&pods["test-job-worker-1"]), second);
}

/// Kubeflow's `spec.elasticPolicy` is stored as given, and nothing acts on it: Kubeflow's
/// PaddleJob controller only defaults its bounds in memory, so the job runs its Worker replicas.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elastic_policy_is_kept_as_given() {
    let f = fixture("pd-elastic").await;
    let policy = json!({
        "minReplicas": 1,
        "maxReplicas": 4,
        "maxRestarts": 3,
        "metrics": [{ "type": "Resource", "resource": {
            "name": "cpu",
            "target": { "type": "Utilization", "averageUtilization": 80 },
        } }],
    });
    let workers = json!({ "Worker": replica(2, json!({})) });
    let job = json!({
        "apiVersion": "kubeflow.org/v1",
        "kind": KIND,
        "metadata": { "name": JOB },
        "spec": { SPECS: workers, "elasticPolicy": policy },
    });
    // Raw JSON both ways, so a field the API server pruned would be missing on the way back.
    let raw: Api<::kfop_runtime::kube::api::DynamicObject> = Api::namespaced_with(
        f.ns.client(),
        f.ns.name(),
        &::kfop_runtime::kube::api::ApiResource::erase::<Job>(&()),
    );
    raw.create(&PostParams::default(), &serde_json::from_value(job).unwrap())
        .await
        .unwrap();
    let stored = raw.get(JOB).await.unwrap();
    assert_eq!(stored.data["spec"]["elasticPolicy"], policy);
    let pods = f.wait_pods(&MW2[1..], "Running").await;
    assert_eq!(env(&pods["test-job-worker-1"])["PADDLE_NNODES"], "2");
}

/// The master Succeeded succeeds the job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn master_success_succeeds_the_job() {
    let f = fixture("pd-success").await;
    f.create(master_workers(2, json!({}))).await;
    f.wait_pods(&MW2, "Running").await;
    f.condition(C::Running).await;
    pods::finish(&f.pods, "test-job-master-0", 0, 0).await.unwrap();
    let done = |s: &JobStatus| s.is(C::Succeeded) && s.replica_statuses["Master"].succeeded == 1;
    let status = f.wait_status("Succeeded, master counted", done).await;
    assert_eq!(
        status.condition(C::Succeeded).unwrap().reason,
        "PaddleJobSucceeded"
    );
    assert_eq!(status.condition(C::Running).unwrap().status, S::False);
}

/// A Worker with restartPolicy Never exiting 1 fails the job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_policy_failure_fails_the_job() {
    let f = fixture("pd-fail").await;
    f.create(master_workers(1, json!({ "restartPolicy": "Never" })))
        .await;
    f.wait_pods(&MW2[..2], "Running").await;
    pods::finish(&f.pods, "test-job-worker-0", 1, 0).await.unwrap();
    let status = f.condition(C::Failed).await;
    let failed = status.condition(C::Failed).unwrap();
    assert_eq!(failed.reason, "PaddleJobFailed");
    assert!(failed.message.contains("Worker"), "{}", failed.message);
    assert_eq!(status.replica_statuses["Worker"].failed, 1);
}

/// OnFailure (the default) with exit code 137: the pod is replaced and the job is Restarting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retryable_failure_replaces_the_pod() {
    let f = fixture("pd-restart").await;
    f.create(new_job(&[("Worker", replica(1, json!({})))], json!({})))
        .await;
    let pods = f.wait_pods(&["test-job-worker-0"], "Running").await;
    let policy = pods["test-job-worker-0"].spec.clone().unwrap().restart_policy;
    assert_eq!(policy.as_deref(), Some("OnFailure"));
    f.fail_and_replace("Worker", "test-job-worker-0", 137).await;
    let status = f.condition(C::Restarting).await;
    assert_eq!(
        status.condition(C::Restarting).unwrap().reason,
        "PaddleJobRestarting"
    );
    assert!(
        !status.is(C::Failed) && !status.is(C::Running),
        "{:?}",
        conditions(&status)
    );
    assert_eq!(
        f.event("PaddleJobRestarting").await.type_.as_deref(),
        Some("Warning")
    );
}

/// §3.2 case 4 for Paddle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_and_resume() {
    let f = fixture("pd-suspend").await;
    f.create(master_workers(1, json!({}))).await;
    suspend_then_resume(&f, &MW2[..2], None).await;
}
