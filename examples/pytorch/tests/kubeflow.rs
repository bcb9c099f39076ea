#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Kubeflow training-operator's PyTorchJob integration cases (pytorchjob_controller_test.go,
//! reference §3.2) against the real control plane: resources, torchrun's environment, success,
//! failure, restart, suspend and resume, the elastic job with its HPA, the immutable queue and
//! the Worker scale subresource.
use kfop_runtime::k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;

kfop_testenv::kubeflow_cases!(
    job = pytorch_operator::PyTorchJob,
    framework = pytorch_operator::framework(Default::default()).unwrap(),
    kind = "PyTorchJob",
    controller = "pytorchjob-controller",
    specs = "pytorchReplicaSpecs",
    container = "pytorch",
    port_name = "pytorchjob-port",
);

/// A replica as Kubeflow's test writes it: the `pytorch` container with port 8080.
fn ported(n: i32) -> Value {
    let mut r = replica(n, json!({}));
    r["template"]["spec"]["containers"][0]["ports"] = json!([{ "name": PORT_NAME, "containerPort": 8080 }]);
    r
}

const MW2: [&str; 3] = ["test-job-master-0", "test-job-worker-0", "test-job-worker-1"];

/// Case 1, "Should get the corresponding resources": 1 Master + 2 Workers on port 8080.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_and_env() {
    let f = fixture("pt-resources").await;
    let job = f
        .create(new_job(
            &[("Master", ported(1)), ("Worker", ported(2))],
            json!({}),
        ))
        .await;
    let pods = check_resources(&f, &job, &MW2, "test-job-master-0", 8080).await;
    let ports = pods["test-job-master-0"].spec.clone().unwrap().containers[0]
        .ports
        .clone()
        .unwrap();
    assert_eq!(
        (ports[0].name.as_deref(), ports[0].container_port),
        (Some(PORT_NAME), 8080)
    );
    for (name, rank) in [
        ("test-job-master-0", "0"),
        ("test-job-worker-0", "1"),
        ("test-job-worker-1", "2"),
    ] {
        let expected = strings(&[
            ("PYTHONUNBUFFERED", "1"),
            ("MASTER_PORT", "8080"),
            ("PET_MASTER_PORT", "8080"),
            ("MASTER_ADDR", "test-job-master-0"),
            ("PET_MASTER_ADDR", "test-job-master-0"),
            ("WORLD_SIZE", "3"),
            ("RANK", rank),
            ("PET_NODE_RANK", rank),
            ("PET_NPROC_PER_NODE", "auto"),
            ("PET_NNODES", "3"),
        ]);
        assert_eq!(env(&pods[name]), expected, "{name}");
    }
    // Workers wait for the master's name to resolve.
    let init = pods["test-job-worker-1"]
        .spec
        .clone()
        .unwrap()
        .init_containers
        .unwrap();
    assert_eq!(
        (init[0].name.as_str(), init[0].image.as_deref()),
        ("init-pytorch", Some("alpine:3.10"))
    );
    assert!(init[0].command.as_ref().unwrap()[2].contains("nslookup test-job-master-0"));
    assert!(
        pods["test-job-master-0"]
            .spec
            .clone()
            .unwrap()
            .init_containers
            .is_none()
    );
}

/// Case 1's end: the master pod Succeeded succeeds the job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn master_success_succeeds_the_job() {
    let f = fixture("pt-success").await;
    f.create(new_job(
        &[("Master", ported(1)), ("Worker", ported(2))],
        json!({}),
    ))
    .await;
    f.wait_pods(&MW2, "Running").await;
    f.condition(C::Running).await;
    pods::finish(&f.pods, "test-job-master-0", 0, 0).await.unwrap();
    let status = f
        .wait_status("Succeeded, master counted", |s| {
            s.is(C::Succeeded) && s.replica_statuses["Master"].succeeded == 1
        })
        .await;
    let c = conditions(&status);
    assert_eq!(
        c.last(),
        Some(&cond(
            C::Succeeded,
            S::True,
            "Succeeded",
            "PyTorchJob test-job is successfully completed."
        ))
    );
    assert_eq!(status.condition(C::Running).unwrap().status, S::False);
    assert!(status.completion_time.is_some());
}

/// A Worker with restartPolicy Never that exits 1 fails the job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_policy_failure_fails_the_job() {
    let f = fixture("pt-fail").await;
    let worker = replica(1, json!({ "restartPolicy": "Never" }));
    f.create(new_job(
        &[("Master", replica(1, json!({}))), ("Worker", worker)],
        json!({}),
    ))
    .await;
    let pods = f.wait_pods(&MW2[..2], "Running").await;
    let policy = pods["test-job-worker-0"].spec.clone().unwrap().restart_policy;
    assert_eq!(policy.as_deref(), Some("Never"));
    pods::finish(&f.pods, "test-job-worker-0", 1, 0).await.unwrap();
    let status = f.condition(C::Failed).await;
    let message = "PyTorchJob test-job is failed because 1 Worker replica(s) failed.";
    assert_eq!(
        conditions(&status).last(),
        Some(&cond(C::Failed, S::True, "Failed", message))
    );
    assert_eq!(status.replica_statuses["Worker"].failed, 1);
}

