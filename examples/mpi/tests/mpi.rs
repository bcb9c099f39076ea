#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! mpi-operator v2beta1's integration cases against the real control plane: the objects an
//! MPIJob owns, the hostfile per implementation, the launcher waiting for ready workers,
//! suspend and resume, success and failure through the launcher Job, and elastic workers with
//! discover_hosts.sh following them.
use std::collections::BTreeMap;

use kfop_runtime::api::ConditionStatus;
use kfop_runtime::k8s_openapi::api::batch::v1::Job;
use kfop_runtime::k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Secret, Service};
use kfop_runtime::kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kfop_runtime::kube::{CustomResourceExt, ResourceExt};
use kfop_runtime::testing::Operator;
use kfop_testenv::{TestEnv, TestNamespace, pods, wait};
use mpi_operator::MPIJob;
use serde_json::{Value, json};

struct Fixture {
    ns: TestNamespace,
    jobs: Api<MPIJob>,
    pods: Api<Pod>,
    _operator: Operator,
}

async fn fixture(prefix: &str) -> Fixture {
    let env = TestEnv::shared().unwrap();
    env.install_crds([MPIJob::crd()]).await.unwrap();
    let ns = env.namespace(prefix).await.unwrap();
    let operator = Operator::start(ns.client(), ns.name(), |m| {
        m.register(mpi_operator::framework(Default::default()).unwrap())
    });
    Fixture {
        jobs: ns.api(),
        pods: ns.api(),
        ns,
        _operator: operator,
    }
}

fn container(name: &str) -> Value {
    json!({ "name": name, "image": "mpioperator/mpi-pi:openmpi" })
}

/// An MPIJob `name` with `workers` workers; `extra` is merged into its spec.
fn mpi_job(name: &str, workers: i32, extra: Value) -> MPIJob {
    let mut spec = json!({
        "slotsPerWorker": 1,
        "runPolicy": { "cleanPodPolicy": "Running" },
        "mpiReplicaSpecs": {
            "Launcher": { "replicas": 1, "template": { "spec": { "containers": [container("launcher")] } } },
            "Worker": { "replicas": workers, "template": { "spec": { "containers": [container("worker")] } } },
        },
    });
    merge(&mut spec, extra);
    serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": { "name": name },
        "spec": spec,
    }))
    .unwrap()
}

fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (a, b) => *a = b,
    }
}

impl Fixture {
    async fn create(&self, job: MPIJob) {
        self.jobs.create(&PostParams::default(), &job).await.unwrap();
    }

    async fn get<K>(&self, name: &str) -> K
    where
        K: kfop_runtime::kube::Resource<
                Scope = kfop_runtime::k8s_openapi::NamespaceResourceScope,
                DynamicType = (),
            > + Clone
            + kfop_runtime::serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        let api: Api<K> = self.ns.api();
        wait::until(&format!("{name} to exist"), wait::default_timeout(), || async {
            Ok(api.get_opt(name).await.unwrap())
        })
        .await
        .unwrap()
    }

    async fn condition(&self, name: &str, type_: &str) -> MPIJob {
        wait::until(&format!("{name} {type_}"), wait::default_timeout(), || async {
            let job = self.jobs.get(name).await.unwrap();
            let ok = job.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| format!("{:?}", c.type_) == type_ && c.status == ConditionStatus::True)
            });
            Ok(ok.then_some(job))
        })
        .await
        .unwrap()
    }

    /// The Running pods of `job` in `role` (`worker` or `launcher`).
    async fn running(&self, job: &str, role: &str) -> Vec<Pod> {
        let selector = format!("training.kubeflow.org/job-name={job},training.kubeflow.org/job-role={role}");
        let list = self
            .pods
            .list(&ListParams::default().labels(&selector))
            .await
            .unwrap()
            .items;
        list.into_iter().filter(|p| pods::phase(p) == "Running").collect()
    }

    async fn running_workers(&self, job: &str, n: usize) -> Vec<Pod> {
        wait::until(
            &format!("{n} workers of {job} Running"),
            wait::default_timeout(),
            || async {
                let running = self.running(job, "worker").await;
                Ok((running.len() == n).then_some(running))
            },
        )
        .await
        .unwrap()
    }

    async fn launcher_pod(&self, job: &str) -> Pod {
        wait::until(
            &format!("launcher pod of {job} Running"),
            wait::default_timeout(),
            || async { Ok(self.running(job, "launcher").await.into_iter().next()) },
        )
        .await
        .unwrap()
    }

    async fn config(&self, job: &str, key: &str, expected: &str) {
        let api: Api<ConfigMap> = self.ns.api();
        let name = format!("{job}-config");
        let got = wait::until(&format!("{name} {key}"), wait::default_timeout(), || async {
            let data = api
                .get_opt(&name)
                .await
                .unwrap()
                .and_then(|c| c.data)
                .unwrap_or_default();
            Ok(data.get(key).filter(|v| v.as_str() == expected).cloned())
        })
        .await;
        if got.is_err() {
            let data = api.get_opt(&name).await.unwrap().and_then(|c| c.data);
            panic!("{name} {key} never became {expected:?}; it is {data:?}");
        }
    }
}

