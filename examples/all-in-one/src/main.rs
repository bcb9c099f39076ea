//! The all-in-one training operator: every bundled framework in one process, with one client
//! and one shared pod and service watch.
//!
//! * `kfop-operator [--enable-scheme KIND]... [flags]` runs it against `$KUBECONFIG`/in-cluster;
//! * `kfop-operator crds` prints every CRD;
//! * `kfop-operator check` tells whether a cluster is ready for the operator;
//! * `kfop-operator deploy` prints everything to install it (CRDs, RBAC, a Deployment);
//! * `kfop-operator migrate-storage` rewrites a CRD's objects in one storage version;
//! * `kfop-operator adopt` labels the children Kubeflow's MPI operators made, for kfop to see.
//!
//! The demo (a local control plane, one sample job per framework driven to Succeeded) is the
//! separate `kfop-demo` crate (`examples/demo`), so this binary does not link `kfop-testenv`.
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use kfop_operator::{Flags, adopt, check, crds, deploy, load_frameworks, register, say, schemes, storage};
use kfop_runtime::operator::run;

#[derive(Debug, Parser)]
#[command(
    name = "kfop-operator",
    version,
    about = "The all-in-one distributed-training operator"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Job kinds to run (repeatable, any letter case): tfjob, pytorchjob, xgboostjob, paddlejob,
    /// jaxjob, mxjob, mpijob. Default: all.
    #[arg(long = "enable-scheme", global = true)]
    enable_scheme: Vec<String>,
    #[command(flatten)]
    flags: Flags,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the CustomResourceDefinitions of the enabled kinds as YAML
    Crds {
        /// MPIJob in v2beta1 alone, with no conversion webhook: for an operator run out of
        /// cluster without --webhook-url
        #[arg(long)]
        without_conversion: bool,
    },
    /// Tell whether the cluster of $KUBECONFIG (or in-cluster) is ready for the operator: its
    /// CRDs, the conversion webhook, RBAC and no Kubeflow operator running the same kinds; one
    /// line per check, exit code 0 only when all pass
    Check(CheckArgs),
    /// Print everything to install the operator: CRDs, RBAC, a non-root Deployment
    Deploy,
    /// Store every object of a CRD in one version (a storage-version migration): after taking
    /// over from Kubeflow, `--to v2beta1` so that `v1` can leave MPIJob's storedVersions;
    /// before handing back to training-operator, `--to v1` while this operator still serves
    /// the conversion webhook
    MigrateStorage {
        /// The version to store
        #[arg(long, default_value = "v2beta1")]
        to: String,
        /// The CRD
        #[arg(long, default_value = storage::DEFAULT_CRD)]
        crd: String,
    },
    /// Label the children Kubeflow's MPI operators made (launcher Jobs, ConfigMaps, worker and
    /// launcher pods, ...) so that kfop sees them: run it when taking over, before kfop starts;
    /// it only adds labels
    Adopt {
        /// Only this namespace (default: all)
        #[arg(long)]
        namespace: Option<String>,
    },
}

#[derive(Debug, clap::Args)]
struct CheckArgs {
    /// Check RBAC as this user, e.g. system:serviceaccount:kfop-system:kfop-operator (the
    /// operator's ServiceAccount); without it RBAC is checked as yourself, which says nothing
    /// about the operator's permissions. The other checks always run as yourself
    #[arg(long = "as")]
    as_user: Option<String>,
    /// The namespace the operator watches (default: all); the dry-run MPIJob goes there (else
    /// to `default`)
    #[arg(long)]
    namespace: Option<String>,
}

fn main() -> ExitCode {
    kfop_runtime::operator::block_on(operator_main())
}

