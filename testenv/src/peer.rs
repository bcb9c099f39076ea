//! Peer operators: other implementations of the Kubeflow APIs (Kubeflow's own training-operator
//! first), built from their Go modules by `testenv/peers/build.sh` and run out of cluster against
//! a plane: the oracle kfop is compared with, and a benchmark baseline.
//!
//! [`PeerBuild`] builds (or reuses) a peer and reads the CRDs copied from its module; [`Peer`]
//! runs one, watching one namespace, and stops it when dropped.
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

use crate::ports::{free_ports, retry_if_port_taken};
use crate::process::{self, Component, Lifetime, log_tail, stop_pid};
use crate::{Error, Result, kubeconfig, wait};

/// The command that builds a peer, relative to the kfop repository root: `build.sh <peer>`.
pub const PEER_BUILD_COMMAND: &str = "testenv/peers/build.sh";

/// Kubeflow training-operator v1.8.1 (`testenv/peers/training-operator/`).
pub const TRAINING_OPERATOR: &str = "training-operator";
/// Kubeflow training-operator v1.9.0 (`testenv/peers/training-operator-v1.9.0/`), the first with
/// JAXJob. It runs out of cluster exactly as v1.8.1 does (same flags, cert rotator and Secret).
pub const TRAINING_OPERATOR_V1_9_0: &str = "training-operator-v1.9.0";
/// Kubeflow mpi-operator v0.6.0 (`testenv/peers/mpi-operator-v0.6.0/`), the MPIJob
/// `kubeflow.org/v2beta1` controller. Its flags differ from training-operator's (see
/// [`Peer::start`]); it has no webhooks, always runs leader election (a Lease named
/// `mpi-operator` in `--lock-namespace`, here the watched namespace, so that peers on different
/// namespaces never wait for each other) and serves `/healthz` on the fixed port
/// [`MPI_OPERATOR_HEALTH_PORT`] of every interface: one runs per machine at a time.
pub const MPI_OPERATOR_V0_6_0: &str = "mpi-operator-v0.6.0";
/// The binary `build.sh` names after mpi-operator's `peer.env`.
const MPI_OPERATOR_BINARY: &str = "mpi-operator";
/// mpi-operator's health-check port, a constant of its `cmd/mpi-operator/app` (no flag).
pub const MPI_OPERATOR_HEALTH_PORT: u16 = 8080;
/// What mpi-operator logs once it leads and its informer caches are synced.
const MPI_OPERATOR_READY_LINE: &str = "Started workers";

/// Kueue v0.17.0 (`testenv/peers/kueue-v0.17.0/`): not a Kubeflow operator but the job queue
/// that runs next to one. It suspends labelled jobs at creation (its mutating webhook) and
/// un-suspends them once their Workload fits a ClusterQueue's quota. It runs out of cluster as
/// [`Peer::start`] describes: a config file, its webhooks (mutating and validating) on loopback.
pub const KUEUE_V0_17_0: &str = "kueue-v0.17.0";
/// Kueue v0.19.2 (`testenv/peers/kueue-v0.19.2/`), the newest the Go module proxy serves: its
/// Kubeflow job integrations are off unless its configuration lists them (its default
/// `integrations.frameworks` is `batch/job` alone), and it runs as [`KUEUE_V0_17_0`] does.
pub const KUEUE_V0_19_2: &str = "kueue-v0.19.2";
/// Kueue's "pod" integration as a kind of [`PeerOptions::enable_schemes`]: plain pods and pod
/// groups (its `integrations.frameworks` entry `pod`, its webhooks `/mutate--v1-pod` and
/// `/validate--v1-pod`).
pub const KUEUE_POD_INTEGRATION: &str = "pod";
/// The binary `build.sh` names after Kueue's `peer.env`.
const KUEUE_BINARY: &str = "kueue";
/// The Kubeflow kinds kfop serves that Kueue integrates (its `integrations.frameworks` are
/// `kubeflow.org/<kind>`); MXJob has no integration.
pub const KUEUE_KUBEFLOW_KINDS: [&str; 6] = [
    "pytorchjob",
    "tfjob",
    "mpijob",
    "paddlejob",
    "xgboostjob",
    "jaxjob",
];
/// With `internalCertManagement` off, Kueue's `cmd/kueue` reads its metrics server's certificate
/// from this fixed path (no flag or setting moves it) and exits when it is missing.
pub const KUEUE_METRICS_CERT_DIR: &str = "/etc/kueue/metrics/certs";

/// The Secret training-operator's cert rotator keeps its CA and serving cert in (its default
/// `--webhook-secret-name`); it must exist before the operator starts.
const WEBHOOK_SECRET: &str = "training-operator-webhook-cert";
/// Where training-operator's cert rotator waits for `tls.crt` to appear, hard-coded in its
/// `pkg/cert` (in cluster, the Secret's volume mount). It only checks that the file exists.
const ROTATOR_CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";
/// controller-runtime's webhook server reads its cert from here under `$TMPDIR`.
const SERVING_CERT_DIR: &str = "k8s-webhook-server/serving-certs";

/// A built peer: its binary and the manifests copied from its module.
#[derive(Debug, Clone)]
pub struct PeerBuild {
    /// The folder under `testenv/peers/` describing it.
    pub peer: String,
    pub bin: PathBuf,
    /// `<cache>/peers/<name>-<version>`, holding `bin/`, `crds/` and (if it has webhooks)
    /// `webhooks.yaml`.
    pub dir: PathBuf,
}

impl PeerBuild {
    /// Runs `testenv/peers/build.sh <peer>`: returns at once on a warm cache; a cold build takes
    /// minutes and needs Go (its progress goes to stderr). Blocks; call it from a blocking task.
    pub fn locate_or_build(peer: &str) -> Result<Self> {
        // The recipe is not embedded (the CRDs it copies are megabytes): peers build from a kfop
        // checkout, which is where the conformance tests and benchmarks run.
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/build.sh");
        if !script.is_file() {
            return Err(peer_error(
                peer,
                format!(
                    "no build recipe at {}; peers build from a kfop checkout",
                    script.display()
                ),
            ));
        }
        let output = Command::new("bash")
            .arg(&script)
            .arg(peer)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .map_err(|source| Error::Spawn {
                component: script.display().to_string(),
                source,
            })?;
        if !output.status.success() {
            return Err(peer_error(
                peer,
                format!("`{PEER_BUILD_COMMAND} {peer}` failed ({})", output.status),
            ));
        }
        let stdout = String::from_utf8_lossy(&output.stdout);
        let bin = PathBuf::from(stdout.lines().last().unwrap_or_default().trim());
        let dir = bin.parent().and_then(Path::parent).map(Path::to_owned);
        match dir {
            Some(dir) if bin.is_file() => Ok(Self {
                peer: peer.to_owned(),
                bin,
                dir,
            }),
            _ => Err(peer_error(
                peer,
                format!("`{PEER_BUILD_COMMAND} {peer}` printed no binary path"),
            )),
        }
    }

    /// The binary's name (`training-operator`).
    pub fn name(&self) -> &str {
        self.bin
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(&self.peer)
    }

    /// The module version it was built from (`v1.8.1`): the cache directory is
    /// `<name>-<version>`.
    pub fn version(&self) -> &str {
        let dir = self.dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        dir.strip_prefix(self.name())
            .and_then(|rest| rest.strip_prefix('-'))
            .unwrap_or(dir)
    }

