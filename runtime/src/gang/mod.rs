//! Gang scheduling (pure): the PodGroup a job needs under Volcano or scheduler-plugins, how its
//! pods are pointed at it, and whether they wait for it. Kubeflow's behaviour, from
//! `pkg/controller.v1/common/{job,scheduling,util}.go` and `control/podgroup_control.go`.
mod min_resources;
mod quantity;
mod scheduler;

pub use min_resources::calc_min_resources;
pub use quantity::{Amount, QuantityError};
pub use scheduler::{
    DEFAULT_SCHEDULER_PLUGINS_NAME, GangScheduler, ParseGangSchedulerError, VOLCANO_SCHEDULER_NAME,
};
