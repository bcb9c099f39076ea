#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! MPIJob `kubeflow.org/v1` (training-operator's) and `v2beta1` (mpi-operator's) side by side
//! on the real plane, converted by the webhook the operator binary serves itself: each read
//! back in the other version, both run to their end, and the certificate rotated (a 30 s
//! validity) and replaced after expiry while v1 jobs keep being created.
mod common;

use std::collections::BTreeSet;
use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use kfop_operator::deploy;
use kfop_operator::schemes::Scheme;
use kfop_runtime::k8s_openapi::api::batch::v1::Job as BatchJob;
use kfop_runtime::k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service, ServiceAccount};
use kfop_runtime::k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kfop_runtime::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kfop_runtime::kube::ResourceExt;
use kfop_runtime::kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kfop_testenv::peer::OperatorProcess;
use kfop_testenv::{TestEnv, TestNamespace, pods, wait};
use serde_json::{Value, json};

const SECRET: &str = "kfop-operator-webhook-cert";
const DELIVERY_IMAGE: &str = "example/kubectl-delivery:test";

fn free_addr() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

/// The all-in-one binary, MPIJob only, in `ns`, its webhook on `webhook`.
async fn start(env: &TestEnv, ns: &str, webhook: SocketAddr) -> OperatorProcess {
    let metrics = free_addr();
    let args = vec![
        format!("--namespace={ns}"),
        "--enable-scheme=mpijob".to_owned(),
        format!("--metrics-bind-address={metrics}"),
        format!("--webhook-bind-address={webhook}"),
        format!("--webhook-url=https://{webhook}"),
        format!("--webhook-namespace={ns}"),
        "--webhook-cert-validity=30s".to_owned(),
        format!("--mpi-kubectl-delivery-image={DELIVERY_IMAGE}"),
    ];
    common::start_operator(env, &args, metrics, &[("RUST_LOG", "info".to_owned())]).await
}

fn api(ns: &TestNamespace, version: &str) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: "kubeflow.org".into(),
        version: version.into(),
        api_version: format!("kubeflow.org/{version}"),
        kind: "MPIJob".into(),
        plural: "mpijobs".into(),
    };
    Api::namespaced_with(ns.client(), ns.name(), &resource)
}

/// An MPIJob whose launcher pod ends with exit 0 two seconds after it runs.
fn job(name: &str, version: &str, extra: Value) -> DynamicObject {
    let (key, value) = pods::complete_after(Duration::from_secs(2));
    let template = |c: &str| {
        json!({"metadata": {"annotations": {key: value}},
               "spec": {"containers": [{"name": c, "image": "mpioperator/mpi-pi:openmpi"}]}})
    };
    let mut spec = json!({
        "slotsPerWorker": 1,
        "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "restartPolicy": "OnFailure", "template": template("mpi")},
            "Worker": {"replicas": 1, "restartPolicy": "Never", "template": template("mpi")},
        },
    });
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        spec[k] = v;
    }
    serde_json::from_value(json!({
        "apiVersion": format!("kubeflow.org/{version}"), "kind": "MPIJob",
        "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap()
}

fn annotation<'a>(o: &'a DynamicObject, key: &str) -> Option<&'a str> {
    o.metadata.annotations.as_ref()?.get(key).map(String::as_str)
}

async fn wait_for_v1(v1: &Api<DynamicObject>) {
    wait::until(
        "MPIJob v1 to be served through the webhook",
        wait::default_timeout(),
        || async { Ok(v1.list(&Default::default()).await.ok().map(|_| ())) },
    )
    .await
    .unwrap();
}

/// The job's conditions once one of type `type_` is True.
async fn condition_reached(api: &Api<DynamicObject>, name: &str, type_: &str) -> Value {
    wait::until(
        &format!("{name} to reach {type_}"),
        Duration::from_secs(90),
        || async {
            let job = api.get(name).await.ok();
            let conditions = job
                .map(|j| j.data["status"]["conditions"].clone())
                .unwrap_or_default();
            let done = conditions
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == type_ && c["status"] == "True");
            Ok(done.then_some(conditions))
        },
    )
    .await
    .unwrap()
}

/// `(type, message)` of each True condition.
fn true_conditions(conditions: &Value) -> Vec<(String, String)> {
    conditions
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["status"] == "True")
        .map(|c| {
            let text = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
            (text("type"), text("message"))
        })
        .collect()
}