    /// The peer's CRDs, as its module ships them, sorted by file name.
    pub fn crds(&self) -> Result<Vec<CustomResourceDefinition>> {
        let dir = self.dir.join("crds");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map_err(Error::io(&dir))?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
            .collect();
        files.sort();
        files
            .iter()
            .map(|file| {
                let text = std::fs::read_to_string(file).map_err(Error::io(file))?;
                serde_saphyr::from_str(&text).map_err(|e| {
                    peer_error(&self.peer, format!("CRD {} does not parse: {e}", file.display()))
                })
            })
            .collect()
    }

    /// The source tree of the peer's Go module (read-only, in the Go module cache), for what the
    /// build does not copy (its `examples/`): `go list -m -f '{{.Dir}}' <module>` run in the
    /// peer's folder. Needs Go, which built the peer; blocks.
    pub fn module_source(&self) -> Result<PathBuf> {
        let folder = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("peers")
            .join(&self.peer);
        let env_file = folder.join("peer.env");
        let text = std::fs::read_to_string(&env_file).map_err(Error::io(&env_file))?;
        let module = text
            .lines()
            .find_map(|line| line.trim().strip_prefix("module="))
            .map(|m| m.trim_matches(['\'', '"']).to_owned())
            .ok_or_else(|| peer_error(&self.peer, format!("{} names no module", env_file.display())))?;
        let output = Command::new("go")
            .args(["list", "-m", "-f", "{{.Dir}}", &module])
            .current_dir(&folder)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .map_err(|source| Error::Spawn {
                component: format!("go list -m {module}"),
                source,
            })?;
        let dir = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
        if output.status.success() && dir.is_dir() {
            Ok(dir)
        } else {
            Err(peer_error(
                &self.peer,
                format!("`go list -m {module}` found no source ({})", output.status),
            ))
        }
    }

    /// The peer's webhook configurations as its module ships them: none, a validating one
    /// (training-operator) or both kinds in one file (Kueue).
    pub(crate) fn webhooks(&self) -> Result<ModuleWebhooks> {
        let file = self.dir.join("webhooks.yaml");
        let mut found = ModuleWebhooks::default();
        if !file.is_file() {
            return Ok(found);
        }
        let unparsable = |e: &dyn std::fmt::Display| {
            peer_error(&self.peer, format!("{} does not parse: {e}", file.display()))
        };
        let text = std::fs::read_to_string(&file).map_err(Error::io(&file))?;
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).map_err(|e| unparsable(&e))?;
        for doc in docs {
            match doc["kind"].as_str() {
                Some("ValidatingWebhookConfiguration") => {
                    found.validating = Some(serde_json::from_value(doc).map_err(|e| unparsable(&e))?);
                }
                Some("MutatingWebhookConfiguration") => {
                    found.mutating = Some(serde_json::from_value(doc).map_err(|e| unparsable(&e))?);
                }
                _ => {}
            }
        }
        Ok(found)
    }
}

/// The webhook configurations in a peer's module.
#[derive(Debug, Default)]
pub(crate) struct ModuleWebhooks {
    pub(crate) validating: Option<ValidatingWebhookConfiguration>,
    pub(crate) mutating: Option<MutatingWebhookConfiguration>,
}

/// Whether the API server calls the peer's validating webhooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerWebhooks {
    /// A ValidatingWebhookConfiguration of its own (`kfop-peer-<namespace>-<name>`, the module's
    /// webhooks and paths) sends requests for the watched namespace to the peer's webhook server
    /// at `https://127.0.0.1:<port>`, trusting a CA made for it; deleted when the peer stops.
    Loopback,
    /// No webhook configuration: the API server never calls the peer.
    Off,
}

/// How to run a peer. The flags are training-operator's; mpi-operator maps what it has of
/// them (`--namespace`, `--threadiness`, `--gang-scheduling`, `--monitoring-port`) and ignores
/// the rest (it has no schemes and no webhooks).
/// Kueue reads `enable_schemes` as the Kubeflow kinds to integrate and ignores the rest.
#[derive(Debug, Clone)]
pub struct PeerOptions {
    /// The folder under `testenv/peers/`.
    pub peer: String,
    /// `$MY_POD_NAMESPACE`: where the cert rotator keeps its Secret (created if missing).
    pub operator_namespace: String,
    pub webhooks: PeerWebhooks,
    /// `--enable-scheme` (`pytorchjob`, `tfjob`, ...); empty enables every scheme, which needs
    /// every CRD of the peer. Only the enabled schemes' webhooks are configured.
    pub enable_schemes: Vec<String>,
    /// `--gang-scheduler-name` (`volcano`, `scheduler-plugins`); none disables gang scheduling.
    pub gang_scheduler: Option<String>,
    /// Install the peer's own CRDs first. Off on a plane that already has kfop's.
    pub install_crds: bool,
    /// `--controller-threads`.
    pub controller_threads: u32,
    /// Appended to the command line (e.g. `--zap-log-level=info`).
    pub extra_args: Vec<String>,
    /// How long to wait for `/readyz`.
    pub start_timeout: Duration,
    /// Kueue only: merged into its configuration file over what [`Peer::start`] writes (objects
    /// key by key, anything else replaced), e.g. `{"multiKueue": {"workerLostTimeout": "30s"}}`
    /// for a MultiKueue manager. Null (the default) changes nothing.
    pub kueue_config: serde_json::Value,
}

impl Default for PeerOptions {
    fn default() -> Self {
        Self {
            peer: TRAINING_OPERATOR.to_owned(),
            operator_namespace: "kubeflow".to_owned(),
            webhooks: PeerWebhooks::Loopback,
            enable_schemes: Vec::new(),
            gang_scheduler: None,
            install_crds: true,
            controller_threads: 1,
            extra_args: Vec::new(),
            start_timeout: wait::default_timeout(),
            kueue_config: serde_json::Value::Null,
        }
    }
}

/// A running peer operator. Dropping it stops the process, deletes its webhook configuration
/// and removes its directory (kept, with its log, when the thread is panicking: a failed test).
#[derive(Debug)]
pub struct Peer {
    build: PeerBuild,
    component: Component,
    dir: PathBuf,
    kubeconfig: PathBuf,
    namespace: String,
    webhook_config: Option<String>,
    mutating_webhook_config: Option<String>,
    metrics_port: u16,
    health_port: u16,
    webhook_port: u16,
    /// mpi-operator's hold on its fixed health port, released when the peer goes.
    _port_lock: Option<std::fs::File>,
}

impl Peer {
    /// A peer just started, watching `namespace` through `kubeconfig` on `ports` (metrics,
    /// health, webhook), its webhook configurations not applied yet.
    fn running(
        build: PeerBuild,
        component: Component,
        dir: PathBuf,
        (kubeconfig, namespace): (&Path, &str),
        [metrics_port, health_port, webhook_port]: [u16; 3],
    ) -> Self {
        Self {
            build,
            component,
            dir,
            kubeconfig: kubeconfig.to_owned(),
            namespace: namespace.to_owned(),
            webhook_config: None,
            mutating_webhook_config: None,
            metrics_port,
            health_port,
            webhook_port,
            _port_lock: None,
        }
    }

