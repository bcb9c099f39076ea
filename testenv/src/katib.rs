//! Katib (github.com/kubeflow/katib v0.19.0) on the local plane: its controller, db-manager and
//! goptuna suggestion service built from Katib's Go module (`testenv/peers/katib-v0.19.0/`), a
//! PostgreSQL database started from the machine's PostgreSQL binaries, and Katib's webhooks
//! registered with URLs on loopback. It runs Experiments whose Trials are jobs of another
//! operator (kfop's), exactly as in a cluster, with two stand-ins:
//!
//! * the kubelet of the suggestion Deployments: in a cluster the controller reaches each
//!   Experiment's suggestion service at `<experiment>-<algorithm>.<namespace>:6789`, a Service in
//!   front of the Deployment it creates. Here the controller runs with `HTTPS_PROXY` naming a
//!   small CONNECT proxy of ours ([`SuggestionPlayer`]), which starts Katib's goptuna binary for
//!   the Service the controller asks for and forwards the connection to it. goptuna listens on
//!   the fixed `0.0.0.0:6789` and keeps one study per process, so one runs at a time: the proxy
//!   replaces it when another Experiment's Service is asked for (Experiments run one at a time).
//! * the trainer, which a test plays: it reports metrics through the db-manager's gRPC
//!   `ReportObservationLog` ([`Katib::report_metrics`]) as Katib's Python SDK `report_metrics`
//!   does from inside a training container (the push collector).
//!
//! Two paths are fixed by Katib and shared by the machine, so one Katib runs per machine at a
//! time (tests take turns through `$TMPDIR/kfop-katib.lock`): the webhook server's certificate
//! directory [`KATIB_CERT_DIR`] and the goptuna port [`SUGGESTION_PORT`].
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::peer::{
    Ca, PeerBuild, apply_webhooks, ensure_namespace, fresh_dir, http_ok, loopback_webhooks, peer_error,
    webhook_answers, webhook_client, webhook_paths, write_serving_cert,
};
use crate::ports::{free_ports, retry_if_port_taken};
use crate::process::{self, Component, Lifetime, log_tail, stop_pid};
use crate::{Error, Result, kubeconfig};

/// The folder under `testenv/peers/` that builds Katib v0.19.0's three binaries.
pub const KATIB_V0_19_0: &str = "katib-v0.19.0";
/// The db-manager binary `build.sh` builds next to the controller (`also` in `peer.env`).
const DB_MANAGER_BINARY: &str = "katib-db-manager";
/// The goptuna suggestion service (random, TPE, CMA-ES, Sobol), built next to the controller.
const SUGGESTION_BINARY: &str = "katib-suggestion-goptuna";
/// The port of every Katib suggestion service: a constant of Katib's (`DefaultSuggestionPort`),
/// and goptuna's listen address is the constant `0.0.0.0:6789`.
pub const SUGGESTION_PORT: u16 = 6789;
/// Where Katib's webhook server reads `tls.crt` and `tls.key`: the constant `consts.CertDir`.
pub const KATIB_CERT_DIR: &str = "/tmp/cert";
/// The algorithms the goptuna service serves; each gets a `runtime.suggestions` entry.
pub const GOPTUNA_ALGORITHMS: [&str; 4] = ["random", "tpe", "cmaes", "sobol"];
/// The label Katib's pod webhook puts on every pod of a Trial's job (the Trial's name), which
/// the `KATIB_TRIAL_NAME` environment variable of the primary container refers to.
pub const TRIAL_LABEL: &str = "katib.kubeflow.org/trial";
/// The namespace label Katib's Experiment validation requires (its pod webhook's selector).
pub const INJECTION_LABEL: &str = "katib.kubeflow.org/metrics-collector-injection";
/// The environment variable Katib's pod webhook adds to the primary container.
pub const TRIAL_NAME_ENV: &str = "KATIB_TRIAL_NAME";
/// The PostgreSQL role and database the db-manager uses.
const DB_USER: &str = "katib";
const DB_DATABASE: &str = "postgres";
/// What PostgreSQL logs once it accepts connections.
const POSTGRES_READY_LINE: &str = "database system is ready to accept connections";
/// What the db-manager logs once its gRPC server listens.
const DB_MANAGER_READY_LINE: &str = "Start Katib manager";
/// The machine account PostgreSQL runs as when the tests run as root (it refuses root).
const POSTGRES_ACCOUNT: &str = "postgres";
/// How long a Katib waits for another test's to stop.
const LOCK_WAIT: Duration = Duration::from_secs(20 * 60);

