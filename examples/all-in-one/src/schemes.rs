//! `--enable-scheme`: which job kinds the operator runs (Kubeflow's flag, case-insensitive).
use std::collections::BTreeSet;

/// The bundled job kinds, by the lower-case name `--enable-scheme` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scheme {
    TfJob,
    PyTorchJob,
    XgBoostJob,
    PaddleJob,
    JaxJob,
    MxJob,
    MpiJob,
}

impl Scheme {
    pub const ALL: [(&'static str, Self); 7] = [
        ("tfjob", Self::TfJob),
        ("pytorchjob", Self::PyTorchJob),
        ("xgboostjob", Self::XgBoostJob),
        ("paddlejob", Self::PaddleJob),
        ("jaxjob", Self::JaxJob),
        ("mxjob", Self::MxJob),
        ("mpijob", Self::MpiJob),
    ];
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "--enable-scheme: unknown kind `{0}`; use any of tfjob, pytorchjob, xgboostjob, paddlejob, jaxjob, mxjob, mpijob"
)]
pub struct UnknownScheme(pub String);

/// The kinds to run: every one when the flag is absent, else those named (any letter case,
/// repeated or comma-separated).
pub fn parse(values: &[String]) -> Result<BTreeSet<Scheme>, UnknownScheme> {
    if values.is_empty() {
        return Ok(Scheme::ALL.iter().map(|(_, s)| *s).collect());
    }
    values
        .iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(|v| {
            Scheme::ALL
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(v))
                .map(|(_, s)| *s)
                .ok_or_else(|| UnknownScheme(v.to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_by_default_and_case_insensitive() {
        assert_eq!(parse(&[]).unwrap().len(), 7);
        let s = parse(&["TFJob".into(), "pytorchjob,JAXJOB".into()]).unwrap();
        assert_eq!(
            s.into_iter().collect::<Vec<_>>(),
            [Scheme::TfJob, Scheme::PyTorchJob, Scheme::JaxJob]
        );
        assert_eq!(parse(&["MPIJob".into()]).unwrap(), [Scheme::MpiJob].into());
        assert_eq!(parse(&["mpi".into()]).unwrap_err().0, "mpi");
    }
}