fn env_of(pod_spec: &kfop_runtime::k8s_openapi::api::core::v1::PodSpec) -> BTreeMap<String, String> {
    pod_spec.containers[0]
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_are_mpi_operators() {
    let f = fixture("mpi-objects").await;
    f.create(mpi_job("pi", 2, json!({ "slotsPerWorker": 2 }))).await;
    let job = f.jobs.get("pi").await.unwrap();
    let uid = job.uid().unwrap();
    let owned_by_job =
        |refs: &Option<Vec<kfop_runtime::k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>>| {
            refs.iter().flatten().any(|o| {
                o.uid == uid
                    && o.kind == "MPIJob"
                    && o.api_version == "kubeflow.org/v2beta1"
                    && o.controller == Some(true)
                    && o.block_owner_deletion == Some(true)
            })
        };

    let service: Service = f.get("pi").await;
    let spec = service.spec.clone().unwrap();
    assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
    assert_eq!(
        spec.selector.unwrap(),
        BTreeMap::from([
            ("training.kubeflow.org/job-name".to_owned(), "pi".to_owned()),
            (
                "training.kubeflow.org/operator-name".to_owned(),
                "mpi-operator".to_owned()
            ),
        ])
    );
    assert!(owned_by_job(&service.metadata.owner_references));

    let secret: Secret = f.get("pi-ssh").await;
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/ssh-auth"));
    let data = secret.data.clone().unwrap();
    let private = String::from_utf8(data["ssh-privatekey"].0.clone()).unwrap();
    let public = String::from_utf8(data["ssh-publickey"].0.clone()).unwrap();
    assert!(private.starts_with("-----BEGIN EC PRIVATE KEY-----"));
    assert!(public.starts_with("ecdsa-sha2-nistp521 "));
    assert!(owned_by_job(&secret.metadata.owner_references));

    let ns = f.ns.name().to_owned();
    f.config(
        "pi",
        "hostfile",
        &format!("pi-worker-0.pi.{ns}.svc slots=2\npi-worker-1.pi.{ns}.svc slots=2\n"),
    )
    .await;

    let workers = f.running_workers("pi", 2).await;
    for w in &workers {
        let spec = w.spec.clone().unwrap();
        let i = w.labels()["training.kubeflow.org/replica-index"].clone();
        assert_eq!(spec.hostname.as_deref(), Some(format!("pi-worker-{i}").as_str()));
        assert_eq!(spec.subdomain.as_deref(), Some("pi"));
        assert_eq!(
            spec.dns_config.clone().unwrap().searches.unwrap(),
            [format!("pi.{ns}.svc.cluster.local")]
        );
        assert_eq!(
            spec.containers[0].command.clone().unwrap(),
            ["/usr/sbin/sshd", "-De"]
        );
        assert_eq!(env_of(&spec)["K_MPI_JOB_ROLE"], "worker");
        let ssh = spec
            .volumes
            .clone()
            .unwrap()
            .into_iter()
            .find(|v| v.name == "ssh-auth")
            .unwrap();
        let ssh = ssh.secret.unwrap();
        assert_eq!(ssh.secret_name.as_deref(), Some("pi-ssh"));
        assert_eq!(ssh.default_mode, Some(0o600));
        assert_eq!(w.labels()["training.kubeflow.org/job-role"], "worker");
        assert!(owned_by_job(&w.metadata.owner_references));
    }
    f.config(
        "pi",
        "discover_hosts.sh",
        &format!("#!/bin/sh\necho pi-worker-0.pi.{ns}.svc\necho pi-worker-1.pi.{ns}.svc\n"),
    )
    .await;

    let launcher: Job = f.get("pi-launcher").await;
    assert!(owned_by_job(&launcher.metadata.owner_references));
    assert_eq!(launcher.spec.as_ref().unwrap().suspend, Some(false));
    let template = launcher.spec.unwrap().template;
    let pod_spec = template.spec.unwrap();
    assert_eq!(pod_spec.hostname.as_deref(), Some("pi-launcher"));
    assert_eq!(pod_spec.restart_policy.as_deref(), Some("OnFailure"));
    let env = env_of(&pod_spec);
    assert_eq!(env["K_MPI_JOB_ROLE"], "launcher");
    assert_eq!(env["OMPI_MCA_orte_default_hostfile"], "/etc/mpi/hostfile");
    assert_eq!(env["OMPI_MCA_orte_set_default_slots"], "2");
    assert_eq!(env["NVIDIA_VISIBLE_DEVICES"], "");
    let mounts: Vec<(String, String)> = pod_spec.containers[0]
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| (m.name.clone(), m.mount_path.clone()))
        .collect();
    assert_eq!(
        mounts,
        [
            ("ssh-auth".to_owned(), "/root/.ssh".to_owned()),
            ("mpi-job-config".to_owned(), "/etc/mpi".to_owned())
        ]
    );

    // The launcher's Job runs it; its success is the MPIJob's, and Running workers are cleaned.
    let launcher_pod = f.launcher_pod("pi").await;
    f.condition("pi", "Running").await;
    pods::finish(&f.pods, &launcher_pod.name_any(), 0, 0)
        .await
        .unwrap();
    let done = f.condition("pi", "Succeeded").await;
    let statuses = done.status.unwrap().replica_statuses;
    assert_eq!(statuses["Launcher"].succeeded, 1);
    wait::until("workers cleaned up", wait::default_timeout(), || async {
        let left = f
            .pods
            .list(&ListParams::default().labels("training.kubeflow.org/job-role=worker"))
            .await
            .unwrap()
            .items;
        Ok(left.is_empty().then_some(()))
    })
    .await
    .unwrap();
    // mpi-operator keeps its objects until the job is deleted.
    let _: Service = f.get("pi").await;
    let _: ConfigMap = f.get("pi-config").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostfile_per_implementation() {
    let f = fixture("mpi-impl").await;
    let ns = f.ns.name().to_owned();
    f.create(mpi_job(
        "intel",
        1,
        json!({ "mpiImplementation": "Intel", "slotsPerWorker": 4 }),
    ))
    .await;
    f.create(mpi_job(
        "mpich",
        2,
        json!({ "mpiImplementation": "MPICH", "runLauncherAsWorker": true }),
    ))
    .await;
    f.config("intel", "hostfile", &format!("intel-worker-0.intel.{ns}.svc:4\n"))
        .await;
    f.config(
        "mpich",
        "hostfile",
        &format!("mpich-launcher.mpich.{ns}.svc:1\nmpich-worker-0.mpich.{ns}.svc:1\nmpich-worker-1.mpich.{ns}.svc:1\n"),
    )
    .await;
    let intel: Job = f.get("intel-launcher").await;
    let env = env_of(&intel.spec.unwrap().template.spec.unwrap());
    assert_eq!(env["I_MPI_HYDRA_HOST_FILE"], "/etc/mpi/hostfile");
    assert_eq!(env["I_MPI_PERHOST"], "4");
    let mpich: Job = f.get("mpich-launcher").await;
    let env = env_of(&mpich.spec.unwrap().template.spec.unwrap());
    assert_eq!(env["HYDRA_HOST_FILE"], "/etc/mpi/hostfile");
    assert!(
        !env.contains_key("NVIDIA_VISIBLE_DEVICES"),
        "a launcher that is a worker keeps its GPUs"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn launcher_waits_for_ready_workers() {
    let f = fixture("mpi-wait").await;
    let pool = format!("pool-{}", f.ns.name());
    // Workers that no node takes yet stay Pending, so never Ready.
    let job = mpi_job(
        "wait",
        2,
        json!({
            "launcherCreationPolicy": "WaitForWorkersReady",
            "mpiReplicaSpecs": { "Worker": { "template": { "spec": { "nodeSelector": { "kfop.dev/pool": pool } } } } },
        }),
    );
    f.create(job).await;
    let jobs: Api<Job> = f.ns.api();
    wait::until("2 worker pods", wait::default_timeout(), || async {
        let n = f
            .pods
            .list(&ListParams::default().labels("training.kubeflow.org/job-role=worker"))
            .await
            .unwrap()
            .items
            .len();
        Ok((n == 2).then_some(()))
    })
    .await
    .unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert!(
        jobs.get_opt("wait-launcher").await.unwrap().is_none(),
        "launcher created before the workers were ready"
    );

    let nodes: Api<Node> = Api::all(f.ns.client());
    let node = kfop_testenv::NodeShape::name(0);
    let label = |value: Value| json!({ "metadata": { "labels": { "kfop.dev/pool": value } } });
    nodes
        .patch(&node, &PatchParams::default(), &Patch::Merge(&label(json!(pool))))
        .await
        .unwrap();
    f.running_workers("wait", 2).await;
    let launcher: Job = f.get("wait-launcher").await;
    nodes
        .patch(&node, &PatchParams::default(), &Patch::Merge(&label(Value::Null)))
        .await
        .unwrap();
    assert!(launcher.spec.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspended_then_resumed() {
    let f = fixture("mpi-suspend").await;
    f.create(mpi_job("s", 2, json!({ "runPolicy": { "suspend": true } })))
        .await;
    let job = f.condition("s", "Suspended").await;
    assert!(job.status.unwrap().start_time.is_none());
    let launcher: Job = f.get("s-launcher").await;
    assert_eq!(
        launcher.spec.unwrap().suspend,
        Some(true),
        "the launcher Job is created suspended"
    );
    assert!(
        f.pods
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    let resume = json!({ "spec": { "runPolicy": { "suspend": false } } });
    f.jobs
        .patch("s", &PatchParams::default(), &Patch::Merge(&resume))
        .await
        .unwrap();
    f.running_workers("s", 2).await;
    let jobs: Api<Job> = f.ns.api();
    wait::until("launcher unsuspended", wait::default_timeout(), || async {
        let job = jobs.get("s-launcher").await.unwrap();
        Ok((job.spec.unwrap().suspend == Some(false)).then_some(()))
    })
    .await
    .unwrap();
    f.launcher_pod("s").await;
    let job = f.condition("s", "Running").await;
    assert!(job.status.unwrap().start_time.is_some());

    let suspend = json!({ "spec": { "runPolicy": { "suspend": true } } });
    f.jobs
        .patch("s", &PatchParams::default(), &Patch::Merge(&suspend))
        .await
        .unwrap();
    f.condition("s", "Suspended").await;
    wait::until(
        "launcher suspended and workers gone",
        wait::default_timeout(),
        || async {
            let job = jobs.get("s-launcher").await.unwrap();
            let workers = f
                .pods
                .list(&ListParams::default().labels("training.kubeflow.org/job-role=worker"))
                .await
                .unwrap();
            Ok((job.spec.unwrap().suspend == Some(true) && workers.items.is_empty()).then_some(()))
        },
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_launcher_job_fails_the_job() {
    let f = fixture("mpi-fail").await;
    f.create(mpi_job("f", 1, json!({ "runPolicy": { "backoffLimit": 0 } })))
        .await;
    f.running_workers("f", 1).await;
    let launcher = f.launcher_pod("f").await;
    pods::finish(&f.pods, &launcher.name_any(), 1, 0).await.unwrap();
    let job = f.condition("f", "Failed").await;
    let status = job.status.unwrap();
    assert_eq!(status.replica_statuses["Launcher"].failed, 1);
    let failed = status
        .conditions
        .iter()
        .find(|c| format!("{:?}", c.type_) == "Failed")
        .unwrap();
    assert_eq!(failed.reason, "MPIJobFailed");
    assert!(failed.message.contains("backoff limit"), "{}", failed.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discover_hosts_follows_scaled_workers() {
    let f = fixture("mpi-elastic").await;
    let ns = f.ns.name().to_owned();
    f.create(mpi_job("e", 1, json!({}))).await;
    f.running_workers("e", 1).await;
    f.config(
        "e",
        "discover_hosts.sh",
        &format!("#!/bin/sh\necho e-worker-0.e.{ns}.svc\n"),
    )
    .await;
    let scale = |n: i32| json!({ "spec": { "replicas": n } });
    f.jobs
        .patch_scale("e", &PatchParams::default(), &Patch::Merge(&scale(3)))
        .await
        .unwrap();
    let first = f.running_workers("e", 3).await;
    let uid0 = first.iter().find(|p| p.name_any() == "e-worker-0").unwrap().uid();
    let hosts = |n: i32| {
        let lines: String = (0..n)
            .map(|i| format!("echo e-worker-{i}.e.{ns}.svc\n"))
            .collect();
        format!("#!/bin/sh\n{lines}")
    };
    f.config("e", "discover_hosts.sh", &hosts(3)).await;
    f.config(
        "e",
        "hostfile",
        &(0..3)
            .map(|i| format!("e-worker-{i}.e.{ns}.svc slots=1\n"))
            .collect::<String>(),
    )
    .await;
    f.jobs
        .patch_scale("e", &PatchParams::default(), &Patch::Merge(&scale(2)))
        .await
        .unwrap();
    let after = f.running_workers("e", 2).await;
    assert_eq!(
        after.iter().find(|p| p.name_any() == "e-worker-0").unwrap().uid(),
        uid0,
        "scaling must not touch the other workers"
    );
    f.config("e", "discover_hosts.sh", &hosts(2)).await;
}

/// A finished MPIJob whose Service, ConfigMap and Secret are gone (deleted by hand, or by its
/// namespace being deleted) gets none of them back; an active one does.
#[test]
fn a_finished_job_recreates_no_owned_object() {
    use kfop_runtime::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use kfop_runtime::plan::{Observed, plan};
    let now = Time(kfop_runtime::k8s_openapi::jiff::Timestamp::from_second(1_700_000_000).unwrap());
    let mut job = mpi_job("done", 2, json!({}));
    job.metadata.namespace = Some("ns".to_owned());
    let active = plan(
        &mpi_operator::framework(Default::default()).unwrap(),
        &job,
        &Observed::default(),
        &now,
    )
    .unwrap();
    assert!(
        !active.create_objects.is_empty(),
        "an active job creates its objects"
    );
    job.status = serde_json::from_value(json!({
        "conditions": [
            {"type": "Created", "status": "True", "reason": "MPIJobCreated", "message": ""},
            {"type": "Succeeded", "status": "True", "reason": "MPIJobSucceeded", "message": ""}],
        "completionTime": "2023-11-14T22:13:20Z"
    }))
    .unwrap();
    let finished = plan(
        &mpi_operator::framework(Default::default()).unwrap(),
        &job,
        &Observed::default(),
        &now,
    )
    .unwrap();
    assert!(
        finished.create_objects.is_empty(),
        "a finished job created {:?}",
        finished.create_objects
    );
}

mod planned {
    //! Plans of one pass (no plane): what mpi-operator v0.6.0 does with a TTL, an evicted
    //! worker, a resumed launcher Job and the owner references of a job created as v1.
    use std::sync::Arc;

    use kfop_runtime::k8s_openapi::api::batch::v1::Job;
    use kfop_runtime::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use kfop_runtime::kube::api::{ApiResource, DynamicObject};
    use kfop_runtime::plan::{EventType, Observed, ObservedPod, Plan, plan};
    use serde_json::{Value, json};

    use super::{MPIJob, mpi_job};

    fn now() -> Time {
        Time(kfop_runtime::k8s_openapi::jiff::Timestamp::from_second(1_700_000_100).unwrap())
    }

    fn job(extra: Value, annotations: Value, status: Value) -> MPIJob {
        let mut job = mpi_job("j", 2, extra);
        job.metadata.namespace = Some("ns".to_owned());
        job.metadata.uid = Some("uid-j".to_owned());
        job.metadata.annotations = serde_json::from_value(annotations).unwrap();
        job.status = serde_json::from_value(status).unwrap();
        job
    }

    fn planned(job: &MPIJob, observed: &Observed) -> Plan {
        plan(
            &mpi_operator::framework(Default::default()).unwrap(),
            job,
            observed,
            &now(),
        )
        .unwrap()
    }

    fn succeeded_long_ago() -> Value {
        json!({
            "conditions": [
                {"type": "Created", "status": "True", "reason": "MPIJobCreated", "message": ""},
                {"type": "Succeeded", "status": "True", "reason": "MPIJobSucceeded", "message": ""}],
            "startTime": "2023-11-14T22:10:00Z",
            "completionTime": "2023-11-14T22:13:20Z",
        })
    }

    fn launcher_job(spec: Value, status: Value) -> Arc<DynamicObject> {
        let resource = ApiResource::erase::<Job>(&());
        Arc::new(DynamicObject::new("j-launcher", &resource).data(json!({ "spec": spec, "status": status })))
    }

    fn worker(index: i32, phase: &str, reason: Option<&str>) -> Arc<ObservedPod> {
        let pod = serde_json::from_value(json!({
            "metadata": {
                "name": format!("j-worker-{index}"), "namespace": "ns",
                "labels": {
                    "training.kubeflow.org/job-name": "j",
                    "training.kubeflow.org/operator-name": "mpi-operator",
                    "training.kubeflow.org/replica-type": "worker",
                    "training.kubeflow.org/replica-index": index.to_string(),
                },
            },
            "spec": { "containers": [{ "name": "worker", "image": "i" }] },
            "status": { "phase": phase, "reason": reason },
        }))
        .unwrap();
        Arc::new(ObservedPod::from(
            serde_json::from_value::<kfop_runtime::k8s_openapi::api::core::v1::Pod>(pod).unwrap(),
        ))
    }

    /// mpi-operator copies runPolicy.ttlSecondsAfterFinished to the launcher Job
    /// (`newLauncherJob`) and never deletes the MPIJob; training-operator (a job created as v1)
    /// deletes it.
    #[test]
    fn the_ttl_is_the_launcher_jobs() {
        let ttl = json!({ "runPolicy": { "ttlSecondsAfterFinished": 5 } });
        let fresh = planned(&job(ttl.clone(), json!({}), Value::Null), &Observed::default());
        let launcher = fresh
            .create_objects
            .iter()
            .find(|o| o.resource.kind == "Job")
            .expect("the launcher Job is created");
        assert_eq!(launcher.object.data["spec"]["ttlSecondsAfterFinished"], 5);

        let expired = planned(
            &job(ttl.clone(), json!({}), succeeded_long_ago()),
            &Observed::default(),
        );
        assert!(!expired.delete_job, "the MPIJob stays");
        assert_eq!(expired.requeue_after, None, "no TTL to wait for");

        let v1 = job(ttl, json!({ "kfop.dev/created-as": "v1" }), succeeded_long_ago());
        assert!(planned(&v1, &Observed::default()).delete_job);
    }

    /// An evicted worker fails the job with `MPIJobEvicted`, without completion time, and is
    /// not replaced (mpi-operator's `updateMPIJobStatus`).
    #[test]
    fn an_evicted_worker_fails_the_job() {
        let running = json!({
            "conditions": [
                {"type": "Created", "status": "True", "reason": "MPIJobCreated", "message": ""},
                {"type": "Running", "status": "True", "reason": "MPIJobRunning", "message": ""}],
            "startTime": "2023-11-14T22:10:00Z",
        });
        let observed = Observed {
            pods: vec![worker(0, "Running", None), worker(1, "Failed", Some("Evicted"))],
            objects: vec![launcher_job(json!({}), json!({ "ready": 1, "active": 1 }))],
            ..Observed::default()
        };
        let p = planned(&job(json!({}), json!({}), running.clone()), &observed);
        let status = p.status.expect("the status changes");
        let condition = |type_: &str| {
            status
                .conditions
                .iter()
                .find(|c| format!("{:?}", c.type_) == type_)
                .unwrap()
                .clone()
        };
        let failed = condition("Failed");
        assert_eq!(
            (failed.reason.as_str(), failed.message.as_str()),
            ("MPIJobEvicted", "1/2 workers are evicted")
        );
        assert_eq!(format!("{:?}", condition("Running").status), "False");
        assert!(status.completion_time.is_none());
        assert_eq!(status.replica_statuses["Worker"].failed, 1);
        assert_eq!(status.replica_statuses["Worker"].active, 1);
        assert!(
            p.create_pods.is_empty() && p.delete_pods.is_empty(),
            "no worker replaced"
        );
        assert!(
            p.events.iter().any(|e| e.type_ == EventType::Warning
                && e.reason == "MPIJobEvicted"
                && e.message == "1/2 workers are evicted"),
            "{:?}",
            p.events
        );

        // A worker that failed otherwise changes nothing (restartPolicy Never: no restart).
        let observed = Observed {
            pods: vec![worker(0, "Running", None), worker(1, "Failed", None)],
            ..observed
        };
        let p = planned(&job(json!({}), json!({}), running), &observed);
        assert!(
            p.status
                .is_none_or(|s| !s.is(kfop_runtime::api::JobConditionType::Failed))
        );
    }

    /// On resume, the scheduling fields Kueue set on the launcher's template reach the
    /// suspended launcher Job with its unsuspension; a launcher Job that ran before (its
    /// template immutable) is only unsuspended.
    #[test]
    fn resume_syncs_the_launchers_scheduling_fields() {
        let launcher = json!({ "mpiReplicaSpecs": { "Launcher": { "template": {
            "metadata": { "labels": { "kueue.x-k8s.io/podset": "launcher" },
                          "annotations": { "kueue.x-k8s.io/workload": "w" } },
            "spec": {
                "nodeSelector": { "flavor": "a" },
                "tolerations": [{ "key": "t", "operator": "Exists" }],
                "schedulingGates": [{ "name": "g" }],
            },
        }}}});
        let suspended_job = json!({
            "template": {
                "metadata": { "labels": { "batch.kubernetes.io/job-name": "j-launcher" } },
                "spec": { "nodeSelector": { "old": "x" } },
            },
            "suspend": true,
        });
        let status = json!({
            "conditions": [
                {"type": "Created", "status": "True", "reason": "MPIJobCreated", "message": ""},
                {"type": "Suspended", "status": "True", "reason": "MPIJobSuspended", "message": ""}],
        });
        let patch_of = |launcher_status: Value| {
            let observed = Observed {
                objects: vec![launcher_job(suspended_job.clone(), launcher_status)],
                ..Observed::default()
            };
            let p = planned(&job(launcher.clone(), json!({}), status.clone()), &observed);
            p.patch_objects
                .into_iter()
                .find(|o| o.resource.kind == "Job")
                .expect("the launcher Job is patched")
                .object
                .data
        };
        let patch = patch_of(json!({}));
        let spec = &patch["spec"];
        assert_eq!(spec["suspend"], false);
        let template = &spec["template"];
        assert_eq!(
            template["metadata"]["labels"]["kueue.x-k8s.io/podset"],
            "launcher"
        );
        assert_eq!(
            template["metadata"]["annotations"]["kueue.x-k8s.io/workload"],
            "w"
        );
        assert_eq!(
            template["spec"]["nodeSelector"],
            json!({ "flavor": "a", "old": null }),
            "replaced, not merged"
        );
        assert_eq!(template["spec"]["tolerations"][0]["key"], "t");
        assert_eq!(template["spec"]["schedulingGates"], json!([{ "name": "g" }]));

        let started = patch_of(json!({ "startTime": "2023-11-14T22:10:00Z" }));
        assert_eq!(started, json!({ "spec": { "suspend": false } }));
    }

    /// training-operator's children name a job created as v1 `kubeflow.org/v1`; mpi-operator's
    /// name a v2beta1 job `kubeflow.org/v2beta1`.
    #[test]
    fn owner_references_name_the_version_the_job_was_created_in() {
        for (annotations, version) in [
            (json!({ "kfop.dev/created-as": "v1" }), "kubeflow.org/v1"),
            (json!({}), "kubeflow.org/v2beta1"),
        ] {
            let p = planned(&job(json!({}), annotations, Value::Null), &Observed::default());
            let pods = p.create_pods.iter().map(|p| &p.metadata.owner_references);
            let objects = p
                .create_objects
                .iter()
                .map(|o| &o.object.metadata.owner_references);
            let owners: Vec<_> = pods.chain(objects).collect();
            assert!(!owners.is_empty());
            for owner in owners {
                let owner = &owner.as_ref().unwrap()[0];
                assert_eq!(
                    (owner.api_version.as_str(), owner.uid.as_str()),
                    (version, "uid-j")
                );
            }
        }
    }
}
