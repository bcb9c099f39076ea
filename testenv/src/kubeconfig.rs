//! Admin kubeconfigs for the local plane and clients built from any kubeconfig file.
use std::path::Path;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::{Error, Result};

/// Writes a kubeconfig for `server` trusting `ca_cert` and authenticating with `token`.
/// Values are JSON-quoted, which YAML reads as plain strings whatever they contain.
pub(crate) fn write_admin(path: &Path, server: &str, ca_cert: &Path, token: &str) -> Result<()> {
    let q = |s: &str| serde_json::Value::from(s).to_string();
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: kfop-local\n  cluster:\n    server: {server}\n    \
         certificate-authority: {ca}\nusers:\n- name: kfop-admin\n  user:\n    token: {token}\ncontexts:\n\
         - name: kfop-local\n  context:\n    cluster: kfop-local\n    user: kfop-admin\n\
         current-context: kfop-local\n",
        server = q(server),
        ca = q(&ca_cert.to_string_lossy()),
        token = q(token),
    );
    std::fs::write(path, text).map_err(Error::io(path))
}

/// Writes to `to` the kubeconfig at `from` with every user acting as `user` in `groups`
/// (impersonation), so the API server authorizes requests as that identity would be.
/// JSON is YAML, so the copy stays a valid kubeconfig.
pub(crate) fn write_impersonating(from: &Path, to: &Path, user: &str, groups: &[String]) -> Result<()> {
    let invalid = |message: String| Error::Kubeconfig {
        path: from.to_owned(),
        message,
    };
    let mut kubeconfig = Kubeconfig::read_from(from).map_err(|e| invalid(e.to_string()))?;
    for named in &mut kubeconfig.auth_infos {
        if let Some(auth) = &mut named.auth_info {
            auth.impersonate = Some(user.to_owned());
            auth.impersonate_groups = Some(groups.to_vec());
        }
    }
    let text = serde_json::to_string_pretty(&kubeconfig).map_err(|e| invalid(e.to_string()))?;
    std::fs::write(to, text).map_err(Error::io(to))
}

/// The kubeconfig at `path` with each cluster's CA file inlined (`certificate-authority-data`),
/// as a program elsewhere reads it from a Secret: Kueue's MultiKueue refuses file paths.
pub(crate) fn self_contained(path: &Path) -> Result<String> {
    let invalid = |message: String| Error::Kubeconfig {
        path: path.to_owned(),
        message,
    };
    let mut kubeconfig = Kubeconfig::read_from(path).map_err(|e| invalid(e.to_string()))?;
    for named in &mut kubeconfig.clusters {
        let Some(cluster) = &mut named.cluster else {
            continue;
        };
        if let Some(file) = cluster.certificate_authority.take() {
            let pem = std::fs::read(&file).map_err(Error::io(&file))?;
            // ByteString serializes as base64, the encoding `*-data` fields take.
            let data =
                serde_json::to_value(k8s_openapi::ByteString(pem)).map_err(|e| invalid(e.to_string()))?;
            cluster.certificate_authority_data = data.as_str().map(str::to_owned);
        }
    }
    serde_json::to_string_pretty(&kubeconfig).map_err(|e| invalid(e.to_string()))
}

/// A client for the current context of the kubeconfig at `path`.
pub(crate) async fn client_from(path: &Path) -> Result<Client> {
    let config = config_from(path).await?;
    Client::try_from(config).map_err(Error::kube(format!("building a client from {}", path.display())))
}

pub(crate) async fn config_from(path: &Path) -> Result<Config> {
    let invalid = |message: String| Error::Kubeconfig {
        path: path.to_owned(),
        message,
    };
    let kubeconfig = Kubeconfig::read_from(path).map_err(|e| invalid(e.to_string()))?;
    Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| invalid(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ca_file_is_inlined() {
        let dir = std::env::temp_dir().join(format!("kfop-kubeconfig-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (ca, path) = (dir.join("ca.crt"), dir.join("admin.kubeconfig"));
        std::fs::write(&ca, "PEM").unwrap();
        write_admin(&path, "https://127.0.0.1:6443", &ca, "secret").unwrap();
        let text = self_contained(&path).unwrap();
        let inlined = Kubeconfig::from_yaml(&text).unwrap();
        let cluster = inlined.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.certificate_authority, None);
        assert_eq!(cluster.certificate_authority_data.as_deref(), Some("UEVN"));
        assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:6443"));
        assert!(text.contains("secret"), "the token stays: {text}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
