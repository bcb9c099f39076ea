#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Kubeflow's Python SDK against the all-in-one operator, with pytest: kfop's own script
//! (`tests/sdk/test_kubeflow_sdk.py`: create, wait, list, delete a PyTorchJob and a TFJob) and
//! Kubeflow's own SDK e2e suites from the training-operator v1.8.1 module, unchanged. The Python
//! environment is `$KFOP_SDK_PYTHON`, else `~/.cache/kfop/sdk-venv` that scripts/test.sh creates.
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kfop_operator::schemes;
use kfop_runtime::k8s_openapi::api::core::v1::Pod;
use kfop_runtime::kube::ResourceExt;
use kfop_runtime::kube::api::{Api, ListParams};
use kfop_runtime::testing::Operator;
use kfop_testenv::peer::{PeerBuild, TRAINING_OPERATOR};
use kfop_testenv::{TestEnv, TestNamespace, pods};

fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("KFOP_SDK_PYTHON") {
        return p.into();
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
    let cache = std::env::var_os("KFOP_CACHE_DIR").map_or_else(|| home.join(".cache/kfop"), PathBuf::from);
    let python = cache.join("sdk-venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/test.sh (it installs kubeflow-training 1.8.1 and pytest), or set KFOP_SDK_PYTHON",
        python.display()
    );
    python
}

/// The all-in-one operator (every kind) on `ns`, and kwok playing the kubelet there: each
/// running pod "trains" for a moment, then ends with exit code 0.
async fn operator_and_kubelet(env: &TestEnv, ns: &TestNamespace) -> (Operator, tokio::task::JoinHandle<()>) {
    let enabled = schemes::parse(&[]).unwrap();
    env.install_crds(enabled.iter().map(|s| kfop_operator::crds::of(*s)))
        .await
        .unwrap();
    let operator = Operator::start(ns.client(), ns.name(), |m| kfop_operator::register(m, &enabled));
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
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    (operator, kubelet)
}

/// Runs pytest with `args`; returns its stdout, failing the test with both streams if it fails.
async fn pytest(env: &TestEnv, args: &[&OsStr], vars: &[(&str, &OsStr)]) -> String {
    let mut pytest = Command::new(python());
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
    let (operator, kubelet) = operator_and_kubelet(env, &ns).await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("sdk/test_kubeflow_sdk.py");
    let stdout = pytest(
        env,
        &[script.as_os_str()],
        &[("KFOP_SDK_NAMESPACE", OsStr::new(ns.name()))],
    )
    .await;
    kubelet.abort();
    operator.stop().await;
    assert!(stdout.contains("2 passed"), "{stdout}");
}

/// Kubeflow's SDK e2e suites (`sdk/python/test/e2e` of the v1.8.1 module) for every kind kfop
/// serves under v1 (MPIJob is v2beta1 here), without gang scheduling (the suites skip their gang
/// cases then): 7 cases, 5 skipped. Only pod logs are stubbed (`sdk/kubelet_logs_stub.py`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubeflow_sdk_e2e_suites_pass_unchanged() {
    let module =
        tokio::task::spawn_blocking(|| PeerBuild::locate_or_build(TRAINING_OPERATOR)?.module_source())
            .await
            .unwrap()
            .unwrap();
    let sdk = module.join("sdk/python");
    let suites: Vec<PathBuf> = ["pytorchjob", "tfjob", "xgboostjob", "paddlejob", "mxjob"]
        .iter()
        .map(|kind| sdk.join(format!("test/e2e/test_e2e_{kind}.py")))
        .collect();
    let env = TestEnv::shared().unwrap();
    let ns = env.namespace("sdk-e2e").await.unwrap();
    let (operator, kubelet) = operator_and_kubelet(env, &ns).await;
    let stub_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("sdk");
    let python_path = std::env::join_paths([stub_dir.as_path(), sdk.as_path()]).unwrap();
    let mut args: Vec<&OsStr> = ["-p", "kubelet_logs_stub", "--rootdir"].map(OsStr::new).to_vec();
    args.push(sdk.as_os_str());
    args.extend(suites.iter().map(|p| p.as_os_str()));
    args.extend([OsStr::new("--namespace"), OsStr::new(ns.name())]);
    let stdout = pytest(
        env,
        &args,
        &[
            ("PYTHONPATH", python_path.as_os_str()),
            ("GANG_SCHEDULER_NAME", OsStr::new("none")),
        ],
    )
    .await;
    kubelet.abort();
    operator.stop().await;
    assert!(stdout.contains("7 passed, 5 skipped"), "{stdout}");
}
