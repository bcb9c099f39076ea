//! The status of a job created as v1, as training-operator v1.8.1 persists it: Running while the
//! launcher pod runs, Succeeded once it succeeded, Failed once any pod failed; no worker is
//! counted once the launcher ended.
use kfop_runtime::StatusUpdate;
use kfop_runtime::plan::EventType;
use kfop_runtime::policy::SuccessPolicy;

pub fn update_status(update: &mut StatusUpdate<'_>) {
    let launcher_running = update.role("Launcher").is_some_and(|l| l.active > 0);
    if launcher_running && !update.restarted_any() {
        let (namespace, name) = (update.namespace().to_owned(), update.name().to_owned());
        let workers_running = update.role("Worker").is_none_or(|w| w.active >= w.replicas);
        // training-operator announces a launcher running with every worker on each pass; kfop
        // once, when the job starts running with all of them.
        if update.set_running(format!("MPIJob {name} is running.")) && workers_running {
            update.announce(
                EventType::Normal,
                "Running",
                format!("MPIJob {namespace}/{name} is running"),
            );
        }
    }
    update.apply_policy(&SuccessPolicy::AllOf("Launcher".to_owned()));
    if update
        .role("Launcher")
        .is_some_and(|l| l.succeeded > 0 || l.failed > 0)
    {
        update.set_replica_counts("Worker", 0, 0, 0);
    }
}