/// A job created as v1 runs as training-operator v1.8.1 runs it: a bare launcher pod with the
/// kubectl-delivery init container, `sleep` workers, `<job>-config` with kubexec.sh, the
/// launcher's ServiceAccount, Role and RoleBinding, and no batch Job, Service or SSH Secret.
async fn assert_runs_as_v1(ns: &TestNamespace, job: &str) {
    let pods: Api<Pod> = ns.api();
    let launcher = pods.get(&format!("{job}-launcher")).await.unwrap();
    let spec = launcher.spec.unwrap();
    assert_eq!(
        spec.service_account_name.as_deref(),
        Some(format!("{job}-launcher").as_str())
    );
    let init = &spec.init_containers.unwrap()[0];
    assert_eq!(
        (init.name.as_str(), init.image.as_deref()),
        ("kubectl-delivery", Some(DELIVERY_IMAGE))
    );
    let env: Vec<(String, String)> = spec.containers[0]
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
        .collect();
    assert!(
        env.contains(&("OMPI_MCA_plm_rsh_agent".into(), "/etc/mpi/kubexec.sh".into())),
        "{env:?}"
    );
    assert!(
        env.contains(&("I_MPI_HYDRA_BOOTSTRAP".into(), "rsh".into())),
        "{env:?}"
    );
    let worker = pods.get(&format!("{job}-worker-0")).await.unwrap().spec.unwrap();
    assert_eq!(worker.containers[0].command, Some(vec!["sleep".to_owned()]));
    assert_eq!(worker.containers[0].args, Some(vec!["365d".to_owned()]));
    assert_eq!(worker.hostname, None);

    let config: Api<ConfigMap> = ns.api();
    let data = config.get(&format!("{job}-config")).await.unwrap().data.unwrap();
    assert!(data["kubexec.sh"].ends_with("exec ${POD_NAME} --container mpi -- /bin/sh -c \"$*\""));
    assert_eq!(data["hostfile"], format!("{job}-worker-0 slots=1\n"));
    let roles: Api<Role> = ns.api();
    let rules = roles
        .get(&format!("{job}-launcher"))
        .await
        .unwrap()
        .rules
        .unwrap();
    assert_eq!(rules[1].resource_names, Some(vec![format!("{job}-worker-0")]));
    let bindings: Api<RoleBinding> = ns.api();
    let binding = bindings.get(&format!("{job}-launcher")).await.unwrap();
    assert_eq!(binding.subjects.unwrap()[0].name, format!("{job}-launcher"));
    let accounts: Api<ServiceAccount> = ns.api();
    accounts.get(&format!("{job}-launcher")).await.unwrap();

    let batch: Api<BatchJob> = ns.api();
    assert!(batch.get_opt(&format!("{job}-launcher")).await.unwrap().is_none());
    let services: Api<Service> = ns.api();
    assert!(services.get_opt(job).await.unwrap().is_none());
}

async fn serving_cert(secrets: &Api<Secret>) -> Option<Vec<u8>> {
    let secret = secrets.get_opt(SECRET).await.ok()??;
    secret.data?.get("tls.crt").map(|b| b.0.clone())
}

async fn crd_bundle(crds: &Api<CustomResourceDefinition>) -> Option<Vec<u8>> {
    let crd = crds.get("mpijobs.kubeflow.org").await.ok()?;
    Some(crd.spec.conversion?.webhook?.client_config?.ca_bundle?.0)
}

