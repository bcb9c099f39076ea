#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Kubeflow's Python SDK against the all-in-one operator, with pytest: kfop's own script
//! (`tests/sdk/test_kubeflow_sdk.py`: create, wait, list, delete a PyTorchJob and a TFJob) and
//! Kubeflow's own SDK e2e suites from the training-operator v1.8.1 and v1.9.0 modules, unchanged,
//! each with its SDK release (the Python environments scripts/test.sh creates, [`Sdk`]).
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use kfop_operator::schemes;
use kfop_runtime::gang::GangScheduler;
use kfop_runtime::k8s_openapi::api::core::v1::Pod;
use kfop_runtime::kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use kfop_runtime::kube::{Client, ResourceExt};
use kfop_runtime::serde_json::json;
use kfop_runtime::testing::Operator;
use kfop_runtime::webhook::{self, Endpoint, Policy, WebhookOptions};
use kfop_testenv::peer::{PeerBuild, TRAINING_OPERATOR, TRAINING_OPERATOR_V1_9_0};
use kfop_testenv::{TestEnv, TestNamespace, pods};

/// The Kubeflow SDK release each Python environment holds, and where scripts/test.sh puts it.
#[derive(Clone, Copy)]
enum Sdk {
    V1_8_1,
    V1_9_0,
}

impl Sdk {
    /// `$KFOP_SDK_PYTHON` (or `$KFOP_SDK_1_9_PYTHON`), else the venv scripts/test.sh creates
    /// from `tests/sdk/requirements*.txt`.
    fn python(self) -> PathBuf {
        let (var, venv, release) = match self {
            Self::V1_8_1 => ("KFOP_SDK_PYTHON", "sdk-venv", "1.8.1"),
            Self::V1_9_0 => ("KFOP_SDK_1_9_PYTHON", "sdk-venv-1.9", "1.9.0"),
        };
        if let Some(p) = std::env::var_os(var) {
            return p.into();
        }
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
        let cache =
            std::env::var_os("KFOP_CACHE_DIR").map_or_else(|| home.join(".cache/kfop"), PathBuf::from);
        let python = cache.join(venv).join("bin/python");
        assert!(
            python.exists(),
            "{} is missing: run scripts/test.sh (it installs kubeflow-training {release} and pytest), or set {var}",
            python.display()
        );
        python
    }
}

/// One conversion webhook for the whole test process, on a thread of its own (each test has its
/// own runtime): the lanes' operators run in process without one, and MPIJob `v1` (the SDK's
/// version) reaches every lane's jobs through it. Returns once v1 is served.
async fn conversion_webhook(env: &'static TestEnv) {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        let listener = webhook::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let options = WebhookOptions {
                    namespace: "default".to_owned(),
                    secret_name: "kfop-sdk-webhook-cert".to_owned(),
                    endpoint: Endpoint::Url(format!("https://{addr}")),
                    policy: Policy {
                        validity: Duration::from_secs(24 * 3600),
                    },
                };
                let converters = Arc::new(
                    schemes::Scheme::MpiJob
                        .converter()
                        .into_iter()
                        .collect::<Vec<_>>(),
                );
                let client = env.client().await.unwrap();
                webhook::serve(client, options, converters, listener, std::future::pending())
                    .await
                    .unwrap();
            });
        });
    });
    let v1 =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("kubeflow.org", "v1", "MPIJob"), "mpijobs");
    let api: Api<DynamicObject> = Api::all_with(env.client().await.unwrap(), &v1);
    kfop_testenv::wait::until(
        "MPIJob v1 served through the webhook",
        Duration::from_secs(60),
        || async { Ok(api.list(&ListParams::default()).await.ok().map(|_| ())) },
    )
    .await
    .unwrap();
}

