//! The `Framework` impl `kfop gen` writes for a manifest-driven operator, as one macro so the
//! generated crates carry data, not copies of the same impl block.

/// Implements [`crate::Framework`] for `$framework`: the manifest's environment (`env`, a
/// `LazyLock<Result<Vec<EnvSpec>, TemplateError>>`) is injected first, then the crate's hooks
/// module decorates the pod, decides the master role and sets the status; `success` lists the
/// manifest's rules, the first role present in a job deciding. With `objects = path` (a manifest
/// declaring resources besides pods, services and PodGroups) that module supplies the owned
/// objects: `creates_pods`, `creates_services`, `owned_kinds`, `desired_objects`, `prepare_object`.
#[macro_export]
macro_rules! manifest_framework {
    (
        $framework:ty, $job:ty,
        env = $env:expr,
        success = [$(($kind:ident, $role:literal)),* $(,)?],
        hooks = $($hooks:ident)::+
        $(, objects = $($objects:ident)::+)? $(,)?
    ) => {
        impl $crate::Framework for $framework {
            type Job = $job;
$(
            fn creates_pods(&self, role: &str) -> bool {
                $($objects)::+::creates_pods(role)
            }

            fn creates_services(&self) -> bool {
                $($objects)::+::creates_services()
            }

            fn owned_kinds(&self) -> ::std::vec::Vec<$crate::kube::api::ApiResource> {
                $($objects)::+::owned_kinds()
            }

            fn desired_objects(
                &self,
                ctx: &$crate::JobContext<'_, $job>,
            ) -> ::std::result::Result<::std::vec::Vec<$crate::plan::DesiredObject>, $crate::FrameworkError> {
                $($objects)::+::desired_objects(ctx)
            }

            fn prepare_object(
                &self,
                object: &mut $crate::kube::api::DynamicObject,
            ) -> ::std::result::Result<(), $crate::FrameworkError> {
                $($objects)::+::prepare_object(object)
            }
)?

            fn is_master(
                &self,
                specs: &::std::collections::BTreeMap<::std::string::String, $crate::api::ReplicaSpec>,
                role: &str,
                index: i32,
            ) -> bool {
                let declared = self.info().role(role).is_some_and(|r| r.master);
                $($hooks)::+::is_master(specs, role, index, declared)
            }

            fn decorate_pod(
                &self,
                ctx: &$crate::PodContext<'_, $job>,
                template: &mut $crate::k8s_openapi::api::core::v1::PodTemplateSpec,
            ) -> ::std::result::Result<(), $crate::FrameworkError> {
                let env = ($env).as_ref().map_err(|e| $crate::FrameworkError(e.to_string()))?;
                ctx.with_env(self.info(), |e| $crate::env::inject(env, e, template))
                    .map_err(|e| $crate::FrameworkError(e.to_string()))?;
                $($hooks)::+::decorate_pod(ctx, template)
            }

            fn success_policy(
                &self,
                _job: &$job,
                specs: &::std::collections::BTreeMap<::std::string::String, $crate::api::ReplicaSpec>,
            ) -> $crate::policy::SuccessPolicy {
                $(
                    if specs.contains_key($role) {
                        return $crate::policy::SuccessPolicy::$kind($role.to_owned());
                    }
                )*
                $crate::policy::SuccessPolicy::master_else_all(self.info(), specs)
            }

            fn update_status(&self, job: &$job, update: &mut $crate::plan::StatusUpdate<'_, '_>) {
                let policy = self.success_policy(job, update.specs());
                $($hooks)::+::update_status(job, update, &policy);
            }
        }
    };
}
