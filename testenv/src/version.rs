//! What the plane's Kubernetes version needs switched on, in one place. The version itself is the
//! `k8s.io/kubernetes` line of `controlplane/k8s/go.mod` (build.sh and the asset cache key read
//! it there); the feature gates and extra API versions below were read from that version's
//! source and go to kube-apiserver, kube-controller-manager and kube-scheduler alike. A unit test
//! fails when go.mod names another minor version, so a bump revisits them.

/// The Kubernetes minor version the settings below were read from (checked by the tests).
#[cfg(test)]
const MINOR: u32 = 37;

/// Feature gates for every Kubernetes component of the plane.
///
/// `GenericWorkload` (beta in 1.37, off by default) is Kubernetes' native gang scheduling
/// (KEP-4671): kube-apiserver stores `scheduling.k8s.io/v1beta1` Workloads and PodGroups, keeps
/// `pod.spec.schedulingGroup` instead of dropping it, and admits PodGroups with their protection
/// finalizer; kube-scheduler adds the `GangScheduling` plugin to every profile's defaults (a pod
/// naming a gang PodGroup waits until `minCount` pods of it can be placed at once);
/// kube-controller-manager runs the podgroup-protection controller that lifts that finalizer
/// once no pod uses the group. `WorkloadWithJob` (alpha: the Job controller making Workloads and
/// PodGroups for its Jobs) stays off, so Jobs keep their usual pods.
pub(crate) const FEATURE_GATES: &[(&str, bool)] = &[("GenericWorkload", true)];

/// API versions kube-apiserver serves beyond its defaults: beta APIs are off unless asked for.
pub(crate) const RUNTIME_CONFIG: &[&str] = &["scheduling.k8s.io/v1beta1"];

/// `--feature-gates=...` for kube-apiserver, kube-controller-manager and kube-scheduler.
pub(crate) fn feature_gates_arg() -> String {
    let gates: Vec<String> = FEATURE_GATES
        .iter()
        .map(|(gate, on)| format!("{gate}={on}"))
        .collect();
    format!("--feature-gates={}", gates.join(","))
}

/// `--runtime-config=...` for kube-apiserver.
pub(crate) fn runtime_config_arg() -> String {
    let versions: Vec<String> = RUNTIME_CONFIG.iter().map(|v| format!("{v}=true")).collect();
    format!("--runtime-config={}", versions.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_settings_match_the_built_kubernetes_version() {
        let version = crate::assets::kubernetes_version();
        assert!(
            version.starts_with(&format!("v1.{MINOR}.")),
            "controlplane/k8s/go.mod builds Kubernetes {version}, but version.rs holds the feature \
             gates and runtime-config read from 1.{MINOR}: check them against the new version's \
             pkg/features/kube_features.go and pkg/controlplane/instance.go, then update MINOR"
        );
    }

    #[test]
    fn the_flags_name_native_gang_scheduling() {
        assert_eq!(feature_gates_arg(), "--feature-gates=GenericWorkload=true");
        assert_eq!(
            runtime_config_arg(),
            "--runtime-config=scheduling.k8s.io/v1beta1=true"
        );
    }
}
