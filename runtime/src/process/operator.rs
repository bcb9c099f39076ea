//! The operator process: Kubeflow's manager flags and a `run` that builds the client, the
//! manager and the shutdown signal, so an operator's `main` is a few lines.
use std::net::SocketAddr;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use kube::CustomResourceExt;

use crate::client::{self, RateLimit};
use crate::controller::ControllerConfig;
use crate::error::{Error, Result};
use crate::framework::{Framework, Loaded};
use crate::manager::{LeaderElection, Manager, ManagerConfig};
use crate::manifest::LoadError;
use crate::webhook::{Endpoint, Policy, WebhookConfig, WebhookOptions};

/// Flags every kfop operator accepts (names follow Kubeflow's training-operator).
#[derive(Debug, Clone, Args)]
pub struct OperatorArgs {
    /// Watch only this namespace (default: all; also read from KUBEFLOW_NAMESPACE)
    #[arg(long, env = "KUBEFLOW_NAMESPACE")]
    pub namespace: Option<String>,
    /// Address of /metrics, /healthz and /readyz
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub metrics_bind_address: SocketAddr,
    /// Hold a Lease so only one replica reconciles
    #[arg(long)]
    pub leader_elect: bool,
    /// Name of the leader-election Lease
    #[arg(long, default_value = "1ca428e5.training-operator.kubeflow.org")]
    pub leader_election_id: String,
    /// Namespace of the Lease (default: MY_POD_NAMESPACE, else "kubeflow")
    #[arg(long, env = "MY_POD_NAMESPACE", default_value = "kubeflow")]
    pub leader_election_namespace: String,
    /// Jobs reconciled concurrently per framework (Kubeflow's default is 1)
    // A reconcile mostly waits on the API server, so a slot is cheap: a 1,000-job burst reached
    // 0.83x the API server's ceiling with 16 and 0.51x with 4 (commit 6c523ed).
    #[arg(long, default_value_t = 16)]
    pub controller_threads: u16,
    /// Child creates/deletes in flight per job
    #[arg(long, default_value_t = 16)]
    pub child_parallelism: usize,
    /// Client-side request rate to the API server (0: unlimited; the server's Priority and
    /// Fairness answers overload with 429s, which are retried after their Retry-After)
    #[arg(long, default_value_t = RateLimit::default().qps)]
    pub kube_api_qps: f32,
    /// Client-side request burst (with a --kube-api-qps)
    #[arg(long, default_value_t = RateLimit::default().burst)]
    pub kube_api_burst: u32,
    /// Do not emit an event per created or deleted pod and service
    #[arg(long)]
    pub no_child_events: bool,
    /// How pod, service and event creates are encoded: `json`, or `protobuf` (cheaper for the
    /// API server; a pod holding a field without protobuf conversion is still sent as JSON, and
    /// custom resources are always JSON)
    #[arg(long, env = "KFOP_WIRE_ENCODING", value_enum, default_value = "json")]
    pub wire_encoding: crate::wire::Encoding,
    /// Gang scheduling: `volcano`, `scheduler-plugins` (or `scheduler-plugins:<scheduler name>`),
    /// `default-scheduler` (Kubernetes' native gang scheduling, 1.37+; also `kubernetes`, or
    /// `kubernetes:<scheduler name>`), or `none`
    #[arg(long, default_value = "none")]
    pub gang_scheduler_name: crate::gang::GangScheduler,
    /// Queue a job labelled `kueue.x-k8s.io/queue-name` through Kueue's `pod` integration: its
    /// pods form one Kueue pod group, created gated and run once Kueue admits the group (for
    /// Kueue without its Kubeflow job integrations; inert for a job those integrations manage)
    #[arg(long)]
    pub kueue_pod_groups: bool,
    /// Plan every live job again this often (e.g. `5m`, `90s`), so a lost watch event delays a
    /// job by at most this long
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub resync_period: Duration,
    /// Address of the conversion webhook (HTTPS), served when a kind has several versions
    #[arg(long, default_value = "0.0.0.0:9443")]
    pub webhook_bind_address: SocketAddr,
    /// The Service in front of the webhook, in the operator's namespace (port 443)
    #[arg(long, default_value = "kfop-operator-webhook")]
    pub webhook_service_name: String,
    /// Reach the webhook at this https:// URL instead of the Service (out of cluster)
    #[arg(long)]
    pub webhook_url: Option<String>,
    /// The Secret holding the webhook's CA bundle and serving certificate, made and rotated by
    /// the operator itself
    #[arg(long, default_value = "kfop-operator-webhook-cert")]
    pub webhook_secret_name: String,
    /// Namespace of that Secret and Service (default: MY_POD_NAMESPACE, else "kubeflow")
    #[arg(long, env = "MY_POD_NAMESPACE", default_value = "kubeflow")]
    pub webhook_namespace: String,
    /// How long the webhook's certificates live; each is replaced with a third of it left
    #[arg(long, default_value = "8760h", value_parser = parse_duration)]
    pub webhook_cert_validity: Duration,
}

