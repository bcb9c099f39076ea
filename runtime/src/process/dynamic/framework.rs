//! A framework applied at run time: its manifest loaded as a compiled one is, with no code.
use super::job::RuntimeJob;
use crate::framework::{Framework, Loaded};
use crate::manifest::model::Model;
use crate::manifest::{LoadError, Manifest};

/// The code of a run-time framework: none, the manifest says everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoCode;

impl Framework for NoCode {
    type Job = RuntimeJob;
}

/// Why a valid manifest cannot run as a run-time framework.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeLoadError {
    #[error(
        "spec.hooks: a framework loaded at run time has no code; remove `hooks: true` or compile it with `kfop gen`"
    )]
    Hooks,
    #[error(transparent)]
    Load(#[from] LoadError),
}

/// The framework a validated manifest describes, to run without code.
pub fn load(model: &Model) -> Result<Loaded<NoCode>, RuntimeLoadError> {
    if model.hooks {
        return Err(RuntimeLoadError::Hooks);
    }
    Ok(Loaded::new(Manifest::from_model(model)?, NoCode))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::manifest::model::parse;

    const MANIFEST: &str = "apiVersion: kfop.dev/v1alpha1
kind: Framework
metadata:
  name: jaxlike
spec:
  group: example.com
  version: v1
  kind: JaxLikeJob
  container:
    name: jax
  roles:
    - name: Worker
      restartPolicy: Never
  status:
    rule: leaderOrFollowers
    followers: Worker
";

    #[test]
    fn the_job_kind_is_the_manifests() {
        let framework = load(&parse(MANIFEST, Path::new("jaxlike")).unwrap()).unwrap();
        let kind = framework.job_type();
        assert_eq!(<RuntimeJob as kube::Resource>::plural(kind), "jaxlikejobs");
        assert_eq!(
            <RuntimeJob as kube::Resource>::api_version(kind),
            "example.com/v1"
        );
    }

    #[test]
    fn hooks_are_refused_at_run_time() {
        let text = MANIFEST.replace("  status:\n", "  hooks: true\n  status:\n");
        let model = parse(&text, Path::new("jaxlike")).unwrap();
        let error = load(&model).unwrap_err().to_string();
        assert!(error.starts_with("spec.hooks:"), "{error}");
    }
}