async fn operator_main() -> ExitCode {
    kfop_runtime::operator::init_logging("warn");
    let cli = Cli::parse();
    let enabled = match schemes::parse(&cli.enable_scheme) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("kfop-operator: {e}");
            return ExitCode::from(2);
        }
    };
    let result = match cli.command {
        Some(Command::Crds { without_conversion }) => {
            let crds = if without_conversion {
                crds::all_without_conversion(&enabled)
            } else {
                crds::all(&enabled)
            };
            crds::to_yaml(&crds)
                .map(|text| say(text.trim_end()))
                .map_err(|e| e.to_string())
        }
        Some(Command::Check(args)) => return check_cluster(&args, &enabled).await,
        Some(Command::Deploy) => deploy::manifests(&enabled)
            .map(|text| say(text.trim_end()))
            .map_err(|e| e.to_string()),
        Some(Command::MigrateStorage { to, crd }) => migrate_storage(&crd, &to).await,
        Some(Command::Adopt { namespace }) => adopt_children(namespace.as_deref()).await,
        None => {
            let runtime_frameworks = cli.flags.runtime_frameworks;
            run(&cli.flags.operator, "kfop-operator", |m| {
                Ok(load_frameworks(
                    register(m, &enabled, &cli.flags.frameworks)?,
                    runtime_frameworks,
                ))
            })
            .await
            .map_err(|e| e.to_string())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kfop-operator: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `migrate-storage`: prints what it did.
async fn migrate_storage(crd: &str, to: &str) -> Result<(), String> {
    let client = kfop_runtime::kube::Client::try_default()
        .await
        .map_err(|e| format!("no cluster: {e}"))?;
    let migrated = storage::migrate(&client, crd, to)
        .await
        .map_err(|e| e.to_string())?;
    say(&migrated.to_string());
    Ok(())
}

/// `adopt`: prints what it labelled.
async fn adopt_children(namespace: Option<&str>) -> Result<(), String> {
    let client = kfop_runtime::kube::Client::try_default()
        .await
        .map_err(|e| format!("no cluster: {e}"))?;
    let adopted = adopt::adopt(&client, namespace)
        .await
        .map_err(|e| e.to_string())?;
    say(&adopted.to_string());
    Ok(())
}

/// `check`: prints one line per check; exit code 0 only when every check passed.
async fn check_cluster(args: &CheckArgs, enabled: &std::collections::BTreeSet<schemes::Scheme>) -> ExitCode {
    let target = match check_target(args).await {
        Ok(t) => t,
        Err(e) => {
            eprintln!("kfop-operator check: {e}");
            return ExitCode::FAILURE;
        }
    };
    say(&rbac_identity(args.as_user.as_deref()));
    match check::run(&target, enabled).await {
        Ok(report) => {
            for line in report.lines() {
                say(&line);
            }
            if report.findings.is_empty() {
                ExitCode::SUCCESS
            } else {
                say(&format!("{} of the checks failed", report.findings.len()));
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("kfop-operator check: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Whose permissions the RBAC lines report: without `--as`, the caller's, which says nothing
/// about the operator's.
fn rbac_identity(as_user: Option<&str>) -> String {
    match as_user {
        Some(user) => format!("RBAC is checked as {user} (--as)"),
        None => format!(
            "RBAC is checked as you, the caller, not as the operator: add --as \
             system:serviceaccount:<namespace>:{} (the chart's ServiceAccount, in the namespace it \
             is installed in) to check the operator's permissions",
            kfop_operator::deploy::NAME
        ),
    }
}

/// The clients of `check`: one as the caller, one as `--as` for the access reviews.
async fn check_target(args: &CheckArgs) -> Result<check::Target, String> {
    use kfop_runtime::kube::{Client, Config};
    let config = Config::infer().await.map_err(|e| format!("no cluster: {e}"))?;
    let mut reviewer = config.clone();
    if let Some(user) = &args.as_user {
        reviewer.auth_info.impersonate = Some(user.clone());
    }
    let client = Client::try_from(config).map_err(|e| e.to_string())?;
    let reviewer = Client::try_from(reviewer).map_err(|e| e.to_string())?;
    Ok(check::Target {
        client,
        reviewer,
        namespace: args.namespace.clone(),
    })
}
