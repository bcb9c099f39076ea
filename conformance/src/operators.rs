//! The operators under comparison, each watching its own namespace of one plane: Kubeflow's
//! training-operator (a [`Peer`], of the release judging the kinds) and kfop's all-in-one
//! `kfop-operator` binary, as separate processes, and the one set of CRDs both serve from.
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kfop_testenv::peer::OperatorProcess;
use kfop_testenv::{Peer, PeerOptions, PeerWebhooks, wait};

use crate::{Error, Result};

/// Overrides the kfop-operator binary (otherwise built with cargo into this target directory).
pub const OPERATOR_BIN_ENV: &str = "KFOP_OPERATOR_BIN";

/// The `kfop-operator` binary of this checkout: `$KFOP_OPERATOR_BIN`, or `cargo build -p
/// kfop-operator` (a no-op when fresh; cargo builds no binary of a dependency, so a test of
/// this crate cannot get it otherwise) into the target directory holding the running test.
/// Blocks; call it from a blocking task.
pub fn operator_bin() -> Result<PathBuf> {
    if let Some(bin) = std::env::var_os(OPERATOR_BIN_ENV) {
        return Ok(PathBuf::from(bin));
    }
    let exe = std::env::current_exe().map_err(Error::io("the test binary"))?;
    // target/<profile>/deps/<test> -> target/<profile>
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| Error::Operator(format!("no target directory above {}", exe.display())))?;
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or_else(|| Error::Operator("no workspace above the crate".to_owned()))?;
    let mut build = kfop_testenv::cargo::command();
    build
        .args(["build", "-p", "kfop-operator", "--bin", "kfop-operator"])
        .current_dir(workspace)
        .stdin(Stdio::null());
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        build.arg("--release");
    }
    let status = build.status().map_err(Error::io("cargo"))?;
    let bin = profile_dir.join("kfop-operator");
    if status.success() && bin.is_file() {
        Ok(bin)
    } else {
        Err(Error::Operator(format!(
            "`cargo build -p kfop-operator` failed ({status}); set {OPERATOR_BIN_ENV} to a built binary"
        )))
    }
}

/// kfop's CRDs of `schemes`, as `kfop-operator crds` prints them: what users install, and what
/// Kubeflow's operator must work on too.
pub fn kfop_crds(bin: &Path, schemes: &[String]) -> Result<Vec<CustomResourceDefinition>> {
    let mut command = Command::new(bin);
    command.arg("crds");
    for scheme in schemes {
        command.arg(format!("--enable-scheme={scheme}"));
    }
    let output = command
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(Error::io(bin))?;
    if !output.status.success() {
        return Err(Error::Operator(format!("`crds` failed ({})", output.status)));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    serde_saphyr::from_multiple(&text).map_err(|e| Error::Operator(format!("`crds` printed no CRDs: {e}")))
}

/// Kubeflow's operator of `peer` (a folder under `testenv/peers/`) watching `namespace` for
/// `schemes`, on the CRDs already installed, its webhook unused (admission is the CRDs' on both
/// sides).
pub async fn start_kubeflow(
    peer: &str,
    kubeconfig: &Path,
    namespace: &str,
    schemes: &[String],
    gang: Option<&str>,
) -> Result<Peer> {
    let options = PeerOptions {
        peer: peer.to_owned(),
        gang_scheduler: gang.map(str::to_owned),
        webhooks: PeerWebhooks::Off,
        enable_schemes: schemes.to_vec(),
        install_crds: false,
        // Cases run concurrently; one thread would queue them (reconciling is per job either way).
        controller_threads: 4,
        ..PeerOptions::default()
    };
    Ok(Peer::start(kubeconfig, namespace, options).await?)
}

/// kfop's all-in-one operator watching `namespace` for `schemes`, metrics on a free loopback
/// port, serving the conversion webhook when `webhook`; returns once `/readyz` answers.
pub async fn start_kfop(
    bin: &Path,
    kubeconfig: &Path,
    namespace: &str,
    schemes: &[String],
    gang: Option<&str>,
    webhook: bool,
) -> Result<OperatorProcess> {
    let metrics = free_port()?;
    let mut args = vec![
        format!("--namespace={namespace}"),
        format!("--metrics-bind-address={metrics}"),
    ];
    if webhook {
        // The conversion webhook on loopback, as in cluster behind its Service.
        let addr = free_port()?;
        args.extend([
            format!("--webhook-bind-address={addr}"),
            format!("--webhook-url=https://{addr}"),
            format!("--webhook-namespace={namespace}"),
        ]);
    }
    args.extend(gang.map(|g| format!("--gang-scheduler-name={g}")));
    args.extend(schemes.iter().map(|s| format!("--enable-scheme={s}")));
    let env = [
        ("KUBECONFIG", kubeconfig.display().to_string()),
        ("RUST_LOG", "info".to_owned()),
    ];
    let mut operator = OperatorProcess::spawn("kfop-operator", bin, &args, &env, &["KUBEFLOW_NAMESPACE"])?;
    operator
        .wait_http_ok(metrics, "/readyz", wait::default_timeout())
        .await?;
    Ok(operator)
}

fn free_port() -> Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(Error::io("127.0.0.1:0"))?;
    listener.local_addr().map_err(Error::io("127.0.0.1:0"))
}
