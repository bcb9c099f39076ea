//! The local control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok
//! and pod-reaper (the kubelet's final pod delete) as processes on loopback, state in one
//! directory.
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kube::Client;
use serde::{Deserialize, Serialize};
use tracing::instrument::WithSubscriber;

use crate::assets::{Assets, KWOK_CONFIG};
use crate::kubeconfig;
use crate::nodes::{self, NodeShape};
use crate::pki::Pki;
use crate::ports::{free_ports, retry_if_port_taken};
pub use crate::process::Lifetime;
use crate::process::{self, Component, pid_alive, stop_pid};
use crate::version;
use crate::{Error, Result};

/// How to start a plane.
#[derive(Debug, Clone)]
pub struct PlaneOptions {
    /// State directory; a fresh one under the temp dir when `None`.
    pub dir: Option<PathBuf>,
    pub nodes: NodeShape,
    pub lifetime: Lifetime,
    pub start_timeout: Duration,
    /// API Priority and Fairness and the inflight limits as a cluster has them. Off by default:
    /// benchmarks measure the operator, not throttling; tests of overload turn it on.
    pub priority_and_fairness: bool,
    /// The plane's per-Service work: the endpoints, EndpointSlice and mirroring controllers,
    /// and the scheduler's default topology spreading, which builds each pod's selector from
    /// the Services in its namespace. Both grow with Services x pods in one namespace: with
    /// 40,000 (10,000 jobs) they held a core and a half and scheduled 6 pods/s. kwok pods serve
    /// no traffic, so a scale run may turn it off; on by default, as a cluster has it.
    pub service_work: bool,
}

impl Default for PlaneOptions {
    fn default() -> Self {
        let secs = std::env::var("KFOP_CONTROL_PLANE_START_TIMEOUT")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(120);
        Self {
            dir: None,
            nodes: NodeShape::default(),
            lifetime: Lifetime::DieWithParent,
            start_timeout: Duration::from_secs(secs),
            priority_and_fairness: false,
            service_work: true,
        }
    }
}

/// What `kfop cluster up --detach` leaves behind for `status` and `down`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlaneState {
    pub dir: PathBuf,
    pub kubeconfig: PathBuf,
    pub server: String,
    pub pids: Vec<(String, u32)>,
}

/// A running control plane. Dropping it stops the processes and removes its state directory.
#[derive(Debug)]
pub struct ControlPlane {
    dir: PathBuf,
    kubeconfig: PathBuf,
    server: String,
    components: Vec<Component>,
}

const STATE_FILE: &str = "state.json";
const OWNER_FILE: &str = "owner.pid";

impl ControlPlane {
    pub async fn start(options: PlaneOptions) -> Result<Self> {
        // A port taken is chosen again only in a fresh directory: a given one is the caller's
        // to keep.
        if options.dir.is_some() {
            return Self::start_once(options).await;
        }
        retry_if_port_taken("control plane", || Self::start_once(options.clone())).await
    }

