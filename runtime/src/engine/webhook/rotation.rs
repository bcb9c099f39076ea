//! When the webhook's certificate changes, as a pure decision over what the Secret holds.
//!
//! A rotation has two steps so that no request ever meets a certificate the API server does not
//! trust yet: *stage* puts a new CA first in the bundle (kept beside the current one) and the
//! new serving pair under `next.*`, while the current pair keeps serving; *promote* makes the
//! staged pair the serving one, but only once the CRD's `caBundle` equals the Secret's bundle and
//! a short grace has passed for the API server to pick it up. The old CA stays in the bundle
//! until the next rotation, so a replica still serving the old pair stays trusted.
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use super::certs::{self, CertError, Issued};

/// The Secret's data keys (`tls.crt`/`tls.key` as in a `kubernetes.io/tls` Secret).
pub const CA_BUNDLE: &str = "ca.crt";
pub const TLS_CERT: &str = "tls.crt";
pub const TLS_KEY: &str = "tls.key";
pub const NEXT_CERT: &str = "next.crt";
pub const NEXT_KEY: &str = "next.key";
/// The Secret's annotation: when the `next.*` pair was staged (Unix seconds).
pub const STAGED_AT: &str = "kfop.dev/webhook-cert-staged-at";

/// How long certificates live, and the timings that follow from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub validity: Duration,
}

impl Policy {
    /// A certificate is replaced once less than a third of its life is left: well before expiry,
    /// with room for an operator that was down for a while.
    pub fn renew_before(self) -> Duration {
        self.validity / 3
    }

    /// How long a staged CA sits in the CRD before its certificate serves.
    pub fn grace(self) -> Duration {
        (self.validity / 15).min(Duration::from_secs(5))
    }

    /// How often each replica looks at the Secret and the CRD.
    pub fn check_every(self) -> Duration {
        (self.validity / 10).clamp(Duration::from_secs(1), Duration::from_secs(60))
    }
}

/// A serving certificate and its key, PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair {
    pub cert: String,
    pub key: String,
}

/// What the Secret holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Material {
    /// The CAs the API server must trust, newest first.
    pub ca_bundle: String,
    /// The pair being served.
    pub serving: Pair,
    /// A staged pair, not served yet.
    pub next: Option<Pair>,
    pub staged_at: Option<SystemTime>,
}

/// The next write to the Secret, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Keep,
    /// Write this (a staged rotation, a promotion, or a replacement of a dead certificate).
    Write(Material),
}

impl Material {
    /// A Secret's first content: nothing is trusted yet, so the pair serves at once.
    pub fn fresh(issued: Issued) -> Self {
        Self {
            ca_bundle: issued.ca_pem,
            serving: Pair {
                cert: issued.cert_pem,
                key: issued.key_pem,
            },
            next: None,
            staged_at: None,
        }
    }

    /// Reads the Secret's data and annotations; `None` when a required key is missing.
    pub fn from_secret(
        data: &BTreeMap<String, String>,
        annotations: &BTreeMap<String, String>,
    ) -> Option<Self> {
        let get = |key: &str| data.get(key).filter(|v| !v.is_empty()).cloned();
        let next = match (get(NEXT_CERT), get(NEXT_KEY)) {
            (Some(cert), Some(key)) => Some(Pair { cert, key }),
            _ => None,
        };
        let staged_at = annotations
            .get(STAGED_AT)
            .and_then(|s| s.parse::<u64>().ok())
            .map(|s| SystemTime::UNIX_EPOCH + Duration::from_secs(s));
        Some(Self {
            ca_bundle: get(CA_BUNDLE)?,
            serving: Pair {
                cert: get(TLS_CERT)?,
                key: get(TLS_KEY)?,
            },
            next,
            staged_at,
        })
    }