    /// Builds or reuses the peer, installs its CRDs (unless told not to), prepares what its
    /// deployment manifests would (namespaces, the empty webhook Secret, serving certs, a
    /// webhook configuration) and starts it watching `namespace` only, with leader election
    /// off, no gang scheduler unless asked, and metrics, probes and webhook on free loopback
    /// ports. Returns once `/readyz` answers 200 (for training-operator: its cert rotator is
    /// done and its webhook server serves) and every enabled webhook answers. mpi-operator
    /// (no webhooks, leader election always on) starts as [`MPI_OPERATOR_V0_6_0`] describes,
    /// Kueue (a config file, webhooks of both kinds) as [`KUEUE_V0_17_0`] does.
    pub async fn start(kubeconfig: &Path, namespace: &str, options: PeerOptions) -> Result<Self> {
        retry_if_port_taken(&options.peer, || {
            Self::start_once(kubeconfig, namespace, options.clone())
        })
        .await
    }

    async fn start_once(kubeconfig: &Path, namespace: &str, options: PeerOptions) -> Result<Self> {
        let started = Instant::now();
        let peer = options.peer.clone();
        let build = tokio::task::spawn_blocking(move || PeerBuild::locate_or_build(&peer))
            .await
            .map_err(|e| peer_error(&options.peer, format!("build task: {e}")))??;
        let name = build.name().to_owned();
        let client = kubeconfig::client_from(kubeconfig).await?;
        if options.install_crds {
            crate::install_crds(&client, build.crds()?).await?;
        }
        ensure_namespace(&client, namespace).await?;
        ensure_namespace(&client, &options.operator_namespace).await?;
        if name == MPI_OPERATOR_BINARY {
            return Self::start_mpi_operator(build, kubeconfig, namespace, &options, started).await;
        }
        if name == KUEUE_BINARY {
            return Self::start_kueue(build, &client, kubeconfig, namespace, &options, started).await;
        }

        let dir = fresh_dir(&name, namespace)?;
        let logs = dir.join("logs");
        std::fs::create_dir_all(&logs).map_err(Error::io(&logs))?;
        let [metrics_port, health_port, webhook_port]: [u16; 3] = free_ports(3)?
            .try_into()
            .map_err(|_| peer_error(&name, "could not reserve 3 ports"))?;

        // The webhook server needs a serving cert before it starts. In cluster the rotator writes
        // it to the Secret and the kubelet mounts it; here nobody would, and the rotator's cert
        // names only `<service>.<namespace>.svc`, which the API server cannot reach. So the peer
        // serves a cert of ours (also valid for 127.0.0.1) from a private `$TMPDIR`, and the
        // rotator keeps its own Secret, which nothing reads.
        let tmp = dir.join("tmp");
        let webhooks = build
            .webhooks()?
            .validating
            .map(|vwc| enabled_webhooks(vwc, &options.enable_schemes));
        let webhook_paths = webhooks.as_ref().map(webhook_paths).unwrap_or_default();
        let ca = if webhooks.is_some() {
            let ca = write_serving_cert(&tmp.join(SERVING_CERT_DIR), &options.operator_namespace)?;
            ensure_rotator_sees_certs(&name, &ca.pem)?;
            ensure_secret(&client, &options.operator_namespace).await?;
            Some(ca)
        } else {
            None
        };

        let mut args = vec![
            // `--namespace` decides what it watches; an inherited value must not leak in.
            "-u".to_owned(),
            "KUBEFLOW_NAMESPACE".to_owned(),
            format!("MY_POD_NAMESPACE={}", options.operator_namespace),
            format!("TMPDIR={}", tmp.display()),
            build.bin.display().to_string(),
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--namespace={namespace}"),
            format!("--metrics-bind-address=127.0.0.1:{metrics_port}"),
            format!("--health-probe-bind-address=127.0.0.1:{health_port}"),
            format!("--webhook-server-port={webhook_port}"),
            "--leader-elect=false".to_owned(),
            format!("--controller-threads={}", options.controller_threads),
        ];
        for scheme in &options.enable_schemes {
            args.push(format!("--enable-scheme={scheme}"));
        }
        if let Some(gang) = &options.gang_scheduler {
            args.push(format!("--gang-scheduler-name={gang}"));
        }
        args.extend(options.extra_args.iter().cloned());
        // `env` sets the environment and execs the peer in place, so the parent-death signal
        // `process::spawn` arranges applies to the peer itself.
        let component = process::spawn(&name, Path::new("env"), &args, &logs, Lifetime::DieWithParent)?;
        let mut peer = Self::running(
            build,
            component,
            dir,
            (kubeconfig, namespace),
            [metrics_port, health_port, webhook_port],
        );
        // Applied once the peer runs, so that it is deleted with the peer whatever fails next;
        // until the webhook server listens, writes of jobs in `namespace` are refused.
        if let (PeerWebhooks::Loopback, Some(vwc), Some(ca)) = (options.webhooks, webhooks, &ca) {
            let vwc = loopback_webhooks(vwc, &name, namespace, webhook_port, &ca.pem);
            peer.webhook_config = Some(apply_webhooks(&client, &vwc).await?);
        }
        peer.wait_ready(ca.as_ref(), &webhook_paths, &options, started)
            .await?;
        Ok(peer)
    }