/// How to run Katib.
#[derive(Debug, Clone)]
pub struct KatibOptions {
    /// `init.controller.trialResources`: the kinds Trials may run, `Kind.version.group`
    /// (`PyTorchJob.v1.kubeflow.org`). Their CRDs must be served before Katib starts: the
    /// controller watches each kind it finds once, at start.
    pub trial_resources: Vec<String>,
    /// `$KATIB_CORE_NAMESPACE`, where the `katib-config` ConfigMap goes (created if missing).
    pub katib_namespace: String,
    /// How long to wait for each component.
    pub start_timeout: Duration,
}

impl Default for KatibOptions {
    fn default() -> Self {
        Self {
            trial_resources: vec![
                "PyTorchJob.v1.kubeflow.org".to_owned(),
                "TFJob.v1.kubeflow.org".to_owned(),
            ],
            katib_namespace: "kubeflow".to_owned(),
            start_timeout: crate::wait::default_timeout(),
        }
    }
}

/// A running Katib watching one namespace's Experiments (its webhooks cover that namespace
/// only; its controllers see every namespace). Dropping it stops every process, deletes its
/// webhook configurations and removes its directory (kept, with the logs, when the thread is
/// panicking: a failed test).
#[derive(Debug)]
pub struct Katib {
    dir: PathBuf,
    kubeconfig: PathBuf,
    controller: Component,
    db_manager: Component,
    postgres: Component,
    suggestions: SuggestionPlayer,
    db_manager_port: u16,
    health_port: u16,
    webhook_port: u16,
    mutating: Option<String>,
    validating: Option<String>,
    _lock: std::fs::File,
}

impl Katib {
    /// Builds (or reuses) Katib, installs its CRDs, starts PostgreSQL, the db-manager, the
    /// suggestion proxy and the controller, and registers its webhooks (Experiment defaulting and
    /// validation, the pod mutation that labels a Trial's pods) for `namespace`. Returns once the
    /// controller's `/readyz` answers and every webhook answers.
    pub async fn start(kubeconfig: &Path, namespace: &str, options: KatibOptions) -> Result<Self> {
        retry_if_port_taken("katib", || {
            Self::start_once(kubeconfig, namespace, options.clone())
        })
        .await
    }

