//! The status of a job created as v1, as training-operator v1.8.1 persists it: Running while the
//! launcher pod runs, Succeeded once it succeeded, Failed once any pod failed; no worker is
//! counted once the launcher ended.
use kfop_runtime::StatusUpdate;
use kfop_runtime::policy::SuccessPolicy;

pub fn update_status(update: &mut StatusUpdate<'_>) {
    update.apply_policy(&SuccessPolicy::AllOf("Launcher".to_owned()));
    if update
        .role("Launcher")
        .is_some_and(|l| l.succeeded > 0 || l.failed > 0)
    {
        update.set_replica_counts("Worker", 0, 0, 0);
    }
}
