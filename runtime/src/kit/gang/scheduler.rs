//! Which gang scheduler the operator serves (Kubeflow's `--gang-scheduler-name`).
use std::fmt;
use std::str::FromStr;

/// The scheduler-plugins scheduler's name when the flag does not give one: the name its Helm
/// chart installs the second scheduler under.
pub const DEFAULT_SCHEDULER_PLUGINS_NAME: &str = "scheduler-plugins-scheduler";

/// Volcano's scheduler name, which is also its flag value.
pub const VOLCANO_SCHEDULER_NAME: &str = "volcano";

/// The gang scheduler PodGroups are written for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum GangScheduler {
    /// No gang scheduling: no PodGroup, pods are left as the templates say.
    #[default]
    None,
    /// Volcano: `scheduling.volcano.sh/v1beta1` PodGroups; pods wait until the group is admitted.
    Volcano,
    /// kubernetes-sigs/scheduler-plugins coscheduling: `scheduling.x-k8s.io/v1alpha1` PodGroups.
    SchedulerPlugins {
        /// The `schedulerName` given to pods whose template names none.
        scheduler_name: String,
    },
}

impl GangScheduler {
    pub fn is_enabled(&self) -> bool {
        !matches!(self, Self::None)
    }

    /// The scheduler pods are sent to; `None` when gang scheduling is off.
    pub fn scheduler_name(&self) -> Option<&str> {
        match self {
            Self::None => None,
            Self::Volcano => Some(VOLCANO_SCHEDULER_NAME),
            Self::SchedulerPlugins { scheduler_name } => Some(scheduler_name),
        }
    }
}

/// A `--gang-scheduler-name` value that is none of the accepted forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown gang scheduler {0:?}: expected `none`, `volcano`, `scheduler-plugins` (scheduler \
     `scheduler-plugins-scheduler`) or `scheduler-plugins:<scheduler name>`"
)]
pub struct ParseGangSchedulerError(pub String);

impl FromStr for GangScheduler {
    type Err = ParseGangSchedulerError;

    /// Kubeflow treats every value but `volcano` as a scheduler-plugins scheduler name, so a typo
    /// silently becomes a scheduler nobody runs; here other names need the explicit
    /// `scheduler-plugins:<name>` form. The chart's own name is accepted bare, as Kubeflow
    /// deployments commonly pass it.
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let trimmed = value.trim();
        let lower = trimmed.to_ascii_lowercase();
        match lower.as_str() {
            "" | "none" => Ok(Self::None),
            VOLCANO_SCHEDULER_NAME => Ok(Self::Volcano),
            "scheduler-plugins" | DEFAULT_SCHEDULER_PLUGINS_NAME => Ok(Self::SchedulerPlugins {
                scheduler_name: DEFAULT_SCHEDULER_PLUGINS_NAME.to_owned(),
            }),
            _ => match trimmed.split_once(':') {
                Some((kind, name)) if kind.eq_ignore_ascii_case("scheduler-plugins") && !name.is_empty() => {
                    Ok(Self::SchedulerPlugins {
                        scheduler_name: name.to_owned(),
                    })
                }
                _ => Err(ParseGangSchedulerError(value.to_owned())),
            },
        }
    }
}

/// The flag value that parses back to the same scheduler (for clap defaults and logs).
impl fmt::Display for GangScheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => f.write_str("none"),
            Self::Volcano => f.write_str(VOLCANO_SCHEDULER_NAME),
            Self::SchedulerPlugins { scheduler_name } if scheduler_name == DEFAULT_SCHEDULER_PLUGINS_NAME => {
                f.write_str("scheduler-plugins")
            }
            Self::SchedulerPlugins { scheduler_name } => write!(f, "scheduler-plugins:{scheduler_name}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plugins(name: &str) -> GangScheduler {
        GangScheduler::SchedulerPlugins {
            scheduler_name: name.to_owned(),
        }
    }

    #[test]
    fn flag_values_parse() {
        assert_eq!("".parse(), Ok(GangScheduler::None));
        assert_eq!("None".parse(), Ok(GangScheduler::None));
        assert_eq!("Volcano".parse(), Ok(GangScheduler::Volcano));
        assert_eq!(
            "scheduler-plugins".parse(),
            Ok(plugins("scheduler-plugins-scheduler"))
        );
        assert_eq!(
            "scheduler-plugins-scheduler".parse(),
            Ok(plugins("scheduler-plugins-scheduler"))
        );
        assert_eq!("scheduler-plugins:my-sched".parse(), Ok(plugins("my-sched")));
    }

    #[test]
    fn unknown_values_name_the_accepted_ones() {
        let err = "volcan".parse::<GangScheduler>().unwrap_err();
        let message = err.to_string();
        assert!(message.contains("\"volcan\""), "{message}");
        for accepted in [
            "none",
            "volcano",
            "scheduler-plugins",
            "scheduler-plugins:<scheduler name>",
        ] {
            assert!(message.contains(accepted), "{message}");
        }
        assert!("scheduler-plugins:".parse::<GangScheduler>().is_err());
    }

    #[test]
    fn display_round_trips() {
        for scheduler in [
            GangScheduler::None,
            GangScheduler::Volcano,
            plugins("scheduler-plugins-scheduler"),
            plugins("x"),
        ] {
            assert_eq!(scheduler.to_string().parse(), Ok(scheduler));
        }
    }

    #[test]
    fn scheduler_names() {
        assert_eq!(GangScheduler::None.scheduler_name(), None);
        assert!(!GangScheduler::None.is_enabled());
        assert_eq!(GangScheduler::Volcano.scheduler_name(), Some("volcano"));
        assert_eq!(plugins("s").scheduler_name(), Some("s"));
    }
}
