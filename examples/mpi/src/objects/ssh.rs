//! The per-job SSH key pair, as mpi-operator makes it: ECDSA P-521, the private key as a SEC1
//! `EC PRIVATE KEY` PEM and the public key in OpenSSH's authorized_keys form. The OpenSSH wire
//! encoding is three length-prefixed strings, written here rather than pulling in an SSH crate.
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use p521::elliptic_curve::pkcs8::AssociatedOid;
use p521::elliptic_curve::rand_core::OsRng;
use p521::elliptic_curve::sec1::ToEncodedPoint;
use sec1::der::Encode;

use kfop_runtime::FrameworkError;

/// `(private key PEM, public key line)`.
pub fn key_pair() -> Result<(String, String), FrameworkError> {
    let key = p521::SecretKey::random(&mut OsRng);
    let point = key.public_key().to_encoded_point(false);
    let secret = key.to_bytes();
    let der = sec1::EcPrivateKey {
        private_key: &secret,
        parameters: Some(sec1::EcParameters::NamedCurve(p521::NistP521::OID)),
        public_key: Some(point.as_bytes()),
    }
    .to_der()
    .map_err(|e| FrameworkError::with_source("encoding the SSH private key", e))?;
    Ok((pem("EC PRIVATE KEY", &der), authorized_key(point.as_bytes())))
}

fn pem(label: &str, der: &[u8]) -> String {
    let body = STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in body.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// `ecdsa-sha2-nistp521 <base64>\n`, Go's `ssh.MarshalAuthorizedKey`.
fn authorized_key(point: &[u8]) -> String {
    const ALGORITHM: &[u8] = b"ecdsa-sha2-nistp521";
    let mut blob = Vec::new();
    for part in [ALGORITHM, b"nistp521", point] {
        blob.extend_from_slice(&u32::try_from(part.len()).unwrap_or(u32::MAX).to_be_bytes());
        blob.extend_from_slice(part);
    }
    format!("ecdsa-sha2-nistp521 {}\n", STANDARD.encode(blob))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_have_openssh_shapes_and_differ() {
        let (private, public) = key_pair().unwrap();
        assert!(private.starts_with("-----BEGIN EC PRIVATE KEY-----\n"));
        assert!(private.ends_with("-----END EC PRIVATE KEY-----\n"));
        assert!(private.lines().all(|l| l.len() <= 64));
        assert!(public.starts_with("ecdsa-sha2-nistp521 AAAAE2VjZHNhLXNoYTItbmlzdHA1MjEAAAAIbmlzdHA1MjE"));
        assert!(public.ends_with('\n'));
        assert_ne!(key_pair().unwrap().0, private);
    }
}