    /// Waits until `/readyz` answers 200 and then every webhook in `paths` answers (trusting
    /// `ca`), failing early if the peer exits.
    async fn wait_ready(
        &mut self,
        ca: Option<&Ca>,
        paths: &[String],
        options: &PeerOptions,
        started: Instant,
    ) -> Result<()> {
        let name = self.build.name().to_owned();
        let deadline = Instant::now() + options.start_timeout;
        let readyz = self.health_addr();
        while !http_ok(readyz, "/readyz") {
            self.component.check_alive()?;
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: format!(
                        "{name} /readyz on {readyz}; last log lines from {}:\n{}",
                        self.log().display(),
                        self.log_tail(20)
                    ),
                    seconds: started.elapsed().as_secs(),
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // training-operator's `/readyz` passes once the webhook server serves the first scheme's
        // webhook; the other schemes register theirs just after (in random order), and until
        // then the API server gets 404 and refuses their jobs. Wait until every path answers.
        if let Some(ca) = ca {
            let probe = webhook_client(self.webhook_port, ca)?;
            for path in paths {
                while !webhook_answers(&probe, path).await {
                    self.component.check_alive()?;
                    if Instant::now() >= deadline {
                        return Err(Error::Timeout {
                            what: format!("{name} to serve webhook {path}"),
                            seconds: started.elapsed().as_secs(),
                        });
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        tracing::info!(peer = %name, namespace = %self.namespace, elapsed_ms = started.elapsed().as_millis(), "peer ready");
        Ok(())
    }

    /// Kueue out of cluster, cluster-wide but managing jobs of `namespace` only
    /// (`managedJobsNamespaceSelector`), with its own cert management off: it serves a cert of
    /// ours for 127.0.0.1 (also copied to [`KUEUE_METRICS_CERT_DIR`] if that is empty), and its
    /// webhooks for Kueue's own kinds and the enabled Kubeflow kinds (`enable_schemes`, by
    /// default [`KUEUE_KUBEFLOW_KINDS`]) are registered with URLs. Its visibility API server is
    /// off (it would need an APIService and delegated auth). Returns once `/readyz` answers
    /// (its webhook server serves) and every registered webhook answers.
    async fn start_kueue(
        build: PeerBuild,
        client: &Client,
        kubeconfig: &Path,
        namespace: &str,
        options: &PeerOptions,
        started: Instant,
    ) -> Result<Self> {
        let name = build.name().to_owned();
        let plane_lock =
            kueue_plane_lock(&name, kubeconfig, options.start_timeout.max(PORT_LOCK_WAIT)).await?;
        let dir = fresh_dir(&name, namespace)?;
        let logs = dir.join("logs");
        std::fs::create_dir_all(&logs).map_err(Error::io(&logs))?;
        let [metrics_port, health_port, webhook_port]: [u16; 3] = free_ports(3)?
            .try_into()
            .map_err(|_| peer_error(&name, "could not reserve 3 ports"))?;
        let cert_dir = dir.join(SERVING_CERT_DIR);
        let ca = write_serving_cert(&cert_dir, &options.operator_namespace)?;
        ensure_kueue_metrics_cert(&name, &cert_dir, Path::new(KUEUE_METRICS_CERT_DIR))?;

        let kinds = kueue_kinds(&options.enable_schemes);
        let mut config = kueue_config(
            &options.operator_namespace,
            namespace,
            &kinds,
            [metrics_port, health_port, webhook_port],
            &cert_dir,
        );
        merge_json(&mut config, &options.kueue_config);
        let config_file = dir.join("config.json");
        std::fs::write(&config_file, config.to_string()).map_err(Error::io(&config_file))?;
        let keep = |path: &str, groups: &[String]| kueue_keeps_webhook(path, groups, &kinds);
        let manifests = build.webhooks()?;
        let mutating = manifests.mutating.map(|mut w| {
            w.retain_hooks(keep);
            w
        });
        let validating = manifests.validating.map(|mut w| {
            w.retain_hooks(keep);
            w
        });
        let mut paths = mutating.as_ref().map(webhook_paths).unwrap_or_default();
        paths.extend(validating.as_ref().map(webhook_paths).unwrap_or_default());

        let mut args = vec![
            format!("KUBECONFIG={}", kubeconfig.display()),
            build.bin.display().to_string(),
            format!("--config={}", config_file.display()),
        ];
        args.extend(options.extra_args.iter().cloned());
        let component = process::spawn(&name, Path::new("env"), &args, &logs, Lifetime::DieWithParent)?;
        let mut peer = Self::running(
            build,
            component,
            dir,
            (kubeconfig, namespace),
            [metrics_port, health_port, webhook_port],
        );
        peer._port_lock = Some(plane_lock);
        // As for training-operator: applied once the peer runs, so that they go with it.
        if options.webhooks == PeerWebhooks::Loopback {
            if let Some(mwc) = mutating {
                let mwc = loopback_webhooks(mwc, &name, namespace, webhook_port, &ca.pem);
                peer.mutating_webhook_config = Some(apply_webhooks(client, &mwc).await?);
            }
            if let Some(vwc) = validating {
                let vwc = loopback_webhooks(vwc, &name, namespace, webhook_port, &ca.pem);
                peer.webhook_config = Some(apply_webhooks(client, &vwc).await?);
            }
        }
        peer.wait_ready(Some(&ca), &paths, options, started).await?;
        Ok(peer)
    }

    /// mpi-operator out of cluster: `--kubeConfig` (which `$KUBECONFIG` would override, so it
    /// is unset), `--namespace`, its leader-election Lease in the watched namespace, no gang
    /// scheduler unless asked, metrics on a free port. Returns once it leads and its caches are
    /// synced (its log says "Started workers"); its `/healthz` answers before that.
    async fn start_mpi_operator(
        build: PeerBuild,
        kubeconfig: &Path,
        namespace: &str,
        options: &PeerOptions,
        started: Instant,
    ) -> Result<Self> {
        let name = build.name().to_owned();
        let port_lock = health_port_lock(&name, options.start_timeout.max(PORT_LOCK_WAIT)).await?;
        let health = SocketAddr::from(([127, 0, 0, 1], MPI_OPERATOR_HEALTH_PORT));
        // The lock's last holder may still be exiting.
        let freed = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect_timeout(&health, Duration::from_millis(200)).is_ok()
            && Instant::now() < freed
        {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        if TcpStream::connect_timeout(&health, Duration::from_millis(200)).is_ok() {
            return Err(peer_error(
                &name,
                format!(
                    "port {MPI_OPERATOR_HEALTH_PORT} is taken (another mpi-operator?): its health \
                     check listens there, a constant, and it exits when it cannot"
                ),
            ));
        }
        let dir = fresh_dir(&name, namespace)?;
        let logs = dir.join("logs");
        std::fs::create_dir_all(&logs).map_err(Error::io(&logs))?;
        let [metrics_port]: [u16; 1] = free_ports(1)?
            .try_into()
            .map_err(|_| peer_error(&name, "could not reserve a port"))?;
        let mut args = vec![
            "-u".to_owned(),
            "KUBEFLOW_NAMESPACE".to_owned(),
            "-u".to_owned(),
            "KUBECONFIG".to_owned(),
            build.bin.display().to_string(),
            format!("--kubeConfig={}", kubeconfig.display()),
            format!("--namespace={namespace}"),
            format!("--lock-namespace={namespace}"),
            format!("--monitoring-port={metrics_port}"),
            format!("--threadiness={}", options.controller_threads),
            // Its defaults (5 and 10) throttle a burst of cases; training-operator has none.
            "--kube-api-qps=50".to_owned(),
            "--kube-api-burst=100".to_owned(),
        ];
        if let Some(gang) = &options.gang_scheduler {
            args.push(format!("--gang-scheduling={gang}"));
        }
        args.extend(options.extra_args.iter().cloned());
        let component = process::spawn(&name, Path::new("env"), &args, &logs, Lifetime::DieWithParent)?;
        let mut peer = Self {
            build,
            component,
            dir,
            kubeconfig: kubeconfig.to_owned(),
            namespace: namespace.to_owned(),
            webhook_config: None,
            mutating_webhook_config: None,
            metrics_port,
            health_port: MPI_OPERATOR_HEALTH_PORT,
            webhook_port: 0,
            _port_lock: Some(port_lock),
        };
        let deadline = Instant::now() + options.start_timeout;
        while !std::fs::read_to_string(peer.log())
            .unwrap_or_default()
            .contains(MPI_OPERATOR_READY_LINE)
        {
            peer.component.check_alive()?;
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: format!(
                        "{name} to lead and sync its caches; last log lines from {}:\n{}",
                        peer.log().display(),
                        peer.log_tail(20)
                    ),
                    seconds: started.elapsed().as_secs(),
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        tracing::info!(peer = %name, %namespace, elapsed_ms = started.elapsed().as_millis(), "peer ready");
        Ok(peer)
    }

    pub fn build(&self) -> &PeerBuild {
        &self.build
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Its stdout and stderr.
    pub fn log(&self) -> &Path {
        &self.component.log
    }

    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.component.log, lines)
    }

    /// `127.0.0.1:<port>` of its Prometheus metrics (`/metrics`).
    /// The peer's process id (for RSS and CPU readings).
    pub fn pid(&self) -> u32 {
        self.component.child.id()
    }

    pub fn metrics_addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.metrics_port))
    }

    /// `127.0.0.1:<port>` of its `/healthz` and `/readyz`.
    pub fn health_addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.health_port))
    }

    /// Its webhook server's port (it listens on every interface: the flag sets only the port);
    /// 0 for a peer without webhooks (mpi-operator).
    pub fn webhook_port(&self) -> u16 {
        self.webhook_port
    }

    /// Fails with the log tail if the process has exited.
    pub fn check_alive(&mut self) -> Result<()> {
        self.component.check_alive()
    }
}

