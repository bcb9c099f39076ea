//! What the conditions the engine sets itself say, whatever the status rule: Created, and the
//! Suspended transitions. training-operator and mpi-operator word them differently.
use super::JobName;

/// The messages of the engine's own conditions for one job, and which transitions an event
/// records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LifecycleWording {
    /// `Created=True`'s message.
    pub created: String,
    /// Whether `Created` records a Normal `<Kind>Created` event (mpi-operator's does).
    pub created_event: bool,
    /// `Suspended=True`'s message and its event's.
    pub suspended: String,
    /// `Running=False`'s message while the job is suspended.
    pub running_suspended: String,
    /// `Suspended=False`'s message and its event's.
    pub resumed: String,
    /// mpi-operator's suspension: `Running=False` on every suspended pass, after `Suspended`
    /// (so it comes last) and also for a job that never ran, and zeroed counts for every role.
    /// training-operator only turns an existing `Running` off, before setting `Suspended`.
    pub suspension_reports_every_role: bool,
}

impl LifecycleWording {
    /// training-operator's: `<Kind> <name> is created.`, no Created event.
    pub fn training_operator(job: JobName<'_>) -> Self {
        let JobName { kind, name, .. } = job;
        Self {
            created: format!("{kind} {name} is created."),
            created_event: false,
            suspended: format!("{kind} {name} is suspended."),
            running_suspended: format!("{kind} {name} is suspended."),
            resumed: format!("{kind} {name} is resumed."),
            suspension_reports_every_role: false,
        }
    }
}
