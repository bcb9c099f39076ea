//! Which gang scheduler the operator serves (Kubeflow's `--gang-scheduler-name`).
use std::fmt;
use std::str::FromStr;

/// The scheduler-plugins scheduler's name when the flag does not give one: the name its Helm
/// chart installs the second scheduler under.
pub const DEFAULT_SCHEDULER_PLUGINS_NAME: &str = "scheduler-plugins-scheduler";

/// Volcano's scheduler name, which is also its flag value.
pub const VOLCANO_SCHEDULER_NAME: &str = "volcano";

/// kube-scheduler's own name, and the flag value for Kubernetes' native gang scheduling (the
/// flag names the scheduler pods are sent to, as for the others).
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

/// The other flag value for native gang scheduling, also the prefix of its
/// `kubernetes:<scheduler name>` form (a kube-scheduler profile of another name).
pub const NATIVE_FLAG: &str = "kubernetes";

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
    /// Kubernetes' own gang scheduling (KEP-4671; `scheduling.k8s.io/v1beta1`, beta in 1.37 behind
    /// the `GenericWorkload` feature gate): a PodGroup with a gang policy, which pods name in
    /// `spec.schedulingGroup`; kube-scheduler binds none of them until `minCount` fit at once.
    Native {
        /// The `schedulerName` given to pods whose template names none: a kube-scheduler
        /// profile, `default-scheduler` unless the flag names another.
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
            Self::SchedulerPlugins { scheduler_name } | Self::Native { scheduler_name } => {
                Some(scheduler_name)
            }
        }
    }

    /// Kubernetes' native gang scheduling under kube-scheduler's own name.
    pub fn native() -> Self {
        Self::Native {
            scheduler_name: DEFAULT_SCHEDULER_NAME.to_owned(),
        }
    }
}

/// A `--gang-scheduler-name` value that is none of the accepted forms, or names native gang
/// scheduling in an operator built without the API fields it needs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseGangSchedulerError {
    #[error(
        "unknown gang scheduler {0:?}: expected `none`, `volcano`, `scheduler-plugins` (scheduler \
         `scheduler-plugins-scheduler`), `scheduler-plugins:<scheduler name>`, `default-scheduler` \
         (Kubernetes' native gang scheduling; also `kubernetes`) or `kubernetes:<scheduler name>`"
    )]
    Unknown(String),
    #[error(
        "gang scheduler {0:?} is Kubernetes' native gang scheduling, which needs pod.spec.schedulingGroup: \
         build the operator against Kubernetes 1.37 or later (kfop-runtime feature v1_37)"
    )]
    NativeUnsupported(String),
}

// Native gang scheduling sets `PodSpec.scheduling_group`, which k8s-openapi has from 1.37 on.
k8s_openapi::k8s_if_ge_1_37! {
    const NATIVE_SUPPORTED: bool = true;
}
k8s_openapi::k8s_if_le_1_36! {
    const NATIVE_SUPPORTED: bool = false;
}

impl FromStr for GangScheduler {
    type Err = ParseGangSchedulerError;

    /// Kubeflow treats every value but `volcano` as a scheduler-plugins scheduler name, so a typo
    /// silently becomes a scheduler nobody runs; here other names need the explicit
    /// `scheduler-plugins:<name>` form. The chart's own name is accepted bare, as Kubeflow
    /// deployments commonly pass it. Native gang scheduling is named by kube-scheduler's own
    /// name, `default-scheduler`, or `kubernetes`.
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let trimmed = value.trim();
        let lower = trimmed.to_ascii_lowercase();
        match lower.as_str() {
            "" | "none" => Ok(Self::None),
            VOLCANO_SCHEDULER_NAME => Ok(Self::Volcano),
            "scheduler-plugins" | DEFAULT_SCHEDULER_PLUGINS_NAME => Ok(Self::SchedulerPlugins {
                scheduler_name: DEFAULT_SCHEDULER_PLUGINS_NAME.to_owned(),
            }),
            DEFAULT_SCHEDULER_NAME | NATIVE_FLAG if !NATIVE_SUPPORTED => {
                Err(ParseGangSchedulerError::NativeUnsupported(value.to_owned()))
            }
            DEFAULT_SCHEDULER_NAME | NATIVE_FLAG => Ok(Self::native()),
            _ => match trimmed.split_once(':') {
                Some((kind, name)) if kind.eq_ignore_ascii_case("scheduler-plugins") && !name.is_empty() => {
                    Ok(Self::SchedulerPlugins {
                        scheduler_name: name.to_owned(),
                    })
                }
                Some((kind, name)) if kind.eq_ignore_ascii_case(NATIVE_FLAG) && !name.is_empty() => {
                    if NATIVE_SUPPORTED {
                        Ok(Self::Native {
                            scheduler_name: name.to_owned(),
                        })
                    } else {
                        Err(ParseGangSchedulerError::NativeUnsupported(value.to_owned()))
                    }
                }
                _ => Err(ParseGangSchedulerError::Unknown(value.to_owned())),
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
            Self::Native { scheduler_name } if scheduler_name == DEFAULT_SCHEDULER_NAME => {
                f.write_str(DEFAULT_SCHEDULER_NAME)
            }
            Self::Native { scheduler_name } => write!(f, "{NATIVE_FLAG}:{scheduler_name}"),
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
        assert_eq!("default-scheduler".parse(), Ok(GangScheduler::native()));
        assert_eq!("Kubernetes".parse(), Ok(GangScheduler::native()));
        assert_eq!(
            "kubernetes:gang-profile".parse(),
            Ok(GangScheduler::Native {
                scheduler_name: "gang-profile".to_owned()
            })
        );
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
            "default-scheduler",
            "kubernetes",
            "kubernetes:<scheduler name>",
        ] {
            assert!(message.contains(accepted), "{message}");
        }
        assert!("scheduler-plugins:".parse::<GangScheduler>().is_err());
        assert!("kubernetes:".parse::<GangScheduler>().is_err());
    }

    #[test]
    fn display_round_trips() {
        for scheduler in [
            GangScheduler::None,
            GangScheduler::Volcano,
            plugins("scheduler-plugins-scheduler"),
            plugins("x"),
            GangScheduler::native(),
            GangScheduler::Native {
                scheduler_name: "y".to_owned(),
            },
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
        assert_eq!(
            GangScheduler::native().scheduler_name(),
            Some("default-scheduler")
        );
    }
}
