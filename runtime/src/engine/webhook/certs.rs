//! Certificates for the webhook's HTTPS listener, made here (no cert-manager): a fresh
//! self-signed CA per rotation, a serving certificate it signs, and the CA's key thrown away
//! once the serving certificate is signed, so nothing can issue more.
use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

/// Clock skew between the operator and the API server that a new certificate tolerates.
const SKEW: Duration = Duration::from_secs(60);

/// Why a certificate could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("could not issue the webhook certificate: {0}")]
    Issue(#[from] rcgen::Error),
    #[error("the webhook certificate's validity {0:?} is out of range")]
    Validity(Duration),
    #[error("the stored webhook certificate is not PEM X.509: {0}")]
    Parse(String),
}

/// A CA certificate and the serving certificate and key it signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issued {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

/// Issues a CA and a serving certificate for `hosts` (DNS names or IP addresses), both valid
/// from a minute before `now` for `validity` after it.
pub fn issue(hosts: &[String], validity: Duration, now: SystemTime) -> Result<Issued, CertError> {
    let not_before = now.checked_sub(SKEW).unwrap_or(now);
    let not_after = now.checked_add(validity).ok_or(CertError::Validity(validity))?;
    let (not_before, not_after) = (
        time::OffsetDateTime::from(not_before),
        time::OffsetDateTime::from(not_after),
    );

    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.distinguished_name.push(DnType::CommonName, "kfop-webhook-ca");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    ca.not_before = not_before;
    ca.not_after = not_after;
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate()?)?;

    let key = KeyPair::generate()?;
    let mut serving = CertificateParams::new(hosts.to_vec())?;
    serving.distinguished_name.push(
        DnType::CommonName,
        hosts.first().map_or("kfop-webhook", String::as_str),
    );
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    serving.not_before = not_before;
    serving.not_after = not_after;
    let cert = serving.signed_by(&key, &ca)?;
    Ok(Issued {
        ca_pem: ca.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// When the first certificate in `pem` expires.
pub fn not_after(pem: &str) -> Result<SystemTime, CertError> {
    let (_, block) =
        x509_parser::pem::parse_x509_pem(pem.as_bytes()).map_err(|e| CertError::Parse(e.to_string()))?;
    let cert = block.parse_x509().map_err(|e| CertError::Parse(e.to_string()))?;
    let seconds = cert.validity().not_after.timestamp();
    let seconds = u64::try_from(seconds).map_err(|_| CertError::Parse(format!("expiry {seconds}")))?;
    Ok(SystemTime::UNIX_EPOCH + Duration::from_secs(seconds))
}

/// The PEM blocks of `bundle`, each with its trailing newline.
pub fn pem_blocks(bundle: &str) -> Vec<String> {
    const END: &str = "-----END CERTIFICATE-----";
    bundle
        .split_inclusive(END)
        .map(str::trim)
        .filter(|block| block.ends_with(END))
        .map(|block| format!("{block}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issues_a_chain_that_expires_when_asked() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_900_000_000);
        let issued = issue(&["127.0.0.1".into()], Duration::from_secs(3600), now).unwrap();
        assert_eq!(
            not_after(&issued.cert_pem).unwrap(),
            now + Duration::from_secs(3600)
        );
        assert_eq!(
            not_after(&issued.ca_pem).unwrap(),
            now + Duration::from_secs(3600)
        );
        assert_ne!(issued.ca_pem, issued.cert_pem);
        let bundle = format!("{}{}", issued.ca_pem, issued.cert_pem);
        assert_eq!(pem_blocks(&bundle), [issued.ca_pem, issued.cert_pem]);
    }

    #[test]
    fn garbage_is_a_parse_error() {
        assert!(matches!(not_after("not a cert"), Err(CertError::Parse(_))));
        assert!(pem_blocks("junk").is_empty());
    }
}