/// OnFailure (the default) with exit code 137: the pod is replaced and the job is Restarting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retryable_failure_replaces_the_pod() {
    let f = fixture("pt-restart").await;
    f.create(new_job(&[("Worker", replica(1, json!({})))], json!({})))
        .await;
    f.wait_pods(&["test-job-worker-0"], "Running").await;
    f.fail_and_replace("Worker", "test-job-worker-0", 137).await;
    let status = f.condition(C::Restarting).await;
    assert_eq!(
        status.condition(C::Restarting).unwrap().reason,
        "PyTorchJobRestarting"
    );
    assert!(
        !status.is(C::Failed) && !status.is(C::Running),
        "{:?}",
        conditions(&status)
    );
    assert_eq!(
        f.event("PyTorchJobRestarting").await.type_.as_deref(),
        Some("Warning")
    );
}

/// Case 3: created suspended, nothing runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn created_suspended() {
    let f = fixture("pt-created-suspended").await;
    let suspend = json!({ "runPolicy": { "suspend": true } });
    f.create(new_job(&[("Master", ported(1)), ("Worker", ported(2))], suspend))
        .await;
    let status = f.condition(C::Suspended).await;
    assert_eq!(
        conditions(&status),
        [
            cond(C::Created, S::True, "Created", "PyTorchJob test-job is created."),
            cond(
                C::Suspended,
                S::True,
                "Suspended",
                "PyTorchJob test-job is suspended."
            ),
        ]
    );
    assert!(status.start_time.is_none());
    tokio::time::sleep(Duration::from_secs(1)).await;
    f.wait_pods(&[], "").await;
    f.wait_services(&[]).await;
}

/// Case 4: suspend a running job, then resume it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_and_resume() {
    let f = fixture("pt-suspend").await;
    f.create(new_job(
        &[("Master", ported(1)), ("Worker", ported(2))],
        json!({}),
    ))
    .await;
    suspend_then_resume(&f, &MW2, Some("PyTorchJob test-job is running.")).await;
}

fn elastic(metrics: bool) -> Value {
    let mut policy = json!({ "rdzvBackend": "c10d", "minReplicas": 1, "maxReplicas": 3, "maxRestarts": 3 });
    if metrics {
        let target = json!({ "type": "Utilization", "averageUtilization": 80 });
        policy["metrics"] = json!([{ "type": "Resource", "resource": { "name": "cpu", "target": target } }]);
    }
    json!({ "elasticPolicy": policy })
}

async fn hpa(f: &Fixture) -> HorizontalPodAutoscaler {
    let api: Api<HorizontalPodAutoscaler> = f.ns.api();
    let found = wait::until("the HPA", wait::default_timeout(), || async {
        Ok(api.get_opt(JOB).await.unwrap())
    });
    found.await.unwrap()
}

/// Case 5: the elastic job (Worker x1, c10d, 1..3, maxRestarts 3, a CPU metric).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elastic_env_hpa_and_success() {
    let f = fixture("pt-elastic").await;
    let job = f.create(new_job(&[("Worker", ported(1))], elastic(true))).await;
    let pods = check_resources(&f, &job, &["test-job-worker-0"], "test-job-worker-0", 8080).await;
    let expected = strings(&[
        ("PYTHONUNBUFFERED", "1"),
        ("PET_NPROC_PER_NODE", "auto"),
        ("PET_RDZV_ENDPOINT", "test-job-worker-0:8080"),
        ("PET_RDZV_BACKEND", "c10d"),
        ("PET_NNODES", "1:3"),
        ("PET_MAX_RESTARTS", "3"),
    ]);
    assert_eq!(env(&pods["test-job-worker-0"]), expected);
    let hpa = hpa(&f).await;
    assert_eq!(hpa.metadata.owner_references, owner(&job));
    let spec = hpa.spec;
    let target = spec.scale_target_ref;
    assert_eq!(
        (
            target.api_version.as_deref(),
            target.kind.as_str(),
            target.name.as_str()
        ),
        (Some("kubeflow.org/v1"), KIND, JOB)
    );
    assert_eq!((spec.min_replicas, spec.max_replicas), (Some(1), 3));
    let metric = &spec.metrics.unwrap()[0];
    let resource = metric.resource.as_ref().unwrap();
    assert_eq!(
        (metric.type_.as_str(), resource.name.as_str()),
        ("Resource", "cpu")
    );
    assert_eq!(resource.target.average_utilization, Some(80));

    pods::finish(&f.pods, "test-job-worker-0", 0, 0).await.unwrap();
    let status = f
        .wait_status("Succeeded, worker counted", |s| {
            s.is(C::Succeeded) && s.replica_statuses["Worker"].succeeded == 1
        })
        .await;
    assert_eq!(
        status.condition(C::Succeeded).unwrap().reason,
        "PyTorchJobSucceeded"
    );
}