    async fn start_once(options: PlaneOptions) -> Result<Self> {
        let started = Instant::now();
        let assets = Assets::locate()?;
        let dir = match &options.dir {
            Some(dir) => dir.clone(),
            None => fresh_state_dir()?,
        };
        std::fs::create_dir_all(dir.join("logs")).map_err(Error::io(&dir))?;
        let pki = Pki::write(&dir.join("pki"))?;
        let [etcd_port, peer_port, api_port, kcm_port, sched_port] = ports5()?;
        let server = format!("https://127.0.0.1:{api_port}");
        let kubeconfig = dir.join("admin.kubeconfig");
        kubeconfig::write_admin(&kubeconfig, &server, &pki.ca_cert, &pki.admin_token)?;

        let mut plane = Self {
            dir: dir.clone(),
            kubeconfig,
            server,
            components: Vec::new(),
        };
        let deadline = started + options.start_timeout;
        let logs = dir.join("logs");
        let spawn = |name: &str, args: Vec<String>| {
            process::spawn(name, &assets.path(name), &args, &logs, options.lifetime)
        };

        plane
            .components
            .push(spawn("etcd", etcd_args(&dir, etcd_port, peer_port))?);
        plane.wait_for_port("etcd", etcd_port, deadline).await?;
        plane.components.push(spawn(
            "kube-apiserver",
            apiserver_args(&pki, etcd_port, api_port, options.priority_and_fairness),
        )?);
        let client = plane.wait_ready(deadline).await?;

        let kc = plane.kubeconfig.display().to_string();
        plane.components.push(spawn(
            "kube-controller-manager",
            kcm_args(&kc, &pki, kcm_port, options.service_work),
        )?);
        let sched_config = dir.join("scheduler.yaml");
        write(
            &sched_config,
            &scheduler_config(&plane.kubeconfig, options.service_work),
        )?;
        plane.components.push(spawn(
            "kube-scheduler",
            scheduler_args(&kc, &sched_config, sched_port),
        )?);
        let kwok_config = dir.join("kwok.yaml");
        write(&kwok_config, KWOK_CONFIG)?;
        plane.components.push(spawn(
            "kwok",
            vec![
                format!("--kubeconfig={kc}"),
                format!("--config={}", kwok_config.display()),
            ],
        )?);
        plane
            .components
            .push(spawn("pod-reaper", vec![format!("--kubeconfig={kc}")])?);

        options.nodes.register(&client).await?;
        plane
            .wait_for_port("kube-controller-manager", kcm_port, deadline)
            .await?;
        plane
            .wait_for_port("kube-scheduler", sched_port, deadline)
            .await?;
        plane
            .wait_while(deadline, "kwok to mark the nodes Ready", || {
                nodes::all_ready(&client, options.nodes.count)
            })
            .await?;
        tracing::info!(server = %plane.server, elapsed_ms = started.elapsed().as_millis(), "control plane ready");
        Ok(plane)
    }

    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// A kubeconfig acting as `user` in `groups` (e.g. an operator's ServiceAccount), written
    /// next to the admin's; the admin's credentials authorize the impersonation.
    pub fn kubeconfig_as(&self, user: &str, groups: &[String]) -> Result<PathBuf> {
        let file: String = user
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let path = self.dir.join(format!("{file}.kubeconfig"));
        kubeconfig::write_impersonating(&self.kubeconfig, &path, user, groups)?;
        Ok(path)
    }

    /// The admin kubeconfig with its CA inlined, to hand to a program elsewhere in a Secret
    /// (a MultiKueue manager's kubeconfig of this plane as its worker).
    pub fn self_contained_kubeconfig(&self) -> Result<String> {
        kubeconfig::self_contained(&self.kubeconfig)
    }