/// Deletes the named webhook configurations of a peer that is going away, from a `Drop`: left
/// behind, they would fail every write they cover (failurePolicy Fail). Drop cannot await, so
/// the deletes run on a thread with its own runtime.
pub(crate) fn delete_webhook_configs(
    kubeconfig: &Path,
    mutating: Option<String>,
    validating: Option<String>,
) {
    if mutating.is_none() && validating.is_none() {
        return;
    }
    let kubeconfig = kubeconfig.to_owned();
    let deleting = std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
            return;
        };
        rt.block_on(async {
            if let Ok(client) = kubeconfig::client_from(&kubeconfig).await {
                let dp = DeleteParams::default();
                if let Some(name) = validating {
                    let api = Api::<ValidatingWebhookConfiguration>::all(client.clone());
                    let _ = api.delete(&name, &dp).await;
                }
                if let Some(name) = mutating {
                    let api = Api::<MutatingWebhookConfiguration>::all(client);
                    let _ = api.delete(&name, &dp).await;
                }
            }
        });
    });
    let _ = deleting.join();
}

impl Drop for Peer {
    fn drop(&mut self) {
        stop_pid(self.component.child.id(), Duration::from_secs(5));
        let _ = self.component.child.wait();
        delete_webhook_configs(
            &self.kubeconfig,
            self.mutating_webhook_config.take(),
            self.webhook_config.take(),
        );
        if std::thread::panicking() {
            eprintln!(
                "kept the log of peer {} in {}",
                self.build.peer,
                self.component.log.display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// An operator of the caller's own run next to a peer, the way a peer runs: from a fresh
/// directory holding its log, with the given environment, SIGKILLed if the test process dies,
/// stopped (SIGTERM, then SIGKILL) when dropped; its directory is kept when the thread panics.
/// The conformance runner starts kfop's operator with it.
#[derive(Debug)]
pub struct OperatorProcess {
    component: Component,
    dir: PathBuf,
}

impl OperatorProcess {
    /// Runs `bin args...` with `env` added to the environment (and `unset` removed from it).
    pub fn spawn(
        name: &str,
        bin: &Path,
        args: &[String],
        env: &[(&str, String)],
        unset: &[&str],
    ) -> Result<Self> {
        let dir = fresh_dir(name, "operator")?;
        let logs = dir.join("logs");
        std::fs::create_dir_all(&logs).map_err(Error::io(&logs))?;
        let mut argv = Vec::new();
        for var in unset {
            argv.push("-u".to_owned());
            argv.push((*var).to_owned());
        }
        argv.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
        argv.push(bin.display().to_string());
        argv.extend(args.iter().cloned());
        // `env` execs the operator in place, so the parent-death signal applies to it.
        let component = process::spawn(name, Path::new("env"), &argv, &logs, Lifetime::DieWithParent)?;
        Ok(Self { component, dir })
    }

    /// Waits until `GET path` on `addr` answers 200, failing early if the process exits.
    pub async fn wait_http_ok(&mut self, addr: SocketAddr, path: &str, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        while !http_ok(addr, path) {
            self.component.check_alive()?;
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: format!(
                        "{} {path} on {addr}; last log lines:\n{}",
                        self.component.name,
                        self.log_tail(20)
                    ),
                    seconds: timeout.as_secs(),
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Ok(())
    }

    /// Its stdout and stderr.
    pub fn log(&self) -> &Path {
        &self.component.log
    }

    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.component.log, lines)
    }

    /// Fails with the log tail if the process has exited.
    pub fn check_alive(&mut self) -> Result<()> {
        self.component.check_alive()
    }
}

impl Drop for OperatorProcess {
    fn drop(&mut self) {
        stop_pid(self.component.child.id(), Duration::from_secs(5));
        let _ = self.component.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "kept the log of {} in {}",
                self.component.name,
                self.component.log.display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// How long an mpi-operator waits for another test's to stop (test targets run in parallel
/// lanes: a conformance run holds one for minutes).
const PORT_LOCK_WAIT: Duration = Duration::from_secs(20 * 60);

/// Waits for this plane's Kueue lock: Kueue watches its own kinds cluster-wide (ClusterQueues,
/// Workloads of every namespace), so two on one plane would both admit every Workload. Tests on
/// the same plane (its kubeconfig) take turns; Kueues of different planes (MultiKueue's manager
/// and worker) run at once.
async fn kueue_plane_lock(name: &str, kubeconfig: &Path, wait: Duration) -> Result<std::fs::File> {
    let key: String = kubeconfig
        .display()
        .to_string()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let path = std::env::temp_dir().join(format!("kfop-kueue{key}.lock"));
    lock_file(name, &path, wait, "another Kueue on this plane").await
}

/// Waits for this machine's lock on [`MPI_OPERATOR_HEALTH_PORT`]: mpi-operators of tests run at
/// the same time take turns instead of failing on the port.
async fn health_port_lock(name: &str, wait: Duration) -> Result<std::fs::File> {
    let path = std::env::temp_dir().join(format!("kfop-mpi-operator-{MPI_OPERATOR_HEALTH_PORT}.lock"));
    lock_file(name, &path, wait, "another mpi-operator").await
}

/// Takes the lock file `path`, waiting up to `wait` for `holder` to let it go; held until the
/// returned file is dropped.
async fn lock_file(name: &str, path: &Path, wait: Duration, holder: &str) -> Result<std::fs::File> {
    let file = std::fs::File::create(path).map_err(Error::io(path))?;
    let locking = tokio::task::spawn_blocking(move || file.lock().map(|()| file));
    match tokio::time::timeout(wait, locking).await {
        Ok(Ok(Ok(file))) => Ok(file),
        Ok(Ok(Err(e))) => Err(Error::io(path)(e)),
        Ok(Err(_)) | Err(_) => Err(peer_error(
            name,
            format!("{holder} held {} for {}s", path.display(), wait.as_secs()),
        )),
    }
}

pub(crate) fn peer_error(peer: &str, message: impl Into<String>) -> Error {
    Error::Peer {
        peer: peer.to_owned(),
        message: message.into(),
    }
}

/// A new directory `$TMPDIR/kfop-peers/<name>-<namespace>-<pid>-<nanos>`.
pub(crate) fn fresh_dir(name: &str, namespace: &str) -> Result<PathBuf> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir = std::env::temp_dir()
        .join("kfop-peers")
        .join(format!("{name}-{namespace}-{}-{nanos:09}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(Error::io(&dir))?;
    Ok(dir)
}

/// Creates namespace `name` unless it exists.
pub async fn ensure_namespace(client: &Client, name: &str) -> Result<()> {
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    match Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(Error::kube(format!("creating namespace {name}"))(e)),
    }
}

/// The empty Secret the deployment manifests create (a `secretGenerator`); the rotator fills it
/// and fails at start if it is missing.
async fn ensure_secret(client: &Client, namespace: &str) -> Result<()> {
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(WEBHOOK_SECRET.to_owned()),
            ..ObjectMeta::default()
        },
        type_: Some("Opaque".to_owned()),
        ..Secret::default()
    };
    match Api::<Secret>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &secret)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(Error::kube(format!(
            "creating secret {namespace}/{WEBHOOK_SECRET}"
        ))(e)),
    }
}

/// The CA that signed the peer's serving cert.
pub(crate) struct Ca {
    pub(crate) pem: String,
    der: Vec<u8>,
}

/// Writes `tls.crt` and `tls.key` (valid for 127.0.0.1 and the in-cluster service name) into
/// `dir` and returns the CA that signed them.
pub(crate) fn write_serving_cert(dir: &Path, operator_namespace: &str) -> Result<Ca> {
    std::fs::create_dir_all(dir).map_err(Error::io(dir))?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "kfop-peer-webhook-ca");
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(vec![
        "127.0.0.1".to_owned(),
        "localhost".to_owned(),
        format!("training-operator.{operator_namespace}.svc"),
    ])?;
    params
        .distinguished_name
        .push(DnType::CommonName, "kfop-peer-webhook");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.signed_by(&key, &ca)?;
    for (file, contents) in [("tls.crt", cert.pem()), ("tls.key", key.serialize_pem())] {
        let path = dir.join(file);
        std::fs::write(&path, contents).map_err(Error::io(&path))?;
    }
    Ok(Ca {
        pem: ca.pem(),
        der: ca.der().to_vec(),
    })
}

