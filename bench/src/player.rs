//! What the kubelet player said during a run: kwok plays each pod's lifecycle Stages, and
//! pod-reaper plays the parts of a kubelet kwok lacks (the final delete, the periodic pod sync).
//! kwok drops a play that fails with an error it does not retry, and without the sync the pod
//! stays where it was; these counts show how often that happened and was healed, so a strand can
//! be told apart from one the player caused.
use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

/// kwok's log line for a play that failed (it retries only connection refused, timeouts, 429
/// and 503, and logs "retrying for failed job" then).
const KWOK_FAILED_PLAY: &str = "failed to apply stage";
const KWOK_RETRIED_PLAY: &str = "retrying for failed job";
/// pod-reaper's log line for a pod it touched because its play was overdue.
const REAPER_SYNCED: &str = "pod-reaper: synced ";

#[derive(Debug, Default, Serialize)]
pub struct Player {
    /// Plays kwok failed, and those it queued again itself.
    pub failed_plays: usize,
    pub retried_plays: usize,
    /// Pods pod-reaper's sync touched, by the play that was overdue (ready, exit, complete).
    pub synced: BTreeMap<String, usize>,
}

impl Player {
    /// Reads the plane's kwok and pod-reaper logs under `plane_dir`; a missing log counts nothing.
    pub fn read(plane_dir: &Path) -> Self {
        let log = |name: &str| std::fs::read_to_string(plane_dir.join("logs").join(name)).unwrap_or_default();
        Self::from_logs(&log("kwok.log"), &log("pod-reaper.log"))
    }

    fn from_logs(kwok: &str, reaper: &str) -> Self {
        let mut player = Self::default();
        for line in kwok.lines() {
            if line.contains(KWOK_FAILED_PLAY) {
                player.failed_plays += 1;
            } else if line.contains(KWOK_RETRIED_PLAY) {
                player.retried_plays += 1;
            }
        }
        for line in reaper.lines() {
            if let Some((_, play)) = line
                .split_once(REAPER_SYNCED)
                .and_then(|(_, rest)| rest.split_once(": "))
            {
                let play = play.trim_end_matches(" overdue").to_owned();
                *player.synced.entry(play).or_default() += 1;
            }
        }
        player
    }

    /// Pods the sync had to touch, all plays.
    pub fn synced_total(&self) -> usize {
        self.synced.values().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_failed_plays_and_syncs_by_play() {
        let kwok = "time=1 level=ERROR msg=\"failed to apply stage\" err=\"EOF\" pod=soak/a stage=kfop-pod-exit\n\
                    time=2 level=INFO msg=\"retrying for failed job\" pod=soak/b\n\
                    time=3 level=INFO msg=\"Patch pod\"\n";
        let reaper = "pod-reaper: synced soak/a: exit overdue\n\
                      pod-reaper: synced soak/c: ready overdue\n\
                      pod-reaper: synced soak/d: exit overdue\n\
                      pod-reaper: deleting soak/e: boom (will retry)\n";
        let player = Player::from_logs(kwok, reaper);
        assert_eq!((player.failed_plays, player.retried_plays), (1, 1));
        assert_eq!(player.synced.get("exit"), Some(&2));
        assert_eq!(player.synced.get("ready"), Some(&1));
        assert_eq!(player.synced_total(), 3);
    }
}
