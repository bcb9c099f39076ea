//! Certificates and credentials for one control plane: a CA, the API server's serving cert, the
//! service-account signing key and an admin bearer token.
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

use crate::{Error, Result};

/// Paths of the files written by [`Pki::write`].
#[derive(Debug, Clone)]
pub(crate) struct Pki {
    pub ca_cert: PathBuf,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    pub sa_key: PathBuf,
    pub sa_pub: PathBuf,
    pub token_file: PathBuf,
    pub admin_token: String,
}

impl Pki {
    pub fn write(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(Error::io(dir))?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "kfop-testenv-ca");
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;

        let serving_key = KeyPair::generate()?;
        let mut serving = CertificateParams::new(vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "kubernetes.default.svc".to_owned(),
        ])?;
        serving
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let serving_cert = serving.signed_by(&serving_key, &ca)?;

        let sa = KeyPair::generate()?;
        let mut secret = [0u8; 24];
        getrandom::fill(&mut secret).map_err(|e| Error::Io {
            path: dir.to_owned(),
            source: std::io::Error::other(format!("no randomness for the admin token: {e}")),
        })?;
        let admin_token: String = secret.iter().map(|b| format!("{b:02x}")).collect();

        let pki = Self {
            ca_cert: dir.join("ca.crt"),
            serving_cert: dir.join("apiserver.crt"),
            serving_key: dir.join("apiserver.key"),
            sa_key: dir.join("sa.key"),
            sa_pub: dir.join("sa.pub"),
            token_file: dir.join("tokens.csv"),
            admin_token,
        };
        write(&pki.ca_cert, &ca.pem())?;
        write(&pki.serving_cert, &serving_cert.pem())?;
        write(&pki.serving_key, &serving_key.serialize_pem())?;
        write(&pki.sa_key, &sa.serialize_pem())?;
        write(&pki.sa_pub, &sa.public_key_pem())?;
        write(
            &pki.token_file,
            &format!("{},admin,admin,\"system:masters\"\n", pki.admin_token),
        )?;
        Ok(pki)
    }
}

fn write(path: &Path, contents: &str) -> Result<()> {
    std::fs::write(path, contents).map_err(Error::io(path))
}