    pub fn server(&self) -> &str {
        &self.server
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub async fn client(&self) -> Result<Client> {
        kubeconfig::client_from(&self.kubeconfig).await
    }

    pub fn state(&self) -> PlaneState {
        PlaneState {
            dir: self.dir.clone(),
            kubeconfig: self.kubeconfig.clone(),
            server: self.server.clone(),
            pids: self
                .components
                .iter()
                .map(|c| (c.name.clone(), c.child.id()))
                .collect(),
        }
    }

    /// Leaves the processes running and records them in `<dir>/state.json` for [`PlaneState::load`].
    pub fn detach(mut self) -> Result<PlaneState> {
        let state = self.state();
        state.save()?;
        self.components.clear();
        Ok(state)
    }

    fn component(&mut self, name: &str) -> Result<&mut Component> {
        self.components
            .iter_mut()
            .find(|c| c.name == name)
            .ok_or_else(|| Error::Startup(format!("no component {name}")))
    }

    /// Restarts one component (`etcd`, `kube-apiserver`, ...) with its state kept, as a crash
    /// and restart would, and waits until the API server is ready again.
    pub async fn restart(&mut self, name: &str, timeout: Duration) -> Result<()> {
        self.component(name)?.restart(Duration::from_secs(5))?;
        tracing::info!(component = name, "restarted");
        self.wait_ready(Instant::now() + timeout).await.map(|_| ())
    }

    /// Freezes (SIGSTOP) or thaws (SIGCONT) one component: an outage in which connections stay
    /// open but nothing answers.
    pub fn freeze(&mut self, name: &str, frozen: bool) -> Result<()> {
        self.component(name)?.freeze(frozen)
    }

    async fn wait_for_port(&mut self, what: &str, port: u16, deadline: Instant) -> Result<()> {
        self.wait_while(
            deadline,
            &format!("{what} to listen on 127.0.0.1:{port}"),
            || async move { Ok(TcpStream::connect(("127.0.0.1", port)).is_ok()) },
        )
        .await
    }

    async fn wait_ready(&mut self, deadline: Instant) -> Result<Client> {
        let client = self.client().await?;
        let probe = client.clone();
        self.wait_while(deadline, "kube-apiserver /readyz", || {
            let client = probe.clone();
            async move {
                let request = http::Request::get("/readyz")
                    .body(Vec::new())
                    .map_err(|e| Error::Startup(e.to_string()))?;
                // Refused connections and 500s are what a starting API server answers: the
                // client's own ERROR log of each would only alarm whoever watches it start.
                Ok(client
                    .request_text(request)
                    .with_subscriber(tracing::subscriber::NoSubscriber::default())
                    .await
                    .is_ok_and(|body| body.trim() == "ok"))
            }
        })
        .await?;
        Ok(client)
    }

    /// Polls `probe` until true, failing early with the log tail if any component died.
    async fn wait_while<F, Fut>(&mut self, deadline: Instant, what: &str, mut probe: F) -> Result<()>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<bool>>,
    {
        let start = Instant::now();
        loop {
            for component in &mut self.components {
                component.check_alive()?;
            }
            if probe().await? {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: what.to_owned(),
                    seconds: start.elapsed().as_secs(),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        if self.components.is_empty() {
            return;
        }
        // Stop in reverse start order so nothing logs errors about a vanished API server.
        for component in self.components.iter_mut().rev() {
            stop_pid(component.child.id(), Duration::from_secs(5));
            let _ = component.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl PlaneState {
    pub fn load(dir: &Path) -> Result<Self> {
        let path = dir.join(STATE_FILE);
        let text = std::fs::read_to_string(&path).map_err(|_| Error::NotRunning(dir.to_owned()))?;
        serde_json::from_str(&text).map_err(|e| Error::Kubeconfig {
            path,
            message: e.to_string(),
        })
    }

    fn save(&self) -> Result<()> {
        let path = self.dir.join(STATE_FILE);
        let text = serde_json::to_string_pretty(self).map_err(|e| Error::Startup(e.to_string()))?;
        write(&path, &text)
    }

    /// Names of the components whose process is gone.
    pub fn dead_components(&self) -> Vec<&str> {
        self.pids
            .iter()
            .filter(|(_, pid)| !i32::try_from(*pid).is_ok_and(pid_alive))
            .map(|(name, _)| name.as_str())
            .collect()
    }

    /// Stops every process (reverse start order) and removes the state directory.
    pub fn stop(self) -> Result<()> {
        for (_, pid) in self.pids.iter().rev() {
            stop_pid(*pid, Duration::from_secs(5));
        }
        std::fs::remove_dir_all(&self.dir).map_err(Error::io(&self.dir))
    }
}

fn ports5() -> Result<[u16; 5]> {
    let ports = free_ports(5)?;
    ports
        .try_into()
        .map_err(|_| Error::Startup("could not reserve 5 ports".to_owned()))
}

/// A new directory under `$TMPDIR/kfop-testenv`, after removing those of dead processes (a test
/// process killed by a signal never cleans up after itself).
fn fresh_state_dir() -> Result<PathBuf> {
    let root = std::env::temp_dir().join("kfop-testenv");
    std::fs::create_dir_all(&root).map_err(Error::io(&root))?;
    if let Ok(entries) = std::fs::read_dir(&root) {
        for entry in entries.flatten() {
            let owner = std::fs::read_to_string(entry.path().join(OWNER_FILE)).ok();
            // The name's pid too: a directory another thread just made has no owner file yet
            // (removing it failed a sibling plane's start with etcd.log not found).
            let named = entry
                .file_name()
                .to_string_lossy()
                .split('-')
                .next()
                .map(str::to_owned);
            let alive = [owner, named]
                .into_iter()
                .flatten()
                .filter_map(|s| s.trim().parse::<i32>().ok())
                .any(pid_alive);
            let detached = entry.path().join(STATE_FILE).exists();
            if !alive && !detached {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir = root.join(format!("{}-{nanos:09}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(Error::io(&dir))?;
    write(&dir.join(OWNER_FILE), &std::process::id().to_string())?;
    Ok(dir)
}

fn write(path: &Path, contents: &str) -> Result<()> {
    std::fs::write(path, contents).map_err(Error::io(path))
}

fn etcd_args(dir: &Path, port: u16, peer: u16) -> Vec<String> {
    let client = format!("http://127.0.0.1:{port}");
    let peer = format!("http://127.0.0.1:{peer}");
    vec![
        "--name=kfop".to_owned(),
        format!("--data-dir={}", dir.join("etcd").display()),
        format!("--listen-client-urls={client}"),
        format!("--advertise-client-urls={client}"),
        format!("--listen-peer-urls={peer}"),
        format!("--initial-advertise-peer-urls={peer}"),
        format!("--initial-cluster=kfop={peer}"),
        // Test data is disposable; fsync is the slowest part of etcd on a shared disk.
        "--unsafe-no-fsync=true".to_owned(),
        "--log-level=warn".to_owned(),
    ]
}

fn apiserver_args(pki: &Pki, etcd_port: u16, port: u16, fairness: bool) -> Vec<String> {
    let p = |path: &Path| path.display().to_string();
    let mut args = vec![
        format!("--etcd-servers=http://127.0.0.1:{etcd_port}"),
        "--bind-address=127.0.0.1".to_owned(),
        "--advertise-address=127.0.0.1".to_owned(),
        format!("--secure-port={port}"),
        format!("--tls-cert-file={}", p(&pki.serving_cert)),
        format!("--tls-private-key-file={}", p(&pki.serving_key)),
        format!("--token-auth-file={}", p(&pki.token_file)),
        // Also makes the server publish extension-apiserver-authentication, which the controller
        // manager and scheduler read at start.
        format!("--client-ca-file={}", p(&pki.ca_cert)),
        "--authorization-mode=RBAC".to_owned(),
        format!("--service-account-issuer=https://127.0.0.1:{port}"),
        format!("--service-account-key-file={}", p(&pki.sa_pub)),
        format!("--service-account-signing-key-file={}", p(&pki.sa_key)),
        "--service-cluster-ip-range=10.96.0.0/16".to_owned(),
        // No token controller hands out service-account tokens here (as in envtest), and no
        // node-lifecycle controller would lift the not-ready taint new nodes get on admission.
        "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition".to_owned(),
        "--allow-privileged=true".to_owned(),
        "--endpoint-reconciler-type=none".to_owned(),
        "--profiling=false".to_owned(),
        version::feature_gates_arg(),
        version::runtime_config_arg(),
    ];
    if !fairness {
        // No fairness queues or inflight caps: benchmarks measure the operator, not throttling.
        args.extend(
            [
                "--enable-priority-and-fairness=false",
                "--max-requests-inflight=0",
                "--max-mutating-requests-inflight=0",
            ]
            .map(str::to_owned),
        );
    }
    args
}

fn kcm_args(kubeconfig: &str, pki: &Pki, port: u16, service_work: bool) -> Vec<String> {
    // kwok nodes send no kubelet heartbeats worth judging and have no pod CIDRs. (The cloud
    // controllers are gone from kube-controller-manager 1.37; naming one fails its start.)
    let mut controllers = "--controllers=*,-node-lifecycle-controller,-node-ipam-controller".to_owned();
    if !service_work {
        controllers
            .push_str(",-endpoints-controller,-endpointslice-controller,-endpointslice-mirroring-controller");
    }
    vec![
        format!("--kubeconfig={kubeconfig}"),
        format!("--authentication-kubeconfig={kubeconfig}"),
        format!("--authorization-kubeconfig={kubeconfig}"),
        "--leader-elect=false".to_owned(),
        "--bind-address=127.0.0.1".to_owned(),
        format!("--secure-port={port}"),
        "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics".to_owned(),
        format!("--root-ca-file={}", pki.ca_cert.display()),
        format!("--service-account-private-key-file={}", pki.sa_key.display()),
        controllers,
        "--kube-api-qps=500".to_owned(),
        "--kube-api-burst=1000".to_owned(),
        "--profiling=false".to_owned(),
        version::feature_gates_arg(),
    ]
}

fn scheduler_config(kubeconfig: &Path, service_work: bool) -> String {
    let kc = serde_json::Value::from(kubeconfig.display().to_string());
    // `List` with no constraints: no default spreading, so no Service lookups per pod.
    let plugin_config = if service_work {
        ""
    } else {
        "    pluginConfig:\n    - name: PodTopologySpread\n      args:\n        defaultingType: List\n"
    };
    let profiles: String = SCHEDULER_NAMES
        .iter()
        .map(|name| format!("  - schedulerName: {name}\n{plugin_config}"))
        .collect();
    format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
         clientConnection:\n  kubeconfig: {kc}\n  qps: 500\n  burst: 1000\n\
         leaderElection:\n  leaderElect: false\n\
         profiles:\n{profiles}"
    )
}

/// Pods of gang-scheduled jobs name Volcano's or scheduler-plugins' scheduler; the local
/// scheduler answers to those names too (with the default plugins, no Volcano or
/// scheduler-plugins gang semantics), so such pods run. Admission of their PodGroups is the tests'
/// part. Every profile has Kubernetes' own `GangScheduling` plugin (see [`version`]), which acts
/// only on pods whose `spec.schedulingGroup` names a `scheduling.k8s.io` PodGroup.
const SCHEDULER_NAMES: [&str; 3] = ["default-scheduler", "volcano", "scheduler-plugins-scheduler"];

fn scheduler_args(kubeconfig: &str, config: &Path, port: u16) -> Vec<String> {
    vec![
        format!("--config={}", config.display()),
        format!("--authentication-kubeconfig={kubeconfig}"),
        format!("--authorization-kubeconfig={kubeconfig}"),
        "--bind-address=127.0.0.1".to_owned(),
        format!("--secure-port={port}"),
        "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics".to_owned(),
        version::feature_gates_arg(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_process_directory_without_its_owner_file_yet_is_kept() {
        let root = std::env::temp_dir().join("kfop-testenv");
        std::fs::create_dir_all(&root).unwrap();
        let starting = root.join(format!("{}-starting-test", std::process::id()));
        let dead = root.join(format!("{}-dead-test", i32::MAX));
        std::fs::create_dir_all(&starting).unwrap();
        std::fs::create_dir_all(&dead).unwrap();
        let fresh = fresh_state_dir().unwrap();
        assert!(starting.exists(), "a sibling thread's new directory was removed");
        assert!(!dead.exists(), "a dead process's directory was kept");
        std::fs::remove_dir_all(&starting).unwrap();
        std::fs::remove_dir_all(&fresh).unwrap();
    }

    #[test]
    fn a_plane_without_service_work_spreads_no_pod_by_default_in_any_profile() {
        let config = |service_work| -> serde_json::Value {
            serde_saphyr::from_str(&scheduler_config(Path::new("/k"), service_work)).unwrap()
        };
        let profiles = |config: &serde_json::Value| config["profiles"].as_array().unwrap().clone();

        let lean = config(false);
        assert_eq!(profiles(&lean).len(), 3);
        for profile in profiles(&lean) {
            let spread = &profile["pluginConfig"][0];
            assert_eq!(spread["name"], "PodTopologySpread", "{profile}");
            assert_eq!(spread["args"]["defaultingType"], "List", "{profile}");
        }
        let full = config(true);
        assert!(profiles(&full).iter().all(|p| p.get("pluginConfig").is_none()));
        assert_eq!(full["clientConnection"]["kubeconfig"], "/k");
    }
}
