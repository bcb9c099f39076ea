{{ header }}
//! The {{ m.framework_type() }} framework's code, for what `kfop.yaml` cannot say. Every method of
//! `Framework` has a default; override only what you need (see the trait's documentation).
//! Configuration goes in the struct: the operator's `main` constructs it.
use kfop_runtime::k8s_openapi::api::core::v1::PodTemplateSpec;
use kfop_runtime::{Framework, FrameworkError, PodContext};

use crate::api::{{ m.kind }};

/// The {{ m.kind }} framework's code and its configuration.
#[derive(Debug, Clone, Default)]
pub struct {{ m.framework_type() }};

impl Framework for {{ m.framework_type() }} {
    type Job = {{ m.kind }};

    /// Called for every pod before it is created, after the manifest's environment was injected.
    fn decorate_pod(&self, ctx: &PodContext<'_, {{ m.kind }}>, template: &mut PodTemplateSpec) -> Result<(), FrameworkError> {
        let _ = (ctx, template);
        Ok(())
    }
}
