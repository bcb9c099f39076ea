{{ header }}
//! The {{ m.framework_type() }} framework's code, for what `kfop.yaml` cannot say. Every method of
//! `Hooks` has a default; override only what you need (see the trait's documentation).
use kfop_runtime::k8s_openapi::api::core::v1::PodTemplateSpec;
use kfop_runtime::{FrameworkError, Hooks, PodContext};

use crate::{{ m.framework_type() }};
use crate::api::{{ m.kind }};

impl Hooks for {{ m.framework_type() }} {
    /// Called for every pod before it is created, after the manifest's environment was injected.
    fn decorate_pod(&self, ctx: &PodContext<'_, {{ m.kind }}>, template: &mut PodTemplateSpec) -> Result<(), FrameworkError> {
        let _ = (ctx, template);
        Ok(())
    }
}