    async fn start_once(kubeconfig: &Path, namespace: &str, options: KatibOptions) -> Result<Self> {
        let started = Instant::now();
        let build = tokio::task::spawn_blocking(|| PeerBuild::locate_or_build(KATIB_V0_19_0))
            .await
            .map_err(|e| peer_error(KATIB_V0_19_0, format!("build task: {e}")))??;
        let bin_dir = build.bin.parent().map(Path::to_owned).unwrap_or_default();
        let client = kubeconfig::client_from(kubeconfig).await?;
        crate::install_crds(&client, build.crds()?).await?;
        ensure_namespace(&client, namespace).await?;
        ensure_namespace(&client, &options.katib_namespace).await?;
        // Katib's Experiment validation refuses a namespace without the label its pod webhook's
        // selector (in Katib's manifests) matches.
        Api::<Namespace>::all(client.clone())
            .patch(
                namespace,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"metadata": {"labels": {INJECTION_LABEL: "enabled"}}})),
            )
            .await
            .map_err(Error::kube(format!("labelling namespace {namespace}")))?;
        let lock = machine_lock(options.start_timeout.max(LOCK_WAIT)).await?;

        let dir = fresh_dir("katib", namespace)?;
        let logs = dir.join("logs");
        std::fs::create_dir_all(&logs).map_err(Error::io(&logs))?;
        let [pg_port, db_manager_port, metrics_port, health_port, webhook_port]: [u16; 5] = free_ports(5)?
            .try_into()
            .map_err(|_| katib_error("could not reserve 5 ports"))?;

        let deadline = Instant::now() + options.start_timeout;
        let mut postgres = start_postgres(&dir, &logs, pg_port).await?;
        wait_log_line(&mut postgres, POSTGRES_READY_LINE, deadline).await?;

        let db_manager_args = vec![
            "DB_NAME=postgres".to_owned(),
            format!("DB_USER={DB_USER}"),
            // Never checked (trust authentication), but not empty: the db-manager joins
            // `password=%s dbname=%s`, and an empty password would swallow the database name.
            format!("DB_PASSWORD={DB_USER}"),
            "KATIB_POSTGRESQL_DB_HOST=127.0.0.1".to_owned(),
            format!("KATIB_POSTGRESQL_DB_PORT={pg_port}"),
            format!("KATIB_POSTGRESQL_DB_DATABASE={DB_DATABASE}"),
            bin_dir.join(DB_MANAGER_BINARY).display().to_string(),
            format!("--listen-address=127.0.0.1:{db_manager_port}"),
        ];
        let mut db_manager = process::spawn(
            DB_MANAGER_BINARY,
            Path::new("env"),
            &db_manager_args,
            &logs,
            Lifetime::DieWithParent,
        )?;
        wait_log_line(&mut db_manager, DB_MANAGER_READY_LINE, deadline).await?;

        let suggestions = SuggestionPlayer::start(bin_dir.join(SUGGESTION_BINARY), logs.clone()).await?;

        // The webhook server reads its cert from a fixed directory; ours is valid for 127.0.0.1.
        let ca = write_serving_cert(Path::new(KATIB_CERT_DIR), &options.katib_namespace)?;
        let config = katib_config(
            &options.trial_resources,
            [metrics_port, health_port, webhook_port],
        );
        let config_text = config.to_string();
        let config_file = dir.join("katib-config.json");
        std::fs::write(&config_file, &config_text).map_err(Error::io(&config_file))?;
        apply_config_map(&client, &options.katib_namespace, &config_text).await?;

        let controller_args = vec![
            format!("KUBECONFIG={}", kubeconfig.display()),
            format!("KATIB_CORE_NAMESPACE={}", options.katib_namespace),
            // The db-manager's address is `<IP>.<namespace>:<port>`, or `<IP>:<port>` with an
            // empty namespace.
            "KATIB_DB_MANAGER_SERVICE_NAMESPACE=".to_owned(),
            "KATIB_DB_MANAGER_SERVICE_IP=127.0.0.1".to_owned(),
            format!("KATIB_DB_MANAGER_SERVICE_PORT={db_manager_port}"),
            // Suggestion Services are reached through the player; loopback (the API server,
            // the db-manager) never goes through a proxy.
            format!("HTTPS_PROXY=http://127.0.0.1:{}", suggestions.port),
            "NO_PROXY=127.0.0.1,localhost".to_owned(),
            build.bin.display().to_string(),
            format!("--katib-config={}", config_file.display()),
        ];
        let controller = process::spawn(
            "katib-controller",
            Path::new("env"),
            &controller_args,
            &logs,
            Lifetime::DieWithParent,
        )?;
        let mut katib = Self {
            dir,
            kubeconfig: kubeconfig.to_owned(),
            controller,
            db_manager,
            postgres,
            suggestions,
            db_manager_port,
            health_port,
            webhook_port,
            mutating: None,
            validating: None,
            _lock: lock,
        };

        let manifests = build.webhooks()?;
        let mut paths = Vec::new();
        if let Some(mwc) = manifests.mutating {
            let mwc: MutatingWebhookConfiguration =
                loopback_webhooks(mwc, "katib-controller", namespace, webhook_port, &ca.pem);
            paths.extend(webhook_paths(&mwc));
            katib.mutating = Some(apply_webhooks(&client, &mwc).await?);
        }
        if let Some(vwc) = manifests.validating {
            let vwc: ValidatingWebhookConfiguration =
                loopback_webhooks(vwc, "katib-controller", namespace, webhook_port, &ca.pem);
            paths.extend(webhook_paths(&vwc));
            katib.validating = Some(apply_webhooks(&client, &vwc).await?);
        }
        katib.wait_ready(&ca, &paths, deadline, started).await?;
        Ok(katib)
    }

    async fn wait_ready(
        &mut self,
        ca: &Ca,
        paths: &[String],
        deadline: Instant,
        started: Instant,
    ) -> Result<()> {
        let readyz = SocketAddr::from(([127, 0, 0, 1], self.health_port));
        while !http_ok(readyz, "/readyz") {
            self.check_alive()?;
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: format!(
                        "katib-controller /readyz on {readyz}; last log lines:\n{}",
                        log_tail(&self.controller.log, 20)
                    ),
                    seconds: started.elapsed().as_secs(),
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let probe = webhook_client(self.webhook_port, ca)?;
        for path in paths {
            while !webhook_answers(&probe, path).await {
                self.check_alive()?;
                if Instant::now() >= deadline {
                    return Err(Error::Timeout {
                        what: format!("katib-controller to serve webhook {path}"),
                        seconds: started.elapsed().as_secs(),
                    });
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        tracing::info!(elapsed_ms = started.elapsed().as_millis(), "katib ready");
        Ok(())
    }

    /// `127.0.0.1:<port>` of the db-manager's gRPC server.
    pub fn db_manager_addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.db_manager_port))
    }

    /// Reports `metrics` (name, value) of `trial` at the current time through the db-manager's
    /// gRPC `ReportObservationLog`, as Katib's Python SDK `report_metrics` does from a training
    /// container (the push collector).
    pub async fn report_metrics(&self, trial: &str, metrics: &[(&str, f64)]) -> Result<()> {
        report_observation_log(self.db_manager_addr(), trial, metrics).await
    }

    /// The controller's log.
    pub fn controller_log(&self) -> &Path {
        &self.controller.log
    }

    /// The last `lines` of the controller's log.
    pub fn controller_log_tail(&self, lines: usize) -> String {
        log_tail(&self.controller.log, lines)
    }

    /// The suggestion Services the player has served, in order (`<experiment>-<algorithm>.<ns>`).
    pub fn suggestion_services(&self) -> Vec<String> {
        self.suggestions
            .served
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default()
    }

    /// Fails with the log tail of the first process that has exited.
    pub fn check_alive(&mut self) -> Result<()> {
        self.controller.check_alive()?;
        self.db_manager.check_alive()?;
        self.postgres.check_alive()
    }
}