/// The rotator only starts the controllers once `/tmp/k8s-webhook-server/serving-certs/tls.crt`
/// exists (it never reads it; `$TMPDIR` does not move it). Creates it if missing, never
/// overwrites it: several peers may share it.
fn ensure_rotator_sees_certs(peer: &str, pem: &str) -> Result<()> {
    let dir = Path::new(ROTATOR_CERT_DIR);
    let file = dir.join("tls.crt");
    if file.exists() {
        return Ok(());
    }
    std::fs::create_dir_all(dir).map_err(Error::io(dir))?;
    match std::fs::File::options().write(true).create_new(true).open(&file) {
        Ok(mut f) => f.write_all(pem.as_bytes()).map_err(Error::io(&file)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(peer_error(
            peer,
            format!("its cert rotator waits for {} to exist: {e}", file.display()),
        )),
    }
}

/// What a peer's validating and mutating webhook configurations share (the same fields on two
/// types), so that one piece of code points either at loopback.
pub(crate) trait WebhookSet:
    kube::Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
    + Clone
    + std::fmt::Debug
    + serde::Serialize
    + serde::de::DeserializeOwned
{
    /// Each webhook's client config and namespace selector.
    fn endpoints_mut(&mut self) -> Vec<(&mut WebhookClientConfig, &mut Option<LabelSelector>)>;
    /// Keeps the webhooks for which `keep(service path, API groups of its rules)` holds.
    fn retain_hooks(&mut self, keep: impl Fn(&str, &[String]) -> bool);
    /// Its webhooks' service paths.
    fn paths(&self) -> Vec<String>;
}

macro_rules! webhook_set {
    ($config:ty) => {
        impl WebhookSet for $config {
            fn endpoints_mut(&mut self) -> Vec<(&mut WebhookClientConfig, &mut Option<LabelSelector>)> {
                self.webhooks
                    .iter_mut()
                    .flatten()
                    .map(|w| (&mut w.client_config, &mut w.namespace_selector))
                    .collect()
            }

            fn retain_hooks(&mut self, keep: impl Fn(&str, &[String]) -> bool) {
                if let Some(hooks) = &mut self.webhooks {
                    hooks.retain(|w| {
                        let service = w.client_config.service.as_ref();
                        let path = service.and_then(|s| s.path.as_deref()).unwrap_or_default();
                        let groups: Vec<String> = w
                            .rules
                            .iter()
                            .flatten()
                            .flat_map(|r| r.api_groups.iter().flatten().cloned())
                            .collect();
                        keep(path, &groups)
                    });
                }
            }

            fn paths(&self) -> Vec<String> {
                self.webhooks
                    .iter()
                    .flatten()
                    .filter_map(|w| w.client_config.service.as_ref()?.path.clone())
                    .collect()
            }
        }
    };
}
webhook_set!(ValidatingWebhookConfiguration);
webhook_set!(MutatingWebhookConfiguration);

/// The module's webhook configuration, renamed (training-operator's rotator only rewrites the
/// caBundle of the one named `validator.training-operator.kubeflow.org`, and would put its CA
/// there) and pointed at the peer on loopback, for `namespace` only.
pub(crate) fn loopback_webhooks<W: WebhookSet>(
    mut config: W,
    name: &str,
    namespace: &str,
    port: u16,
    ca_pem: &str,
) -> W {
    *config.meta_mut() = ObjectMeta {
        name: Some(format!("kfop-peer-{namespace}-{name}")),
        labels: Some(BTreeMap::from([(
            "app.kubernetes.io/managed-by".to_owned(),
            "kfop-testenv".to_owned(),
        )])),
        ..ObjectMeta::default()
    };
    for (client_config, selector) in config.endpoints_mut() {
        let path = client_config
            .service
            .as_ref()
            .and_then(|s| s.path.clone())
            .unwrap_or_default();
        *client_config = WebhookClientConfig {
            url: Some(format!("https://127.0.0.1:{port}{path}")),
            ca_bundle: Some(ByteString(ca_pem.as_bytes().to_vec())),
            service: None,
        };
        *selector = Some(LabelSelector {
            match_labels: Some(BTreeMap::from([(
                "kubernetes.io/metadata.name".to_owned(),
                namespace.to_owned(),
            )])),
            ..LabelSelector::default()
        });
    }
    config
}

/// Applies a webhook configuration made by [`loopback_webhooks`]; returns its name.
pub(crate) async fn apply_webhooks<W: WebhookSet>(client: &Client, config: &W) -> Result<String> {
    let name = config.meta().name.clone().unwrap_or_default();
    Api::<W>::all(client.clone())
        .patch(
            &name,
            &PatchParams::apply("kfop-testenv").force(),
            &Patch::Apply(config),
        )
        .await
        .map_err(Error::kube(format!("applying webhook configuration {name}")))?;
    Ok(name)
}

/// `vwc` with only the webhooks of `schemes` (all when empty). A scheme's webhook path ends in
/// its name (`/validate-kubeflow-org-v1-pytorchjob`); a disabled scheme's path would answer 404,
/// and the API server would refuse every job of that kind (failurePolicy Fail).
fn enabled_webhooks(
    mut vwc: ValidatingWebhookConfiguration,
    schemes: &[String],
) -> ValidatingWebhookConfiguration {
    if schemes.is_empty() {
        return vwc;
    }
    vwc.retain_hooks(|path, _| {
        schemes
            .iter()
            .any(|s| path.ends_with(&format!("-{}", s.to_ascii_lowercase())))
    });
    vwc
}

/// The paths of the webhooks in `config`.
pub(crate) fn webhook_paths<W: WebhookSet>(config: &W) -> Vec<String> {
    config.paths()
}

/// Kueue's `integrations.frameworks` kinds: `schemes` lowercased, or [`KUEUE_KUBEFLOW_KINDS`];
/// [`KUEUE_POD_INTEGRATION`] stands for itself, the others are `kubeflow.org/<kind>`.
fn kueue_kinds(schemes: &[String]) -> Vec<String> {
    if schemes.is_empty() {
        KUEUE_KUBEFLOW_KINDS.iter().map(|k| (*k).to_owned()).collect()
    } else {
        schemes.iter().map(|s| s.to_ascii_lowercase()).collect()
    }
}

/// Kueue's configuration file (`config.kueue.x-k8s.io/v1beta2`; JSON is YAML) for one run:
/// `ports` are metrics, health and webhook, all on 127.0.0.1.
fn kueue_config(
    operator_namespace: &str,
    namespace: &str,
    kinds: &[String],
    [metrics, health, webhook]: [u16; 3],
    cert_dir: &Path,
) -> serde_json::Value {
    let frameworks: Vec<String> = kinds
        .iter()
        .map(|k| {
            if k == KUEUE_POD_INTEGRATION {
                k.clone()
            } else {
                format!("kubeflow.org/{k}")
            }
        })
        .collect();
    serde_json::json!({
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": operator_namespace,
        "health": { "healthProbeBindAddress": format!("127.0.0.1:{health}") },
        "metrics": { "bindAddress": format!("127.0.0.1:{metrics}") },
        "webhook": { "host": "127.0.0.1", "port": webhook, "certDir": cert_dir },
        "leaderElection": { "leaderElect": false },
        // Its rotator would inject its CA into conversion webhooks the base CRDs do not have,
        // and its cert names only the in-cluster Service.
        "internalCertManagement": { "enable": false },
        "manageJobsWithoutQueueName": false,
        // Other tests' jobs on the same plane are none of its business.
        "managedJobsNamespaceSelector": {
            "matchLabels": { "kubernetes.io/metadata.name": namespace },
        },
        "clientConnection": { "qps": 50, "burst": 100 },
        "integrations": { "frameworks": frameworks },
        "featureGates": { "VisibilityOnDemand": false },
    })
}

/// Merges `patch` into `base`: objects key by key (recursively), a null patch changes nothing,
/// any other value replaces what `base` has.
fn merge_json(base: &mut serde_json::Value, patch: &serde_json::Value) {
    match (base, patch) {
        (_, serde_json::Value::Null) => {}
        (serde_json::Value::Object(base), serde_json::Value::Object(patch)) => {
            for (key, value) in patch {
                merge_json(base.entry(key.clone()).or_insert(serde_json::Value::Null), value);
            }
        }
        (base, patch) => *base = patch.clone(),
    }
}

/// Whether Kueue's webhook at `path` (for `groups`) is registered: those of Kueue's own kinds and
/// of the enabled Kubeflow kinds (`/mutate-kubeflow-org-v1-pytorchjob`), and the pod webhooks when
/// the pod integration is on. The others' integrations are off and their kinds absent.
fn kueue_keeps_webhook(path: &str, groups: &[String], kinds: &[String]) -> bool {
    let has = |group: &str| groups.iter().any(|g| g == group);
    let enabled = |kind: &str| kinds.iter().any(|k| k == kind);
    has("kueue.x-k8s.io")
        || (has("kubeflow.org") && kinds.iter().any(|k| path.ends_with(&format!("-{k}"))))
        || (has("") && enabled(KUEUE_POD_INTEGRATION) && path.ends_with("--v1-pod"))
}

/// Puts `tls.crt` and `tls.key` from `from` into `to` unless it has them; a directory renamed in
/// place, so that Kueues starting together never read a mismatched pair.
fn ensure_kueue_metrics_cert(peer: &str, from: &Path, to: &Path) -> Result<()> {
    if to.join("tls.crt").is_file() && to.join("tls.key").is_file() {
        return Ok(());
    }
    let unwritable = |e: std::io::Error| {
        peer_error(
            peer,
            format!(
                "Kueue out of cluster reads its metrics certificate from {} (fixed in its \
                 cmd/kueue) and it could not be written ({e}); make it writable once: \
                 sudo mkdir -p {0} && sudo chown -R \"$USER\" {0}",
                to.display()
            ),
        )
    };
    let parent = to.parent().unwrap_or(to);
    std::fs::create_dir_all(parent).map_err(unwritable)?;
    let staging = parent.join(format!(".certs-{}", std::process::id()));
    std::fs::create_dir_all(&staging).map_err(unwritable)?;
    for file in ["tls.crt", "tls.key"] {
        std::fs::copy(from.join(file), staging.join(file)).map_err(unwritable)?;
    }
    let renamed = std::fs::rename(&staging, to);
    let _ = std::fs::remove_dir_all(&staging);
    match renamed {
        Ok(()) => Ok(()),
        // Another run got there first (or an empty directory is there: fill it).
        Err(_) if to.join("tls.crt").is_file() => Ok(()),
        Err(_) => {
            std::fs::create_dir_all(to).map_err(unwritable)?;
            for file in ["tls.key", "tls.crt"] {
                std::fs::copy(from.join(file), to.join(file)).map_err(unwritable)?;
            }
            Ok(())
        }
    }
}

/// A client for the peer's webhook server, trusting its CA as the API server does.
pub(crate) fn webhook_client(port: u16, ca: &Ca) -> Result<Client> {
    let url: http::Uri = format!("https://127.0.0.1:{port}")
        .parse()
        .map_err(|e| Error::Startup(format!("webhook URL: {e}")))?;
    let mut config = kube::Config::new(url);
    config.root_cert = Some(vec![ca.der.clone()]);
    Client::try_from(config).map_err(Error::kube("building a client for the peer's webhooks"))
}

/// Whether the webhook at `path` handles an AdmissionReview: any HTTP 200 (it may well refuse
/// the empty object); an unregistered path answers 404.
pub(crate) async fn webhook_answers(client: &Client, path: &str) -> bool {
    let review = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": { "uid": "kfop-peer-probe", "operation": "CREATE", "object": {} },
    });
    let Ok(request) = http::Request::post(path)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(review.to_string().into_bytes())
    else {
        return false;
    };
    client.request_text(request).await.is_ok()
}

