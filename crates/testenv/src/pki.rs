//! Certificates, keys and the admin token the control plane needs, written as PEM files.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

/// Name of the admin user in the token file; member of `system:masters`.
pub const ADMIN_USER: &str = "admin";

/// Paths of every PKI file, plus the values the harness needs in memory.
#[derive(Debug, Clone)]
pub struct Pki {
    /// Cluster CA: signs the serving certificate; also the `--client-ca-file`.
    pub ca_cert: PathBuf,
    pub ca_key: PathBuf,
    /// PEM of the cluster CA, for kubeconfigs and clients.
    pub ca_pem: String,
    /// DER of the cluster CA, for kube clients.
    pub ca_der: Vec<u8>,
    pub apiserver_cert: PathBuf,
    pub apiserver_key: PathBuf,
    /// ServiceAccount token signing key pair (ECDSA P-256, signs ES256 tokens).
    pub sa_public_key: PathBuf,
    pub sa_private_key: PathBuf,
    /// Front-proxy CA: the `--requestheader-client-ca-file` extension API servers trust.
    pub front_proxy_ca_cert: PathBuf,
    pub front_proxy_ca_key: PathBuf,
    pub front_proxy_client_cert: PathBuf,
    pub front_proxy_client_key: PathBuf,
    /// `--token-auth-file` holding the admin token.
    pub token_file: PathBuf,
    /// Bearer token of the `admin` user.
    pub admin_token: String,
}

impl Pki {
    /// Generates everything into `dir` (created if missing).
    pub fn generate(dir: &Path) -> Result<Self> {
        fs::create_dir_all(dir).with_context(|| format!("creating PKI dir {}", dir.display()))?;
        let write = |name: &str, contents: &str| -> Result<PathBuf> {
            let path = dir.join(name);
            fs::write(&path, contents).with_context(|| format!("writing {}", path.display()))?;
            Ok(path)
        };

        let ca = new_ca("coder-k8s-testenv-ca")?;
        let ca_cert = write("ca.crt", &ca.issuer.pem())?;
        let ca_key = write("ca.key", &ca.issuer.key().serialize_pem())?;

        let serving_key = KeyPair::generate().context("generating apiserver key")?;
        let serving = leaf_params(
            "kube-apiserver",
            &[
                "127.0.0.1",
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
                // First IP of --service-cluster-ip-range: in-cluster clients reach the apiserver there.
                "10.0.0.1",
            ],
            ExtendedKeyUsagePurpose::ServerAuth,
        )?
        .signed_by(&serving_key, &ca.issuer)
        .context("signing apiserver certificate")?;
        let apiserver_cert = write("apiserver.crt", &serving.pem())?;
        let apiserver_key = write("apiserver.key", &serving_key.serialize_pem())?;

        let sa = KeyPair::generate().context("generating service account key")?;
        let sa_public_key = write("sa.pub", &sa.public_key_pem())?;
        let sa_private_key = write("sa.key", &sa.serialize_pem())?;

        let front_proxy_ca = new_ca("front-proxy-ca")?;
        let front_proxy_ca_cert = write("front-proxy-ca.crt", &front_proxy_ca.issuer.pem())?;
        let front_proxy_ca_key = write("front-proxy-ca.key", &front_proxy_ca.issuer.key().serialize_pem())?;
        let proxy_key = KeyPair::generate().context("generating front-proxy client key")?;
        let proxy = leaf_params("front-proxy-client", &[], ExtendedKeyUsagePurpose::ClientAuth)?
            .signed_by(&proxy_key, &front_proxy_ca.issuer)
            .context("signing front-proxy client certificate")?;
        let front_proxy_client_cert = write("front-proxy-client.crt", &proxy.pem())?;
        let front_proxy_client_key = write("front-proxy-client.key", &proxy_key.serialize_pem())?;

        let admin_token = random_hex(32)?;
        let token_file = write(
            "tokens.csv",
            &format!("{admin_token},{ADMIN_USER},{ADMIN_USER},\"system:masters\"\n"),
        )?;

        Ok(Self {
            ca_pem: ca.issuer.pem(),
            ca_der: ca.issuer.der().to_vec(),
            ca_cert,
            ca_key,
            apiserver_cert,
            apiserver_key,
            sa_public_key,
            sa_private_key,
            front_proxy_ca_cert,
            front_proxy_ca_key,
            front_proxy_client_cert,
            front_proxy_client_key,
            token_file,
            admin_token,
        })
    }
}

struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

fn new_ca(common_name: &str) -> Result<Ca> {
    let mut params = CertificateParams::new(Vec::<String>::new()).context("CA params")?;
    params.distinguished_name.push(DnType::CommonName, common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let key = KeyPair::generate().context("generating CA key")?;
    let issuer =
        CertifiedIssuer::self_signed(params, key).with_context(|| format!("self-signing {common_name}"))?;
    Ok(Ca { issuer })
}

fn leaf_params(
    common_name: &str,
    sans: &[&str],
    usage: ExtendedKeyUsagePurpose,
) -> Result<CertificateParams> {
    let sans: Vec<String> = sans.iter().map(|s| (*s).to_owned()).collect();
    let mut params =
        CertificateParams::new(sans).with_context(|| format!("certificate params for {common_name}"))?;
    params.distinguished_name.push(DnType::CommonName, common_name);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![usage];
    params.use_authority_key_identifier_extension = true;
    Ok(params)
}

/// PEMs of a server certificate for `sans` and its key, with the PEM of the fresh self-signed CA that signed it.
pub(crate) struct ServerTls {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

/// A fresh CA and a server certificate for `sans` signed by it (for example for a TLS PostgreSQL).
pub(crate) fn server_tls(common_name: &str, sans: &[&str]) -> Result<ServerTls> {
    let ca = new_ca(&format!("{common_name}-ca"))?;
    let key = KeyPair::generate().context("generating server key")?;
    let cert = leaf_params(common_name, sans, ExtendedKeyUsagePurpose::ServerAuth)?
        .signed_by(&key, &ca.issuer)
        .with_context(|| format!("signing the {common_name} certificate"))?;
    Ok(ServerTls {
        ca_pem: ca.issuer.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// The PEM of a fresh self-signed CA that signed nothing (to test that a wrong CA is refused).
pub(crate) fn unrelated_ca_pem(common_name: &str) -> Result<String> {
    Ok(new_ca(common_name)?.issuer.pem())
}

/// `len` random bytes from the OS, hex-encoded.
pub(crate) fn random_hex(len: usize) -> Result<String> {
    let mut bytes = vec![0u8; len];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("reading OS randomness: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_all_files() {
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki::generate(dir.path()).unwrap();
        for path in [
            &pki.ca_cert,
            &pki.apiserver_cert,
            &pki.apiserver_key,
            &pki.sa_public_key,
            &pki.sa_private_key,
            &pki.front_proxy_ca_cert,
            &pki.front_proxy_client_cert,
            &pki.front_proxy_client_key,
            &pki.token_file,
        ] {
            assert!(path.is_file(), "{} missing", path.display());
        }
        assert_eq!(pki.admin_token.len(), 64);
        let tokens = fs::read_to_string(&pki.token_file).unwrap();
        assert!(tokens.ends_with(",admin,admin,\"system:masters\"\n"));
        assert!(pki.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
    }
}