impl Drop for Katib {
    fn drop(&mut self) {
        stop_pid(self.controller.child.id(), Duration::from_secs(5));
        let _ = self.controller.child.wait();
        self.suggestions.stop();
        stop_pid(self.db_manager.child.id(), Duration::from_secs(5));
        let _ = self.db_manager.child.wait();
        stop_pid(self.postgres.child.id(), Duration::from_secs(10));
        let _ = self.postgres.child.wait();
        // Left behind, they would fail every Experiment write and pod creation in the namespace.
        crate::peer::delete_webhook_configs(&self.kubeconfig, self.mutating.take(), self.validating.take());
        if std::thread::panicking() {
            eprintln!("kept Katib's logs in {}", self.dir.join("logs").display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn katib_error(message: impl Into<String>) -> Error {
    peer_error(KATIB_V0_19_0, message)
}

/// This machine's lock on Katib's fixed paths ([`KATIB_CERT_DIR`], [`SUGGESTION_PORT`]).
async fn machine_lock(wait: Duration) -> Result<std::fs::File> {
    let path = std::env::temp_dir().join("kfop-katib.lock");
    let file = std::fs::File::create(&path).map_err(Error::io(&path))?;
    let locking = tokio::task::spawn_blocking(move || file.lock().map(|()| file));
    match tokio::time::timeout(wait, locking).await {
        Ok(Ok(Ok(file))) => Ok(file),
        Ok(Ok(Err(e))) => Err(Error::io(&path)(e)),
        Ok(Err(_)) | Err(_) => Err(katib_error(format!(
            "another Katib held {} for {}s",
            path.display(),
            wait.as_secs()
        ))),
    }
}

/// The `katib-config` of a Katib run out of cluster: probes, metrics and webhook on loopback
/// ports, Katib's own cert generator off (it would write a cert for the in-cluster Service),
/// no gRPC probe in suggestion Deployments (no kubelet probes them here), and every goptuna
/// algorithm. The images name what a cluster would run; kwok runs no image.
fn katib_config(trial_resources: &[String], [metrics, health, webhook]: [u16; 3]) -> serde_json::Value {
    let image = |name: &str| format!("ghcr.io/kubeflow/katib/{name}:v0.19.0");
    let suggestions: Vec<serde_json::Value> = GOPTUNA_ALGORITHMS
        .iter()
        .map(|algorithm| {
            serde_json::json!({
                "algorithmName": algorithm,
                "image": image("suggestion-goptuna"),
            })
        })
        .collect();
    serde_json::json!({
        "apiVersion": "config.kubeflow.org/v1beta1",
        "kind": "KatibConfig",
        "init": {
            "certGenerator": { "enable": false },
            "controller": {
                "webhookPort": webhook,
                "metricsAddr": format!("127.0.0.1:{metrics}"),
                "healthzAddr": format!("127.0.0.1:{health}"),
                "enableGRPCProbeInSuggestion": false,
                "trialResources": trial_resources,
            },
        },
        "runtime": {
            "metricsCollectors": [
                { "kind": "StdOut", "image": image("file-metrics-collector") },
                { "kind": "File", "image": image("file-metrics-collector") },
            ],
            "suggestions": suggestions,
        },
    })
}

/// The `katib-config` ConfigMap, which the controller reads at run time (suggestion and
/// collector settings), with the same text as its `--katib-config` file.
async fn apply_config_map(client: &Client, namespace: &str, text: &str) -> Result<()> {
    let config_map = ConfigMap {
        metadata: ObjectMeta {
            name: Some("katib-config".to_owned()),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            "katib-config.yaml".to_owned(),
            text.to_owned(),
        )])),
        ..ConfigMap::default()
    };
    Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .patch(
            "katib-config",
            &PatchParams::apply("kfop-testenv").force(),
            &Patch::Apply(&config_map),
        )
        .await
        .map_err(Error::kube(format!("applying {namespace}/katib-config")))?;
    Ok(())
}

/// Waits until the component's log holds `line`, failing early if it exits.
async fn wait_log_line(component: &mut Component, line: &str, deadline: Instant) -> Result<()> {
    let started = Instant::now();
    while !std::fs::read_to_string(&component.log)
        .unwrap_or_default()
        .contains(line)
    {
        component.check_alive()?;
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: format!(
                    "{} to log {line:?}; last log lines from {}:\n{}",
                    component.name,
                    component.log.display(),
                    log_tail(&component.log, 20)
                ),
                seconds: started.elapsed().as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// The directory holding PostgreSQL's `initdb` and `postgres`: `$KFOP_POSTGRES_BIN`, else the
/// newest `/usr/lib/postgresql/<major>/bin` (Debian's `postgresql` package), else `$PATH`.
pub fn postgres_bin_dir() -> Result<PathBuf> {
    let has_both = |dir: &Path| dir.join("initdb").is_file() && dir.join("postgres").is_file();
    if let Some(dir) = std::env::var_os("KFOP_POSTGRES_BIN").map(PathBuf::from) {
        return if has_both(&dir) {
            Ok(dir)
        } else {
            Err(katib_error(format!(
                "KFOP_POSTGRES_BIN={} holds no initdb and postgres",
                dir.display()
            )))
        };
    }
    let debian = Path::new("/usr/lib/postgresql");
    let mut majors: Vec<(u32, PathBuf)> = std::fs::read_dir(debian)
        .into_iter()
        .flatten()
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let major = entry.file_name().to_str()?.parse().ok()?;
            Some((major, entry.path().join("bin")))
        })
        .filter(|(_, dir)| has_both(dir))
        .collect();
    majors.sort();
    if let Some((_, dir)) = majors.pop() {
        return Ok(dir);
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .find(|dir| has_both(dir))
        .ok_or_else(|| {
            katib_error(
                "PostgreSQL is not installed (no initdb and postgres in /usr/lib/postgresql/*/bin \
                 or $PATH); install it (Debian: apt-get install postgresql) or set KFOP_POSTGRES_BIN",
            )
        })
}

/// Runs as the machine's `postgres` account when this process is root (PostgreSQL refuses to
/// run as root): `setpriv` switches account and keeps the parent-death signal.
fn as_postgres_account(program: &Path, args: &[String]) -> (PathBuf, Vec<String>) {
    if nix::unistd::geteuid().is_root() {
        let mut argv = vec![
            format!("--reuid={POSTGRES_ACCOUNT}"),
            format!("--regid={POSTGRES_ACCOUNT}"),
            "--init-groups".to_owned(),
            "--pdeathsig=keep".to_owned(),
            "--".to_owned(),
            program.display().to_string(),
        ];
        argv.extend(args.iter().cloned());
        (PathBuf::from("setpriv"), argv)
    } else {
        (program.to_owned(), args.to_vec())
    }
}

/// A fresh PostgreSQL cluster in `<dir>/postgres` (role [`DB_USER`], trust authentication, no
/// fsync: a test database), serving on `127.0.0.1:<port>` and a socket in its own directory.
async fn start_postgres(dir: &Path, logs: &Path, port: u16) -> Result<Component> {
    let bin = postgres_bin_dir()?;
    let pg_dir = dir.join("postgres");
    let data = pg_dir.join("data");
    std::fs::create_dir_all(&pg_dir).map_err(Error::io(&pg_dir))?;
    if nix::unistd::geteuid().is_root() {
        let status = Command::new("chown")
            .arg("-R")
            .arg(format!("{POSTGRES_ACCOUNT}:"))
            .arg(&pg_dir)
            .status()
            .map_err(|source| Error::Spawn {
                component: "chown".to_owned(),
                source,
            })?;
        if !status.success() {
            return Err(katib_error(format!(
                "chown {POSTGRES_ACCOUNT}: {} failed ({status}); PostgreSQL refuses to run as root \
                 and needs the machine account `{POSTGRES_ACCOUNT}`",
                pg_dir.display()
            )));
        }
    }
    let initdb_args = vec![
        "-D".to_owned(),
        data.display().to_string(),
        "-U".to_owned(),
        DB_USER.to_owned(),
        "--auth=trust".to_owned(),
        "--encoding=UTF8".to_owned(),
        "--no-sync".to_owned(),
    ];
    let (program, args) = as_postgres_account(&bin.join("initdb"), &initdb_args);
    let initdb_log = logs.join("initdb.log");
    let output = tokio::task::spawn_blocking(move || {
        Command::new(&program)
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .map_err(|source| Error::Spawn {
                component: program.display().to_string(),
                source,
            })
    })
    .await
    .map_err(|e| katib_error(format!("initdb task: {e}")))??;
    let mut text = output.stdout.clone();
    text.extend_from_slice(&output.stderr);
    std::fs::write(&initdb_log, &text).map_err(Error::io(&initdb_log))?;
    if !output.status.success() {
        return Err(katib_error(format!(
            "initdb failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    let postgres_args = vec![
        "-D".to_owned(),
        data.display().to_string(),
        "-p".to_owned(),
        port.to_string(),
        "-c".to_owned(),
        "listen_addresses=127.0.0.1".to_owned(),
        "-c".to_owned(),
        format!("unix_socket_directories={}", pg_dir.display()),
        "-c".to_owned(),
        "fsync=off".to_owned(),
    ];
    let (program, args) = as_postgres_account(&bin.join("postgres"), &postgres_args);
    process::spawn("postgres", &program, &args, logs, Lifetime::DieWithParent)
}

/// Plays the kubelet of Katib's suggestion Deployments: an HTTP CONNECT proxy (the
/// controller's `HTTPS_PROXY`) that runs Katib's goptuna binary for the suggestion Service the
/// controller connects to (`<experiment>-<algorithm>.<namespace>:6789`) and forwards the
/// connection to it. One goptuna runs at a time (its port is fixed); a connection for another
/// Service replaces it, as a new Experiment's Deployment would start a new pod.
#[derive(Debug)]
struct SuggestionPlayer {
    port: u16,
    task: tokio::task::JoinHandle<()>,
    current: Arc<Mutex<Option<(String, Component)>>>,
    served: Arc<Mutex<Vec<String>>>,
}

impl SuggestionPlayer {
    async fn start(bin: PathBuf, logs: PathBuf) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(Error::io("127.0.0.1:0"))?;
        let port = listener.local_addr().map_err(Error::io("127.0.0.1:0"))?.port();
        let current: Arc<Mutex<Option<(String, Component)>>> = Arc::new(Mutex::new(None));
        let served = Arc::new(Mutex::new(Vec::new()));
        let shared = Arc::new(Proxy {
            bin,
            logs,
            current: current.clone(),
            served: served.clone(),
            switching: tokio::sync::Mutex::new(()),
        });
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let proxy = shared.clone();
                tokio::spawn(async move {
                    if let Err(e) = proxy.serve(stream).await {
                        tracing::debug!(error = %e, "suggestion proxy connection");
                    }
                });
            }
        });
        Ok(Self {
            port,
            task,
            current,
            served,
        })
    }

    fn stop(&mut self) {
        self.task.abort();
        if let Ok(mut current) = self.current.lock()
            && let Some((_, mut goptuna)) = current.take()
        {
            stop_pid(goptuna.child.id(), Duration::from_secs(5));
            let _ = goptuna.child.wait();
        }
    }
}

#[derive(Debug)]
struct Proxy {
    bin: PathBuf,
    logs: PathBuf,
    current: Arc<Mutex<Option<(String, Component)>>>,
    served: Arc<Mutex<Vec<String>>>,
    /// One switch of goptuna at a time.
    switching: tokio::sync::Mutex<()>,
}

impl Proxy {
    async fn serve(&self, mut stream: TcpStream) -> std::io::Result<()> {
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut buf).await?;
            if n == 0 || head.len() > 16 * 1024 {
                return Ok(());
            }
            head.extend_from_slice(&buf[..n]);
        }
        let text = String::from_utf8_lossy(&head);
        let target = text
            .lines()
            .next()
            .and_then(|line| line.strip_prefix("CONNECT "))
            .and_then(|rest| rest.split_whitespace().next())
            .map(str::to_owned);
        let Some((host, port)) = target.as_deref().and_then(|t| t.rsplit_once(':')) else {
            stream.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await?;
            return Ok(());
        };
        if port != SUGGESTION_PORT.to_string() {
            stream.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n").await?;
            return Ok(());
        }
        if let Err(e) = self.ensure_serving(host).await {
            tracing::warn!(service = host, error = %e, "suggestion service did not start");
            stream
                .write_all(b"HTTP/1.1 503 Service Unavailable\r\n\r\n")
                .await?;
            return Ok(());
        }
        let mut upstream = TcpStream::connect(("127.0.0.1", SUGGESTION_PORT)).await?;
        stream
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await?;
        tokio::io::copy_bidirectional(&mut stream, &mut upstream).await?;
        Ok(())
    }

    /// Makes goptuna serve `service`, starting (or replacing) it if another one runs.
    async fn ensure_serving(&self, service: &str) -> Result<()> {
        let _switch = self.switching.lock().await;
        let running = self
            .current
            .lock()
            .map_err(|_| katib_error("suggestion player lock poisoned"))?
            .as_ref()
            .is_some_and(|(s, _)| s == service);
        if running {
            return Ok(());
        }
        let previous = self
            .current
            .lock()
            .map_err(|_| katib_error("suggestion player lock poisoned"))?
            .take();
        if let Some((_, mut goptuna)) = previous {
            stop_pid(goptuna.child.id(), Duration::from_secs(5));
            let _ = goptuna.child.wait();
        }
        let addr = SocketAddr::from(([127, 0, 0, 1], SUGGESTION_PORT));
        // The port may still be held by a goptuna of an earlier run that is exiting.
        let freed = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(addr).await.is_ok() && Instant::now() < freed {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let name = format!(
            "{SUGGESTION_BINARY}-{}",
            service.split('.').next().unwrap_or(service)
        );
        // Spawned from the runtime's thread, not a blocking-pool one: the parent-death signal
        // follows the thread that spawned it.
        let mut goptuna = process::spawn(&name, &self.bin, &[], &self.logs, Lifetime::DieWithParent)?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(addr).await.is_err() {
            goptuna.check_alive()?;
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: format!("{name} to listen on {addr}"),
                    seconds: 30,
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tracing::info!(service, "suggestion service started");
        if let Ok(mut served) = self.served.lock() {
            served.push(service.to_owned());
        }
        *self
            .current
            .lock()
            .map_err(|_| katib_error("suggestion player lock poisoned"))? =
            Some((service.to_owned(), goptuna));
        Ok(())
    }
}

/// Katib's `api.v1.beta1` messages for `ReportObservationLog` (pkg/apis/manager/v1beta1/api.proto).
mod proto {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Metric {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(string, tag = "2")]
        pub value: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct MetricLog {
        /// RFC 3339.
        #[prost(string, tag = "1")]
        pub time_stamp: String,
        #[prost(message, optional, tag = "2")]
        pub metric: Option<Metric>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ObservationLog {
        #[prost(message, repeated, tag = "1")]
        pub metric_logs: Vec<MetricLog>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ReportObservationLogRequest {
        #[prost(string, tag = "1")]
        pub trial_name: String,
        #[prost(message, optional, tag = "2")]
        pub observation_log: Option<ObservationLog>,
    }
}

/// The gRPC method the Python SDK's `report_metrics` calls.
const REPORT_OBSERVATION_LOG: &str = "/api.v1.beta1.DBManager/ReportObservationLog";

/// One unary gRPC call of `ReportObservationLog` over HTTP/2 (cleartext, as the db-manager
/// serves it): the metrics, each stamped with the current time.
pub async fn report_observation_log(addr: SocketAddr, trial: &str, metrics: &[(&str, f64)]) -> Result<()> {
    use prost::Message;
    let what = || format!("ReportObservationLog of trial {trial} to {addr}");
    let fail = |message: String| katib_error(format!("{}: {message}", what()));
    let now = rfc3339_now();
    let request = proto::ReportObservationLogRequest {
        trial_name: trial.to_owned(),
        observation_log: Some(proto::ObservationLog {
            metric_logs: metrics
                .iter()
                .map(|(name, value)| proto::MetricLog {
                    time_stamp: now.clone(),
                    metric: Some(proto::Metric {
                        name: (*name).to_owned(),
                        value: value.to_string(),
                    }),
                })
                .collect(),
        }),
    };
    let message = request.encode_to_vec();
    let length = u32::try_from(message.len()).map_err(|e| fail(e.to_string()))?;
    // A gRPC frame: no compression, the length, the message.
    let mut frame = Vec::with_capacity(message.len() + 5);
    frame.push(0);
    frame.extend_from_slice(&length.to_be_bytes());
    frame.extend_from_slice(&message);

    let tcp = TcpStream::connect(addr).await.map_err(|e| fail(e.to_string()))?;
    let (client, connection) = h2::client::handshake(tcp)
        .await
        .map_err(|e| fail(e.to_string()))?;
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    let result = async {
        let mut client = client.ready().await.map_err(|e| fail(e.to_string()))?;
        let request = http::Request::post(format!("http://{addr}{REPORT_OBSERVATION_LOG}"))
            .header(http::header::CONTENT_TYPE, "application/grpc")
            .header("te", "trailers")
            .body(())
            .map_err(|e| fail(e.to_string()))?;
        let (response, mut send) = client
            .send_request(request, false)
            .map_err(|e| fail(e.to_string()))?;
        send.send_data(Bytes::from(frame), true)
            .map_err(|e| fail(e.to_string()))?;
        let response = response.await.map_err(|e| fail(e.to_string()))?;
        if response.status() != http::StatusCode::OK {
            return Err(fail(format!("HTTP {}", response.status())));
        }
        let grpc_status = |headers: &http::HeaderMap| {
            headers.get("grpc-status").and_then(|v| v.to_str().ok()).map(|s| {
                (
                    s.to_owned(),
                    headers
                        .get("grpc-message")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned(),
                )
            })
        };
        // A failure without a body comes in the headers ("trailers-only").
        let mut status = grpc_status(response.headers());
        let mut body = response.into_body();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.map_err(|e| fail(e.to_string()))?;
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        if status.is_none() {
            let trailers = body.trailers().await.map_err(|e| fail(e.to_string()))?;
            status = trailers.as_ref().and_then(grpc_status);
        }
        match status {
            Some((code, _)) if code == "0" => Ok(()),
            Some((code, message)) => Err(fail(format!("gRPC status {code}: {message}"))),
            None => Err(fail("no gRPC status".to_owned())),
        }
    }
    .await;
    driver.abort();
    result
}

/// The current UTC time in RFC 3339 with nanoseconds (Go's `time.RFC3339Nano`, which the
/// db-manager parses).
fn rfc3339_now() -> String {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    rfc3339(now.as_secs(), now.subsec_nanos())
}

fn rfc3339(secs: u64, nanos: u32) -> String {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{nanos:09}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(rfc3339(951_782_400, 5), "2000-02-29T00:00:00.000000005Z");
        assert_eq!(rfc3339(1_796_601_599, 0), "2026-12-06T23:59:59.000000000Z");
    }

    #[test]
    fn config_runs_katib_on_loopback_with_the_given_kinds() {
        let kinds = vec!["PyTorchJob.v1.kubeflow.org".to_owned()];
        let config = katib_config(&kinds, [1, 2, 3]);
        let controller = &config["init"]["controller"];
        assert_eq!(controller["webhookPort"], 3);
        assert_eq!(controller["healthzAddr"], "127.0.0.1:2");
        assert_eq!(controller["metricsAddr"], "127.0.0.1:1");
        assert_eq!(controller["trialResources"], serde_json::json!(kinds));
        assert_eq!(config["init"]["certGenerator"]["enable"], false);
        let algorithms: Vec<&str> = config["runtime"]["suggestions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["algorithmName"].as_str().unwrap())
            .collect();
        assert_eq!(algorithms, GOPTUNA_ALGORITHMS);
    }

    #[test]
    fn a_root_process_runs_postgres_as_its_account() {
        let (program, args) = as_postgres_account(Path::new("/pg/bin/postgres"), &["-D".to_owned()]);
        if nix::unistd::geteuid().is_root() {
            assert_eq!(program, Path::new("setpriv"));
            assert_eq!(args.last().unwrap(), "-D");
            assert!(args.contains(&"/pg/bin/postgres".to_owned()));
        } else {
            assert_eq!(program, Path::new("/pg/bin/postgres"));
        }
    }
}