/// Whether `GET path` on `addr` answers 200 (controller-runtime's probe server speaks HTTP/1).
pub(crate) fn http_ok(addr: SocketAddr, path: &str) -> bool {
    http_get(addr, path).is_some_and(|(code, _)| code == 200)
}

/// `GET path` over HTTP/1.0 on `addr` (an operator's metrics and probe server): the status code
/// and body, or none when nothing answered within a few seconds.
pub fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    let code = head
        .strip_prefix("HTTP/1.")?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some((code, body.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upstream_like() -> ValidatingWebhookConfiguration {
        serde_saphyr::from_str(
            "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\n\
             metadata:\n  name: validating-webhook-configuration\nwebhooks:\n\
             - admissionReviewVersions: [v1]\n  clientConfig:\n    service:\n      name: webhook-service\n\
             \x20     namespace: system\n      path: /validate-kubeflow-org-v1-pytorchjob\n\
             \x20 failurePolicy: Fail\n  name: validator.pytorchjob.training-operator.kubeflow.org\n\
             \x20 sideEffects: None\n",
        )
        .unwrap()
    }

    #[test]
    fn webhooks_point_at_loopback_for_one_namespace() {
        let vwc = loopback_webhooks(upstream_like(), "training-operator", "kf", 9443, "PEM");
        assert_eq!(
            vwc.metadata.name.as_deref(),
            Some("kfop-peer-kf-training-operator")
        );
        let hooks = vwc.webhooks.unwrap();
        let hook = &hooks[0];
        assert_eq!(hook.name, "validator.pytorchjob.training-operator.kubeflow.org");
        assert_eq!(
            hook.client_config.url.as_deref(),
            Some("https://127.0.0.1:9443/validate-kubeflow-org-v1-pytorchjob")
        );
        assert!(hook.client_config.service.is_none());
        assert_eq!(hook.client_config.ca_bundle.as_ref().unwrap().0, b"PEM");
        assert_eq!(
            hook.namespace_selector
                .as_ref()
                .unwrap()
                .match_labels
                .as_ref()
                .unwrap()["kubernetes.io/metadata.name"],
            "kf"
        );
        assert_eq!(hook.failure_policy.as_deref(), Some("Fail"));
    }

    #[test]
    fn only_enabled_schemes_keep_their_webhooks() {
        let all = upstream_like();
        assert_eq!(webhook_paths(&enabled_webhooks(all.clone(), &[])).len(), 1);
        let tf = enabled_webhooks(all.clone(), &["tfjob".to_owned()]);
        assert!(webhook_paths(&tf).is_empty());
        let pytorch = enabled_webhooks(all, &["PyTorchJob".to_owned()]);
        assert_eq!(webhook_paths(&pytorch), ["/validate-kubeflow-org-v1-pytorchjob"]);
    }

    #[test]
    fn the_version_is_read_from_the_cache_directory() {
        let build = PeerBuild {
            peer: TRAINING_OPERATOR_V1_9_0.to_owned(),
            bin: PathBuf::from("/c/peers/training-operator-v1.9.0/bin/training-operator"),
            dir: PathBuf::from("/c/peers/training-operator-v1.9.0"),
        };
        assert_eq!(build.name(), "training-operator");
        assert_eq!(build.version(), "v1.9.0");
    }

    #[test]
    fn kueue_keeps_its_own_webhooks_and_the_enabled_kubeflow_kinds() {
        let kinds = kueue_kinds(&["PyTorchJob".to_owned(), "mpijob".to_owned()]);
        assert_eq!(kinds, ["pytorchjob", "mpijob"]);
        let groups = |g: &str| vec![g.to_owned()];
        let keeps = |path: &str, group: &str| kueue_keeps_webhook(path, &groups(group), &kinds);
        assert!(keeps("/mutate-kubeflow-org-v1-pytorchjob", "kubeflow.org"));
        assert!(keeps("/validate-kubeflow-org-v2beta1-mpijob", "kubeflow.org"));
        assert!(keeps(
            "/validate-kueue-x-k8s-io-v1beta2-clusterqueue",
            "kueue.x-k8s.io"
        ));
        assert!(!keeps("/mutate-kubeflow-org-v1-tfjob", "kubeflow.org"));
        assert!(!keeps(
            "/mutate-trainer-kubeflow-org-v1alpha1-trainjob",
            "trainer.kubeflow.org"
        ));
        assert!(!keeps("/mutate-batch-v1-job", "batch"));
        assert!(!keeps("/mutate--v1-pod", ""));
        assert_eq!(kueue_kinds(&[]).len(), KUEUE_KUBEFLOW_KINDS.len());
    }

    #[test]
    fn kueue_s_pod_integration_keeps_the_pod_webhooks_and_is_named_bare() {
        let kinds = kueue_kinds(&[KUEUE_POD_INTEGRATION.to_owned()]);
        let keeps = |path: &str, group: &str| kueue_keeps_webhook(path, &[group.to_owned()], &kinds);
        assert!(keeps("/mutate--v1-pod", ""));
        assert!(keeps("/validate--v1-pod", ""));
        assert!(!keeps("/mutate-kubeflow-org-v1-pytorchjob", "kubeflow.org"));
        assert!(!keeps("/mutate-apps-v1-deployment", "apps"));
        let config = kueue_config("kueue-system", "kf", &kinds, [1, 2, 3], Path::new("/certs"));
        assert_eq!(config["integrations"]["frameworks"], serde_json::json!(["pod"]));
    }

    #[test]
    fn webhook_manifests_of_one_or_both_kinds_parse() {
        let dir = std::env::temp_dir().join(format!("kfop-peer-webhooks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let build = PeerBuild {
            peer: KUEUE_V0_17_0.to_owned(),
            bin: dir.join("bin/kueue"),
            dir: dir.clone(),
        };
        assert!(build.webhooks().unwrap().validating.is_none());
        let validating = serde_json::to_string(&upstream_like()).unwrap();
        let mutating = validating.replace("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration");
        std::fs::write(
            dir.join("webhooks.yaml"),
            format!("---\n{mutating}\n---\n{validating}\n"),
        )
        .unwrap();
        let both = build.webhooks().unwrap();
        assert_eq!(
            webhook_paths(&both.mutating.unwrap()),
            ["/validate-kubeflow-org-v1-pytorchjob"]
        );
        assert_eq!(
            webhook_paths(&both.validating.unwrap()),
            ["/validate-kubeflow-org-v1-pytorchjob"]
        );
        std::fs::write(dir.join("webhooks.yaml"), validating).unwrap();
        let one = build.webhooks().unwrap();
        assert!(one.mutating.is_none() && one.validating.is_some());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn kueue_config_runs_it_out_of_cluster_for_one_namespace() {
        let kinds = kueue_kinds(&[]);
        let config = kueue_config("kueue-system", "kf", &kinds, [1, 2, 3], Path::new("/certs"));
        assert_eq!(config["internalCertManagement"]["enable"], false);
        assert_eq!(
            config["webhook"],
            serde_json::json!({ "host": "127.0.0.1", "port": 3, "certDir": "/certs" })
        );
        assert_eq!(config["health"]["healthProbeBindAddress"], "127.0.0.1:2");
        assert_eq!(config["metrics"]["bindAddress"], "127.0.0.1:1");
        assert_eq!(
            config["managedJobsNamespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
            "kf"
        );
        let frameworks = config["integrations"]["frameworks"].as_array().unwrap();
        assert!(frameworks.contains(&serde_json::json!("kubeflow.org/mpijob")));
        assert_eq!(frameworks.len(), KUEUE_KUBEFLOW_KINDS.len());
    }

    #[test]
    fn kueue_config_takes_a_multikueue_section_and_keeps_the_rest() {
        let kinds = kueue_kinds(&[]);
        let mut config = kueue_config("kueue-system", "kf", &kinds, [1, 2, 3], Path::new("/certs"));
        let before = config.clone();
        merge_json(&mut config, &serde_json::Value::Null);
        assert_eq!(config, before);
        let patch = serde_json::json!({
            "multiKueue": { "workerLostTimeout": "30s" },
            "webhook": { "port": 4 },
        });
        merge_json(&mut config, &patch);
        assert_eq!(config["multiKueue"]["workerLostTimeout"], "30s");
        assert_eq!(config["webhook"]["port"], 4);
        assert_eq!(config["webhook"]["host"], "127.0.0.1");
        assert_eq!(config["integrations"], before["integrations"]);
    }

    #[test]
    fn kueue_metrics_cert_is_copied_once() {
        let root = std::env::temp_dir().join(format!("kfop-kueue-metrics-{}", std::process::id()));
        let from = root.join("serving");
        write_serving_cert(&from, "kueue-system").unwrap();
        let to = root.join("etc/kueue/metrics/certs");
        ensure_kueue_metrics_cert("kueue", &from, &to).unwrap();
        let first = std::fs::read(to.join("tls.crt")).unwrap();
        assert_eq!(first, std::fs::read(from.join("tls.crt")).unwrap());
        assert!(to.join("tls.key").is_file());
        // A second run (another CA) keeps the pair it finds.
        write_serving_cert(&from, "kueue-system").unwrap();
        ensure_kueue_metrics_cert("kueue", &from, &to).unwrap();
        assert_eq!(std::fs::read(to.join("tls.crt")).unwrap(), first);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn serving_cert_is_written_with_its_key() {
        let dir = std::env::temp_dir().join(format!("kfop-peer-cert-{}", std::process::id()));
        let ca = write_serving_cert(&dir, "kubeflow").unwrap();
        assert!(ca.pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(!ca.der.is_empty());
        assert!(
            std::fs::read_to_string(dir.join("tls.crt"))
                .unwrap()
                .contains("BEGIN CERTIFICATE")
        );
        assert!(
            std::fs::read_to_string(dir.join("tls.key"))
                .unwrap()
                .contains("PRIVATE KEY")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