/// Applies the ValidatingAdmissionPolicy `deploy` prints for MPIJob and waits until it is in
/// force (a probe job that tries to take the mark is refused).
async fn apply_created_as_policy(ns: &TestNamespace) {
    let all = kfop_operator::schemes::parse(&[]).unwrap();
    let docs: Vec<DynamicObject> = serde_saphyr::from_multiple(&deploy::created_as_policy(&all)).unwrap();
    for doc in docs {
        let types = doc.types.clone().unwrap();
        let (group, version) = types.api_version.split_once('/').unwrap();
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, &types.kind));
        let api: Api<DynamicObject> = Api::all_with(ns.client(), &resource);
        api.patch(
            &doc.name_any(),
            &PatchParams::apply("kfop-test").force(),
            &Patch::Apply(&doc),
        )
        .await
        .unwrap();
    }
    let v2 = api(ns, "v2beta1");
    v2.create(&PostParams::default(), &job("policy-probe", "v2beta1", json!({})))
        .await
        .unwrap();
    let take = json!({"metadata": {"annotations": {"kfop.dev/created-as": "v1"}}});
    let give_back = json!({"metadata": {"annotations": {"kfop.dev/created-as": null}}});
    wait::until(
        "the created-as policy in force",
        Duration::from_secs(60),
        || async {
            match v2
                .patch("policy-probe", &PatchParams::default(), &Patch::Merge(&take))
                .await
            {
                // Not in force yet: give the mark back (refused only if it came into force since).
                Ok(_) => Ok(v2
                    .patch("policy-probe", &PatchParams::default(), &Patch::Merge(&give_back))
                    .await
                    .err()
                    .map(|_| ())),
                Err(_) => Ok(Some(())),
            }
        },
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn v1_and_v2beta1_side_by_side_with_rotating_certificates() {
    let env = TestEnv::shared().unwrap();
    let crd = Scheme::MpiJob.crd();
    let versions: Vec<(&str, bool)> = crd
        .spec
        .versions
        .iter()
        .map(|v| (v.name.as_str(), v.storage))
        .collect();
    assert_eq!(versions, [("v2beta1", true), ("v1", false)]);
    env.install_crds([crd.clone()]).await.unwrap();
    let ns = env.namespace("conversion").await.unwrap();
    let webhook = free_addr();
    let running = start(env, ns.name(), webhook).await;
    let (v1, v2) = (api(&ns, "v1"), api(&ns, "v2beta1"));
    wait_for_v1(&v1).await;

    // Created side by side, each in its own version.
    let pp = PostParams::default();
    let extra_v1 = json!({"mainContainer": "mpi", "cleanPodPolicy": "Running"});
    v1.create(&pp, &job("from-v1", "v1", extra_v1)).await.unwrap();
    let extra_v2 = json!({"sshAuthMountPath": "/home/mpiuser/.ssh", "runLauncherAsWorker": false});
    v2.create(&pp, &job("from-v2beta1", "v2beta1", extra_v2))
        .await
        .unwrap();

    // The v1 job as stored: marked v1, its v1-only fields kept aside, none in the spec.
    let stored = v2.get("from-v1").await.unwrap();
    assert_eq!(annotation(&stored, "kfop.dev/created-as"), Some("v1"));
    let kept: Value =
        serde_json::from_str(annotation(&stored, "kfop.dev/mpijob-v1-fields").unwrap()).unwrap();
    assert_eq!(kept, json!({"mainContainer": "mpi", "cleanPodPolicy": "Running"}));
    assert!(stored.data["spec"].get("mainContainer").is_none());
    // ... and read in v1 as it was written.
    let read = v1.get("from-v1").await.unwrap();
    assert_eq!(read.data["spec"]["mainContainer"], "mpi");
    assert_eq!(read.data["spec"]["cleanPodPolicy"], "Running");
    assert_eq!(annotation(&read, "kfop.dev/mpijob-v1-fields"), None);

    // The v2beta1 job: no mark when stored; read in v1 it says where it came from and keeps
    // its v2beta1-only fields aside; back in v2beta1 they are there again.
    let stored = v2.get("from-v2beta1").await.unwrap();
    assert_eq!(annotation(&stored, "kfop.dev/created-as"), None);
    assert_eq!(stored.data["spec"]["sshAuthMountPath"], "/home/mpiuser/.ssh");
    let read = v1.get("from-v2beta1").await.unwrap();
    assert_eq!(annotation(&read, "kfop.dev/created-as"), Some("v2beta1"));
    assert!(read.data["spec"].get("sshAuthMountPath").is_none());
    assert!(
        annotation(&read, "kfop.dev/mpijob-v2beta1-fields")
            .unwrap()
            .contains("/home/mpiuser/.ssh")
    );

    // The mark cannot change: the policy `deploy` installs rejects a v1 replace that would
    // re-mark a v2beta1 job as v1, while a read-modify-write in v1 keeps it.
    apply_created_as_policy(&ns).await;
    // Retried on a conflict: the operator may write the job between the read and the replace.
    let err = wait::until("a refused v1 replace", Duration::from_secs(30), || async {
        let mut replaced = v1.get("from-v2beta1").await.unwrap();
        replaced.metadata.annotations = None;
        match v1.replace("from-v2beta1", &pp, &replaced).await {
            Ok(_) => panic!("a v1 replace re-marked a v2beta1 job"),
            Err(kfop_runtime::kube::Error::Api(e)) if e.code == 409 => Ok(None),
            Err(e) => Ok(Some(e)),
        }
    })
    .await
    .unwrap();
    assert!(
        err.to_string().contains("kfop.dev/created-as] is immutable"),
        "{err}"
    );
    // Retried on a conflict, as any read-modify-write: the operator writes the job meanwhile.
    wait::until("a v1 read-modify-write", Duration::from_secs(30), || async {
        let mut relabelled = v1.get("from-v1").await.unwrap();
        relabelled.labels_mut().insert("team".into(), "a".into());
        match v1.replace("from-v1", &pp, &relabelled).await {
            Ok(_) => Ok(Some(())),
            Err(kfop_runtime::kube::Error::Api(e)) if e.code == 409 => Ok(None),
            Err(e) => panic!("{e}"),
        }
    })
    .await
    .unwrap();
    let stored = v2.get("from-v1").await.unwrap();
    assert_eq!(annotation(&stored, "kfop.dev/created-as"), Some("v1"));
    assert_eq!(stored.labels().get("team").map(String::as_str), Some("a"));

    // Both run to Succeeded, seen the same in either version, each with the semantics of the
    // API it was created in: training-operator's for v1, mpi-operator's for v2beta1.
    for name in ["from-v1", "from-v2beta1"] {
        let conditions = condition_reached(&v2, name, "Succeeded").await;
        assert_eq!(
            v1.get(name).await.unwrap().data["status"]["conditions"],
            conditions
        );
    }
    assert_runs_as_v1(&ns, "from-v1").await;
    assert_eq!(
        true_conditions(&v1.get("from-v1").await.unwrap().data["status"]["conditions"]),
        [
            ("Created".to_owned(), "MPIJob from-v1 is created.".to_owned()),
            (
                "Succeeded".to_owned(),
                "MPIJob from-v1 is successfully completed.".to_owned()
            ),
        ]
    );
    let batch: Api<BatchJob> = ns.api();
    batch.get("from-v2beta1-launcher").await.unwrap();

    // A v1 launcher that exits 1 under restartPolicy Never fails the job.
    let mut failing = job("v1-fails", "v1", json!({}));
    failing.data["spec"]["mpiReplicaSpecs"]["Launcher"]["restartPolicy"] = json!("Never");
    failing.data["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["metadata"]["annotations"] = json!({});
    v1.create(&pp, &failing).await.unwrap();
    let pods: Api<Pod> = ns.api();
    wait::until("the v1 launcher pod to run", Duration::from_secs(60), || async {
        let pod = pods.get_opt("v1-fails-launcher").await.ok().flatten();
        Ok(pod.filter(|p| pods::phase(p) == "Running").map(|_| ()))
    })
    .await
    .unwrap();
    pods::finish(&pods, "v1-fails-launcher", 1, 0).await.unwrap();
    let conditions = condition_reached(&v1, "v1-fails", "Failed").await;
    assert!(
        true_conditions(&conditions).contains(&(
            "Failed".to_owned(),
            "MPIJob v1-fails is failed because 1 Launcher replica(s) failed.".to_owned()
        )),
        "{conditions}"
    );

    // Rotation while v1 jobs keep coming: 40 s at a 30 s validity is at least one rotation.
    let secrets: Api<Secret> = ns.api();
    let crds: Api<CustomResourceDefinition> = Api::all(ns.client());
    let mut certs = BTreeSet::from([serving_cert(&secrets).await.unwrap()]);
    let mut bundles = BTreeSet::from([crd_bundle(&crds).await.unwrap()]);
    let (mut created, mut failed) = (0, Vec::new());
    let until = Instant::now() + Duration::from_secs(40);
    while Instant::now() < until {
        let name = format!("rot-{created}");
        match v1.create(&pp, &job(&name, "v1", json!({}))).await {
            Ok(_) => created += 1,
            Err(e) => failed.push(e.to_string()),
        }
        certs.extend(serving_cert(&secrets).await);
        bundles.extend(crd_bundle(&crds).await);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!(
        "rotation: {created} v1 creates, {} failed, {} serving certs, {} CA bundles",
        failed.len(),
        certs.len(),
        bundles.len()
    );
    assert!(failed.is_empty(), "v1 creates failed during rotation: {failed:?}");
    assert!(certs.len() >= 2, "no rotation in 40 s at a 30 s validity");
    assert!(bundles.len() >= 2, "the CRD's caBundle never changed");

    // A restart reuses the Secret's certificate; one that outlived its certificate replaces it
    // at once. The restart follows a fresh promotion, so the certificate it finds has about
    // 18 s before renewal is due (30 s validity, renewed with 10 s left, 2 s staged): a restart
    // that found one already due would rightly replace it.
    let seen = serving_cert(&secrets).await.unwrap();
    let before = wait::until("the next rotation", Duration::from_secs(40), || async {
        Ok(serving_cert(&secrets).await.filter(|cert| *cert != seen))
    })
    .await
    .unwrap();
    drop(running);
    let running = start(env, ns.name(), webhook).await;
    v1.create(&pp, &job("after-restart", "v1", json!({})))
        .await
        .unwrap();
    assert_eq!(
        serving_cert(&secrets).await.unwrap(),
        before,
        "a restart issued a new certificate"
    );
    drop(running);
    tokio::time::sleep(Duration::from_secs(31)).await;
    let started = Instant::now();
    let _running = start(env, ns.name(), webhook).await;
    wait::until("a v1 create after expiry", Duration::from_secs(30), || async {
        Ok(v1
            .create(&pp, &job("after-expiry", "v1", json!({})))
            .await
            .ok()
            .map(|_| ()))
    })
    .await
    .unwrap();
    println!(
        "v1 creates again {:.1} s after a restart past expiry",
        started.elapsed().as_secs_f64()
    );
    assert_ne!(serving_cert(&secrets).await.unwrap(), before);
    ns.delete().await.unwrap();
}