/// The all-in-one operator (every kind, with `gang` scheduling) on `ns`, and kwok playing the
/// kubelet there: each running pod "trains" for a moment, then ends with exit code 0. Under
/// Volcano the test plays Volcano too: it admits a PodGroup once its job has at least minMember
/// replicas (the kwok nodes hold any job). Under native gang scheduling nothing is played: the
/// plane's kube-scheduler holds and binds the gangs.
async fn operator_and_kubelet(
    env: &'static TestEnv,
    ns: &TestNamespace,
    gang: GangScheduler,
) -> (Operator, tokio::task::JoinHandle<()>) {
    let enabled = schemes::parse(&[]).unwrap();
    // Once for every lane: lanes starting together would otherwise apply the MPIJob CRD while
    // another's webhook setup rewrites its conversion.
    static CRDS: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    CRDS.get_or_init(|| async {
        let mut crds: Vec<_> = enabled.iter().map(|s| kfop_operator::crds::of(*s)).collect();
        crds.extend(kfop_testenv::crds::pod_groups().unwrap());
        env.install_crds(crds).await.unwrap();
        conversion_webhook(env).await;
    })
    .await;
    let groups = gang
        .pod_group_api_resource()
        .filter(|_| !matches!(gang, GangScheduler::Native { .. }));
    let operator = Operator::start_with(
        ns.client(),
        ns.name(),
        |c| c.gang = gang,
        |m| kfop_operator::register(m, &enabled, &Default::default()).unwrap(),
    );
    let (client, namespace) = (ns.client(), ns.name().to_owned());
    let pods_api: Api<Pod> = ns.api();
    let kubelet = tokio::spawn(async move {
        loop {
            if let Ok(list) = pods_api.list(&ListParams::default()).await {
                for pod in list.items.iter().filter(|p| pods::phase(p) == "Running") {
                    if !pod.annotations().contains_key(pods::EXIT_CODE_ANNOTATION) {
                        let _ = pods::finish(&pods_api, &pod.name_any(), 0, 0).await;
                    }
                }
            }
            if let Some(groups) = &groups {
                admit_pod_groups(&client, &namespace, groups).await;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    (operator, kubelet)
}

/// Volcano's part: a PodGroup not yet admitted goes `Inqueue` when its job has at least
/// `minMember` replicas in all.
async fn admit_pod_groups(client: &Client, namespace: &str, groups: &ApiResource) {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, groups);
    let Ok(list) = api.list(&ListParams::default()).await else {
        return;
    };
    for group in list.items {
        let phase = group.data["status"]["phase"].as_str().unwrap_or_default();
        let min_member = group.data["spec"]["minMember"].as_i64().unwrap_or(0);
        let Some(owner) = group.owner_references().first() else {
            continue;
        };
        if !phase.is_empty() && phase != "Pending" {
            continue;
        }
        let (group_name, version) = owner.api_version.split_once('/').unwrap();
        let gvk = GroupVersionKind::gvk(group_name, version, &owner.kind);
        let job_api = ApiResource::from_gvk_with_plural(&gvk, &format!("{}s", owner.kind.to_lowercase()));
        let jobs: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &job_api);
        let Ok(job) = jobs.get(&owner.name).await else {
            continue;
        };
        let replicas: i64 = job.data["spec"]
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(key, _)| key.ends_with("ReplicaSpecs"))
            .flat_map(|(_, specs)| specs.as_object().into_iter().flatten())
            .map(|(_, spec)| spec["replicas"].as_i64().unwrap_or(1))
            .sum();
        if replicas >= min_member {
            let status = json!({ "status": { "phase": "Inqueue" } });
            let _ = api
                .patch_status(&group.name_any(), &PatchParams::default(), &Patch::Merge(&status))
                .await;
        }
    }
}

/// Runs pytest with `args`; returns its stdout, failing the test with both streams if it fails.
async fn pytest(sdk: Sdk, env: &TestEnv, args: &[&OsStr], vars: &[(&str, &OsStr)]) -> String {
    let mut pytest = Command::new(sdk.python());
    pytest
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .args(args)
        .env("KUBECONFIG", env.kubeconfig())
        // Kubeflow's suites run from the read-only Go module cache.
        .env("PYTHONDONTWRITEBYTECODE", "1");
    for (key, value) in vars {
        pytest.env(key, value);
    }
    let out = tokio::process::Command::from(pytest).output().await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{stdout}");
    assert!(
        out.status.success(),
        "pytest failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubeflow_python_sdk_drives_pytorch_and_tf_jobs() {
    let env = TestEnv::shared().unwrap();
    let ns = env.namespace("sdk").await.unwrap();
    let (operator, kubelet) = operator_and_kubelet(env, &ns, GangScheduler::None).await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("sdk/test_kubeflow_sdk.py");
    let stdout = pytest(
        Sdk::V1_8_1,
        env,
        &[script.as_os_str()],
        &[("KFOP_SDK_NAMESPACE", OsStr::new(ns.name()))],
    )
    .await;
    kubelet.abort();
    operator.stop().await;
    assert!(stdout.contains("2 passed"), "{stdout}");
}

/// Kubeflow's SDK e2e suites (`sdk/python/test/e2e`) of the v1.8.1 module (PyTorch, TF, XGBoost,
/// Paddle, MXNet, MPIJob) with SDK 1.8.1 and of the v1.9.0 module (PyTorch incl. managedBy, TF,
/// XGBoost, Paddle, JAX, MPIJob) with SDK 1.9.0, unchanged (MPIJob in the SDK's v1, through the
/// conversion webhook): without gang scheduling
/// (the suites skip their gang cases then), under Volcano as the test plays it (the gang cases:
/// a job whose minAvailable exceeds its replicas stays Created, then succeeds once updated; the
/// suites skip their plain cases then), and under Kubernetes' native gang scheduling judged by
/// the plane's kube-scheduler (`GANG_SCHEDULER_NAME=default-scheduler`: a name the suites count
/// neither as no gang scheduler nor as one of theirs, so their gang cases run with pods left to
/// the default scheduler; `-k with_gang_scheduling` leaves out the plain cases, which the
/// first lane runs, so this lane takes no longer than Volcano's). Only pod logs are stubbed
/// (`sdk/kubelet_logs_stub.py`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubeflow_sdk_e2e_suites_pass_unchanged() {
    let env = TestEnv::shared().unwrap();
    let stub_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("sdk");
    let releases = [
        (
            Sdk::V1_8_1,
            TRAINING_OPERATOR,
            [
                "pytorchjob",
                "tfjob",
                "xgboostjob",
                "paddlejob",
                "mxjob",
                "mpijob",
            ],
            (
                "8 passed, 6 skipped",
                "6 passed, 8 skipped",
                "6 passed, 8 deselected",
            ),
        ),
        (
            Sdk::V1_9_0,
            TRAINING_OPERATOR_V1_9_0,
            [
                "pytorchjob",
                "tfjob",
                "xgboostjob",
                "paddlejob",
                "jaxjob",
                "mpijob",
            ],
            (
                "9 passed, 6 skipped",
                "6 passed, 9 skipped",
                "6 passed, 9 deselected",
            ),
        ),
    ];
    // The suites mostly wait (the SDK polls every 15 s), so the six runs go at once, each on its
    // own namespace with its own operator.
    let mut runs = Vec::new();
    for (sdk_release, peer, kinds, (plain, gang, native)) in releases {
        let module = tokio::task::spawn_blocking(move || PeerBuild::locate_or_build(peer)?.module_source())
            .await
            .unwrap()
            .unwrap();
        let sdk = module.join("sdk/python");
        for (lane, scheduler, expected, select) in [
            ("none", GangScheduler::None, plain, None),
            ("volcano", GangScheduler::Volcano, gang, None),
            (
                "default-scheduler",
                GangScheduler::native(),
                native,
                Some("with_gang_scheduling"),
            ),
        ] {
            let suites: Vec<PathBuf> = kinds
                .iter()
                .map(|kind| sdk.join(format!("test/e2e/test_e2e_{kind}.py")))
                .collect();
            let python_path = std::env::join_paths([stub_dir.as_path(), sdk.as_path()]).unwrap();
            let sdk = sdk.clone();
            runs.push(async move {
                let ns = env.namespace(&format!("sdk-e2e-{lane}")).await.unwrap();
                let (operator, kubelet) = operator_and_kubelet(env, &ns, scheduler).await;
                let mut args: Vec<&OsStr> = ["-p", "kubelet_logs_stub", "--rootdir"].map(OsStr::new).to_vec();
                args.push(sdk.as_os_str());
                args.extend(suites.iter().map(|p| p.as_os_str()));
                args.extend([OsStr::new("--namespace"), OsStr::new(ns.name())]);
                if let Some(select) = select {
                    args.extend([OsStr::new("-k"), OsStr::new(select)]);
                }
                let stdout = pytest(
                    sdk_release,
                    env,
                    &args,
                    &[
                        ("PYTHONPATH", python_path.as_os_str()),
                        ("GANG_SCHEDULER_NAME", OsStr::new(lane)),
                    ],
                )
                .await;
                kubelet.abort();
                operator.stop().await;
                assert!(stdout.contains(expected), "{peer} {lane}: {stdout}");
            });
        }
    }
    futures::future::join_all(runs).await;
}
