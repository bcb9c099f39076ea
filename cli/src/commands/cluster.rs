//! `kfop cluster up|down|status`: the local control plane for manual use.
use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use kfop_testenv::{ControlPlane, Lifetime, NodeShape, PlaneOptions, PlaneState};

#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Start the plane and print the `export KUBECONFIG=...` line. Runs until Ctrl-C unless
    /// --detach is given.
    Up(UpArgs),
    /// Stop a plane started with `up --detach` and remove its state
    Down(DirArg),
    /// Report whether a detached plane is running
    Status(DirArg),
}

#[derive(Debug, Args)]
pub struct UpArgs {
    /// Leave the plane running in the background and return
    #[arg(long)]
    detach: bool,
    /// Number of kwok nodes to register
    #[arg(long, default_value_t = 4)]
    nodes: usize,
    #[command(flatten)]
    dir: DirArg,
}

#[derive(Debug, Args)]
pub struct DirArg {
    /// State directory of the plane (kubeconfig, logs, etcd data)
    #[arg(long, env = "KFOP_CLUSTER_DIR", default_value_os_t = default_dir())]
    dir: PathBuf,
}

fn default_dir() -> PathBuf {
    std::env::temp_dir().join("kfop-cluster")
}

pub fn run(cmd: ClusterCommand) -> Result<(), kfop_testenv::Error> {
    let runtime = tokio::runtime::Runtime::new()
        .map_err(|e| kfop_testenv::Error::Startup(format!("tokio runtime: {e}")))?;
    runtime.block_on(async {
        match cmd {
            ClusterCommand::Up(args) => up(args).await,
            ClusterCommand::Down(DirArg { dir }) => PlaneState::load(&dir)?.stop(),
            ClusterCommand::Status(DirArg { dir }) => status(&dir),
        }
    })
}

async fn up(args: UpArgs) -> Result<(), kfop_testenv::Error> {
    if let Ok(state) = PlaneState::load(&args.dir.dir) {
        if state.dead_components().is_empty() {
            say(&format!(
                "already running\nexport KUBECONFIG={}",
                state.kubeconfig.display()
            ));
            return Ok(());
        }
        state.stop()?;
    }
    kfop_testenv::Assets::locate_or_build()?;
    let options = PlaneOptions {
        dir: Some(args.dir.dir.clone()),
        nodes: NodeShape {
            count: args.nodes,
            ..NodeShape::default()
        },
        lifetime: if args.detach {
            Lifetime::Detached
        } else {
            Lifetime::DieWithParent
        },
        ..PlaneOptions::default()
    };
    let plane = ControlPlane::start(options).await?;
    let export = format!("export KUBECONFIG={}", plane.kubeconfig().display());
    if args.detach {
        plane.detach()?;
        say(&export);
        return Ok(());
    }
    say(&format!(
        "{export}\n# control plane running at {}; Ctrl-C stops it",
        plane.server()
    ));
    let _ = tokio::signal::ctrl_c().await;
    drop(plane);
    Ok(())
}

fn status(dir: &std::path::Path) -> Result<(), kfop_testenv::Error> {
    let state = PlaneState::load(dir)?;
    let dead = state.dead_components();
    if dead.is_empty() {
        say(&format!(
            "running at {}\nexport KUBECONFIG={}",
            state.server,
            state.kubeconfig.display()
        ));
        Ok(())
    } else {
        Err(kfop_testenv::Error::Startup(format!(
            "not running: {} exited",
            dead.join(", ")
        )))
    }
}

/// The command's output proper goes to stdout (scripts `eval` it); logs go to stderr.
fn say(text: &str) {
    let _ = writeln!(std::io::stdout(), "{text}");
}