/// Parses `250ms`, `10s`, `2m`, `1h` or a bare number of seconds.
pub fn parse_duration(text: &str) -> std::result::Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}`: expected a number with ms, s, m or h"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        other => return Err(format!("`{text}`: unknown unit `{other}` (use ms, s, m or h)")),
    };
    if !seconds.is_finite() || seconds < 0.0 {
        return Err(format!("`{text}`: must be a non-negative duration"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

impl OperatorArgs {
    fn manager_config(&self, reporter: &str) -> ManagerConfig {
        let identity = std::env::var("MY_POD_NAME")
            .or_else(|_| std::env::var("HOSTNAME"))
            .unwrap_or_else(|_| format!("{reporter}-{}", std::process::id()));
        ManagerConfig {
            controller: ControllerConfig {
                concurrency: self.controller_threads,
                parallelism: self.child_parallelism.max(1),
                child_events: !self.no_child_events,
                namespace: self.namespace.clone(),
                gang: self.gang_scheduler_name.clone(),
                kueue_pod_groups: self.kueue_pod_groups,
                resync_period: self.resync_period,
            },
            metrics_addr: Some(self.metrics_bind_address),
            leader_election: self.leader_elect.then(|| LeaderElection {
                lease_name: self.leader_election_id.clone(),
                namespace: self.leader_election_namespace.clone(),
                identity,
                lease_duration_secs: 15,
            }),
            webhook: self.webhook_config(),
            reporter: reporter.to_owned(),
        }
    }

    /// The conversion webhook in cluster (behind its Service) or at `--webhook-url`; none out
    /// of cluster without a URL, where the API server could not reach it.
    fn webhook_config(&self) -> Option<WebhookConfig> {
        let endpoint = match &self.webhook_url {
            Some(url) => Endpoint::Url(url.clone()),
            None if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() => Endpoint::Service {
                namespace: self.webhook_namespace.clone(),
                name: self.webhook_service_name.clone(),
            },
            None => return None,
        };
        Some(WebhookConfig {
            addr: self.webhook_bind_address,
            options: WebhookOptions {
                namespace: self.webhook_namespace.clone(),
                secret_name: self.webhook_secret_name.clone(),
                endpoint,
                policy: Policy {
                    validity: self.webhook_cert_validity,
                },
            },
        })
    }
}

/// Connects (in-cluster or `KUBECONFIG`), lets `register` add frameworks and runs until SIGINT
/// or SIGTERM.
pub async fn run(
    args: &OperatorArgs,
    reporter: &str,
    register: impl FnOnce(Manager) -> Result<Manager>,
) -> Result<()> {
    let config = kube::Config::infer().await.map_err(|e| Error::Config {
        action: "inferring it from $KUBECONFIG or the cluster",
        source: Box::new(e),
    })?;
    let client = client::build(
        config,
        RateLimit {
            qps: args.kube_api_qps,
            burst: args.kube_api_burst,
        },
    )
    .map_err(|e| Error::Config {
        action: "building the client",
        source: Box::new(e),
    })?;
    crate::wire::set_encoding(args.wire_encoding);
    let manager = register(Manager::new(client, args.manager_config(reporter)))?;
    manager.ensure_conversion_served().await?;
    manager.run(shutdown_signal()).await
}

async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => futures::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        () = terminate => {},
    }
    tracing::info!("shutting down");
}

#[derive(Debug, Parser)]
struct SingleCli {
    #[command(subcommand)]
    command: Option<SingleCommand>,
    #[command(flatten)]
    operator: OperatorArgs,
}

#[derive(Debug, Subcommand)]
enum SingleCommand {
    /// Print the CustomResourceDefinition as YAML
    Crd,
}

/// Logs to stderr, filtered by `RUST_LOG`, else by `default_filter` (e.g. `"warn"`): what every
/// kfop binary's `main` starts with.
pub fn init_logging(default_filter: &str) {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| default_filter.into()),
        )
        .with_writer(std::io::stderr)
        .init();
}

/// Runs an operator's `main` on a multi-threaded async runtime, with the allocator set up before
/// any of the runtime's threads allocates ([`crate::malloc::single_arena`]).
pub fn block_on(main: impl std::future::Future<Output = ExitCode>) -> ExitCode {
    crate::malloc::single_arena();
    match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime.block_on(main),
        Err(e) => {
            eprintln!("starting the async runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The whole `main` of a one-framework operator: logging, flags, `crd` to print the CRD, else
/// run until SIGTERM. `framework` is what the crate's generated `framework(code)` loaded.
pub fn main<F>(framework: Result<Loaded<F>, LoadError>) -> ExitCode
where
    F: Framework,
    F::Job: CustomResourceExt,
{
    block_on(framework_main(framework))
}

async fn framework_main<F>(framework: Result<Loaded<F>, LoadError>) -> ExitCode
where
    F: Framework,
    F::Job: CustomResourceExt,
{
    init_logging("info,kube_client::client::builder=off");
    let framework = match framework {
        Ok(f) => f,
        Err(e) => {
            tracing::error!(error = %e, "loading the framework's manifest");
            return ExitCode::FAILURE;
        }
    };
    let info = framework.info().clone();
    let command = SingleCli::command().about(format!("The {} operator", framework.kind().kind));
    let parsed = SingleCli::from_arg_matches(&command.get_matches());
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let result = match cli.command {
        Some(SingleCommand::Crd) => crate::crd_yaml(&F::Job::crd()).map(|yaml| {
            use std::io::Write;
            let _ = std::io::stdout().write_all(yaml.as_bytes());
        }),
        None => {
            run(
                &cli.operator,
                &info.controller_name,
                |m| Ok(m.register(framework)),
            )
            .await
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "operator failed");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("5d").unwrap_err().contains("unknown unit `d`"));
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn resync_period_flag() {
        #[derive(Debug, Parser)]
        struct Cli {
            #[command(flatten)]
            operator: OperatorArgs,
        }
        let args = Cli::parse_from(["op"]).operator;
        assert_eq!(args.resync_period, Duration::from_secs(300));
        let args = Cli::parse_from(["op", "--resync-period", "30s"]).operator;
        assert_eq!(
            args.manager_config("op").controller.resync_period,
            Duration::from_secs(30)
        );
    }
}