    /// The Secret's data.
    pub fn data(&self) -> BTreeMap<String, String> {
        let mut data = BTreeMap::from([
            (CA_BUNDLE.to_owned(), self.ca_bundle.clone()),
            (TLS_CERT.to_owned(), self.serving.cert.clone()),
            (TLS_KEY.to_owned(), self.serving.key.clone()),
        ]);
        if let Some(next) = &self.next {
            data.insert(NEXT_CERT.to_owned(), next.cert.clone());
            data.insert(NEXT_KEY.to_owned(), next.key.clone());
        }
        data
    }

    /// The value of [`STAGED_AT`], if staged.
    pub fn staged_at_annotation(&self) -> Option<String> {
        self.staged_at
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map(|d| d.as_secs().to_string())
    }
}

/// What to write next, given the Secret's content, the CRD's current `caBundle` and the time;
/// `issue` makes a new CA and pair when one is needed.
pub fn next_step(
    current: &Material,
    crd_bundle: Option<&str>,
    policy: Policy,
    now: SystemTime,
    issue: impl FnOnce() -> Result<Issued, CertError>,
) -> Result<Step, CertError> {
    if let Some(next) = &current.next {
        if certs::not_after(&next.cert).map_or(true, |at| at <= now) {
            // Staged so long ago (the operator was down) that it expired: start again.
            return Ok(Step::Write(Material::fresh(issue()?)));
        }
        let trusted = crd_bundle == Some(current.ca_bundle.as_str());
        let settled = current.staged_at.is_none_or(|at| at + policy.grace() <= now);
        if !(trusted && settled) {
            return Ok(Step::Keep);
        }
        return Ok(Step::Write(Material {
            ca_bundle: current.ca_bundle.clone(),
            serving: next.clone(),
            next: None,
            staged_at: None,
        }));
    }
    let expires = certs::not_after(&current.serving.cert).ok();
    let Some(expires) = expires.filter(|at| *at > now) else {
        // Nothing valid is served, so there is nothing to keep trusted: replace at once.
        return Ok(Step::Write(Material::fresh(issue()?)));
    };
    if now + policy.renew_before() < expires {
        return Ok(Step::Keep);
    }
    let issued = issue()?;
    let current_ca = certs::pem_blocks(&current.ca_bundle)
        .into_iter()
        .next()
        .unwrap_or_default();
    Ok(Step::Write(Material {
        ca_bundle: format!("{}{current_ca}", issued.ca_pem),
        serving: current.serving.clone(),
        next: Some(Pair {
            cert: issued.cert_pem,
            key: issued.key_pem,
        }),
        staged_at: Some(now),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);

    fn policy() -> Policy {
        Policy { validity: 3 * HOUR }
    }

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_900_000_000 + secs)
    }

    fn issue_at(t: SystemTime) -> Issued {
        certs::issue(&["127.0.0.1".into()], policy().validity, t).unwrap()
    }

    #[test]
    fn keeps_a_young_certificate() {
        let m = Material::fresh(issue_at(at(0)));
        let step = next_step(&m, Some(&m.ca_bundle), policy(), at(3600), || unreachable!());
        assert_eq!(step.unwrap(), Step::Keep);
    }

    #[test]
    fn stages_then_promotes_only_once_the_crd_trusts_the_new_ca() {
        let first = Material::fresh(issue_at(at(0)));
        // Two hours in, one hour (a third) is left: stage.
        let now = at(2 * 3600 + 1);
        let Step::Write(staged) = next_step(&first, Some(&first.ca_bundle), policy(), now, || {
            Ok(issue_at(now))
        })
        .unwrap() else {
            panic!("expected a staged rotation");
        };
        assert_eq!(staged.serving, first.serving, "the old pair keeps serving");
        let blocks = certs::pem_blocks(&staged.ca_bundle);
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[1], first.ca_bundle);
        let next = staged.next.clone().unwrap();

        // The CRD still has the old bundle: wait.
        let later = now + Duration::from_secs(60);
        let step = next_step(
            &staged,
            Some(&first.ca_bundle),
            policy(),
            later,
            || unreachable!(),
        );
        assert_eq!(step.unwrap(), Step::Keep);
        // Trusted but within the grace: wait.
        let step = next_step(&staged, Some(&staged.ca_bundle), policy(), now, || unreachable!());
        assert_eq!(step.unwrap(), Step::Keep);
        // Trusted and settled: promote, keeping both CAs.
        let Step::Write(promoted) = next_step(
            &staged,
            Some(&staged.ca_bundle),
            policy(),
            later,
            || unreachable!(),
        )
        .unwrap() else {
            panic!("expected a promotion");
        };
        assert_eq!(promoted.serving, next);
        assert_eq!(promoted.next, None);
        assert_eq!(promoted.ca_bundle, staged.ca_bundle);

        // The next rotation drops the oldest CA.
        let much_later = at(4 * 3600 + 2);
        let Step::Write(again) =
            next_step(&promoted, Some(&promoted.ca_bundle), policy(), much_later, || {
                Ok(issue_at(much_later))
            })
            .unwrap()
        else {
            panic!("expected a second rotation");
        };
        let blocks = certs::pem_blocks(&again.ca_bundle);
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[1], certs::pem_blocks(&promoted.ca_bundle)[0]);
    }

    #[test]
    fn an_expired_or_broken_certificate_is_replaced_at_once() {
        let old = Material::fresh(issue_at(at(0)));
        let now = at(4 * 3600);
        let Step::Write(m) = next_step(&old, None, policy(), now, || Ok(issue_at(now))).unwrap() else {
            panic!("expected a replacement");
        };
        assert_eq!(m.next, None);
        assert_eq!(certs::pem_blocks(&m.ca_bundle).len(), 1);

        let mut broken = old.clone();
        broken.serving.cert = "garbage".into();
        let step = next_step(&broken, None, policy(), at(1), || Ok(issue_at(at(1)))).unwrap();
        assert!(matches!(step, Step::Write(m) if m.next.is_none()));
    }

    #[test]
    fn an_expired_staged_pair_is_never_promoted() {
        let first = Material::fresh(issue_at(at(0)));
        let staged_at = at(2 * 3600 + 1);
        let Step::Write(staged) =
            next_step(&first, None, policy(), staged_at, || Ok(issue_at(staged_at))).unwrap()
        else {
            panic!("expected a staged rotation");
        };
        let long_after = at(10 * 3600);
        let Step::Write(m) = next_step(&staged, Some(&staged.ca_bundle), policy(), long_after, || {
            Ok(issue_at(long_after))
        })
        .unwrap() else {
            panic!("expected a replacement");
        };
        assert_eq!(m.next, None);
        assert_eq!(
            certs::not_after(&m.serving.cert).unwrap(),
            long_after + policy().validity
        );
    }

    #[test]
    fn secret_round_trip() {
        let now = at(2 * 3600 + 1);
        let first = Material::fresh(issue_at(at(0)));
        let Step::Write(staged) = next_step(&first, None, policy(), now, || Ok(issue_at(now))).unwrap()
        else {
            panic!("expected a staged rotation");
        };
        let annotations = BTreeMap::from([(STAGED_AT.to_owned(), staged.staged_at_annotation().unwrap())]);
        assert_eq!(Material::from_secret(&staged.data(), &annotations), Some(staged));
        assert_eq!(Material::from_secret(&BTreeMap::new(), &BTreeMap::new()), None);
    }

    #[test]
    fn timings_scale_with_validity() {
        let short = Policy {
            validity: Duration::from_secs(30),
        };
        assert_eq!(short.renew_before(), Duration::from_secs(10));
        assert_eq!(short.grace(), Duration::from_secs(2));
        assert_eq!(short.check_every(), Duration::from_secs(3));
        let year = Policy {
            validity: 8760 * HOUR,
        };
        assert_eq!(year.check_every(), Duration::from_secs(60));
        assert_eq!(year.grace(), Duration::from_secs(5));
    }
}