/// Case 6: suspending an elastic job deletes its HPA.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hpa_deleted_on_suspend() {
    let f = fixture("pt-hpa-suspend").await;
    f.create(new_job(&[("Worker", ported(1))], elastic(true))).await;
    hpa(&f).await;
    f.patch_spec(json!({ "runPolicy": { "suspend": true } })).await;
    f.condition(C::Suspended).await;
    let api: Api<HorizontalPodAutoscaler> = f.ns.api();
    wait::until("the HPA deleted", wait::default_timeout(), || async {
        Ok(api.get_opt(JOB).await.unwrap().is_none().then_some(()))
    })
    .await
    .unwrap();
    f.wait_pods(&[], "").await;
}

/// Case 2: spec.runPolicy.schedulingPolicy.queue cannot change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_is_immutable() {
    let f = fixture("pt-queue").await;
    let policy = json!({ "runPolicy": { "schedulingPolicy": { "queue": "q1" } } });
    f.create(new_job(&[("Master", ported(1)), ("Worker", ported(1))], policy))
        .await;
    // A merge patch carries no resourceVersion, so the operator's own writes cannot turn the
    // rejection into a 409 conflict.
    let change = json!({ "spec": { "runPolicy": { "schedulingPolicy": { "queue": "q2" } } } });
    let err = f
        .jobs
        .patch(JOB, &PatchParams::default(), &Patch::Merge(change))
        .await
        .expect_err("queue changed");
    let message = err.to_string();
    assert!(
        message.contains("spec.runPolicy.schedulingPolicy.queue is immutable"),
        "{message}"
    );
    // Other fields of the scheduling policy may still change.
    f.patch_spec(json!({ "runPolicy": { "schedulingPolicy": { "minAvailable": 2 } } }))
        .await;
    let policy = f
        .jobs
        .get(JOB)
        .await
        .unwrap()
        .spec
        .run_policy
        .scheduling_policy
        .unwrap();
    assert_eq!(
        (policy.queue.as_deref(), policy.min_available),
        (Some("q1"), Some(2))
    );
}

/// The scale subresource scales Workers by index: the other pods keep their UIDs and new pods
/// get the new WORLD_SIZE and PET_NNODES.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_subresource_scales_workers_by_index() {
    let f = fixture("pt-scale").await;
    f.create(new_job(
        &[("Master", ported(1)), ("Worker", ported(1))],
        json!({}),
    ))
    .await;
    let first = f.wait_pods(&MW2[..2], "Running").await;
    let scale = |n: i32| Patch::Merge(json!({ "spec": { "replicas": n } }));
    f.jobs
        .patch_scale(JOB, &PatchParams::default(), &scale(3))
        .await
        .unwrap();
    let names = [
        "test-job-master-0",
        "test-job-worker-0",
        "test-job-worker-1",
        "test-job-worker-2",
    ];
    let grown = f.wait_pods(&names, "Running").await;
    f.wait_services(&names).await;
    for name in &MW2[..2] {
        assert_eq!(grown[*name].uid(), first[*name].uid(), "{name} kept");
    }
    for (name, rank) in [("test-job-worker-1", "2"), ("test-job-worker-2", "3")] {
        let env = env(&grown[name]);
        let got = (
            env["WORLD_SIZE"].as_str(),
            env["PET_NNODES"].as_str(),
            env["RANK"].as_str(),
        );
        assert_eq!(got, ("4", "4", rank), "{name}");
    }
    let active3 = |s: &JobStatus| s.replica_statuses.get("Worker").is_some_and(|w| w.active == 3);
    let status = f.wait_status("3 active workers", active3).await;
    let selector = status.replica_statuses["Worker"].selector.clone().unwrap();
    assert!(
        selector.contains("training.kubeflow.org/replica-type=worker"),
        "{selector}"
    );
    let got = f.jobs.get_scale(JOB).await.unwrap();
    assert_eq!(
        (got.spec.unwrap().replicas, got.status.unwrap().replicas),
        (Some(3), 3)
    );

    f.jobs
        .patch_scale(JOB, &PatchParams::default(), &scale(2))
        .await
        .unwrap();
    let shrunk = f.wait_pods(&names[..3], "Running").await;
    f.wait_services(&names[..3]).await;
    for name in &names[..3] {
        assert_eq!(shrunk[*name].uid(), grown[*name].uid(), "{name} kept");
    }
}
