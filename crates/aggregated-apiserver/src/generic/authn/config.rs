//! The authentication settings kube-apiserver publishes in `kube-system/extension-apiserver-authentication`,
//! parsed from the ConfigMap's data into CA certificates and header names.

use std::collections::BTreeMap;

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use sha2::{Digest, Sha256};

pub(crate) const CLIENT_CA_KEY: &str = "client-ca-file";
pub(crate) const REQUESTHEADER_CA_KEY: &str = "requestheader-client-ca-file";
pub(crate) const ALLOWED_NAMES_KEY: &str = "requestheader-allowed-names";
pub(crate) const USERNAME_HEADERS_KEY: &str = "requestheader-username-headers";
pub(crate) const UID_HEADERS_KEY: &str = "requestheader-uid-headers";
pub(crate) const GROUP_HEADERS_KEY: &str = "requestheader-group-headers";
pub(crate) const EXTRA_PREFIXES_KEY: &str = "requestheader-extra-headers-prefix";

/// Everything authentication takes from the ConfigMap.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct AuthConfig {
    /// CAs of client certificates that authenticate as their CN (user) and O (groups). `None` when unset.
    pub client_ca: Option<Vec<CertificateDer<'static>>>,
    /// The front proxy (kube-apiserver's aggregator) settings. `None` when no requestheader CA is set.
    pub request_header: Option<RequestHeaderConfig>,
}

/// Who may assert an identity through request headers, and which headers carry it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RequestHeaderConfig {
    pub ca: Vec<CertificateDer<'static>>,
    /// Common names the proxy's certificate may have; empty allows any certificate of the CA.
    pub allowed_names: Vec<String>,
    pub username_headers: Vec<String>,
    pub uid_headers: Vec<String>,
    pub group_headers: Vec<String>,
    pub extra_prefixes: Vec<String>,
}

impl AuthConfig {
    /// Parses the ConfigMap's `data`. Errors name the key, e.g. `data["requestheader-allowed-names"] is not a JSON
    /// array of strings`.
    pub(crate) fn parse(data: &BTreeMap<String, String>) -> Result<Self, String> {
        let client_ca = optional_ca(data, CLIENT_CA_KEY)?;
        let request_header = match optional_ca(data, REQUESTHEADER_CA_KEY)? {
            None => None,
            Some(ca) => Some(RequestHeaderConfig {
                ca,
                allowed_names: string_list(data, ALLOWED_NAMES_KEY)?,
                username_headers: string_list(data, USERNAME_HEADERS_KEY)?,
                uid_headers: string_list(data, UID_HEADERS_KEY)?,
                group_headers: string_list(data, GROUP_HEADERS_KEY)?,
                extra_prefixes: string_list(data, EXTRA_PREFIXES_KEY)?,
            }),
        };
        Ok(Self {
            client_ca,
            request_header,
        })
    }

    /// A one-line description for logs: CA fingerprints and header names (nothing secret is in the ConfigMap,
    /// but certificates are summarised rather than printed).
    pub(crate) fn summary(&self) -> String {
        let client = self
            .client_ca
            .as_deref()
            .map_or_else(|| "none".to_owned(), fingerprints);
        match &self.request_header {
            None => format!("client CA {client}; requestheader CA none"),
            Some(rh) => format!(
                "client CA {client}; requestheader CA {}, allowed names {:?}, username headers {:?}, uid headers \
                 {:?}, group headers {:?}, extra prefixes {:?}",
                fingerprints(&rh.ca),
                rh.allowed_names,
                rh.username_headers,
                rh.uid_headers,
                rh.group_headers,
                rh.extra_prefixes
            ),
        }
    }
}

fn optional_ca(
    data: &BTreeMap<String, String>,
    key: &str,
) -> Result<Option<Vec<CertificateDer<'static>>>, String> {
    let Some(pem) = data.get(key).filter(|pem| !pem.trim().is_empty()) else {
        return Ok(None);
    };
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| format!("data[{key:?}] is not valid PEM"))?;
    if certs.is_empty() {
        return Err(format!("data[{key:?}] holds no PEM certificate"));
    }
    Ok(Some(certs))
}

/// A JSON array of strings; a missing or empty value is an empty list.
fn string_list(data: &BTreeMap<String, String>, key: &str) -> Result<Vec<String>, String> {
    match data.get(key).map(|value| value.trim()) {
        None | Some("") => Ok(Vec::new()),
        Some(json) => {
            serde_json::from_str(json).map_err(|_| format!("data[{key:?}] is not a JSON array of strings"))
        }
    }
}

/// The first 16 hex digits of each certificate's SHA-256.
fn fingerprints(certs: &[CertificateDer<'_>]) -> String {
    let prints: Vec<String> = certs
        .iter()
        .map(|cert| {
            Sha256::digest(cert.as_ref())
                .iter()
                .take(8)
                .map(|byte| format!("{byte:02x}"))
                .collect()
        })
        .collect();
    format!("sha256:[{}]", prints.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ca_pem(name: &str) -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, name);
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.self_signed(&key).unwrap().pem()
    }

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn parses_what_kube_apiserver_publishes() {
        let client = ca_pem("client-ca");
        let proxy = ca_pem("front-proxy-ca");
        let both = format!("{proxy}{client}");
        let config = AuthConfig::parse(&data(&[
            (CLIENT_CA_KEY, &client),
            (REQUESTHEADER_CA_KEY, &both),
            (ALLOWED_NAMES_KEY, r#"["front-proxy-client"]"#),
            (USERNAME_HEADERS_KEY, r#"["X-Remote-User"]"#),
            (UID_HEADERS_KEY, r#"["X-Remote-Uid"]"#),
            (GROUP_HEADERS_KEY, r#"["X-Remote-Group"]"#),
            (EXTRA_PREFIXES_KEY, r#"["X-Remote-Extra-"]"#),
        ]))
        .unwrap();
        assert_eq!(config.client_ca.as_ref().map(Vec::len), Some(1));
        let rh = config.request_header.as_ref().unwrap();
        assert_eq!(rh.ca.len(), 2);
        assert_eq!(rh.allowed_names, ["front-proxy-client"]);
        assert_eq!(rh.username_headers, ["X-Remote-User"]);
        assert_eq!(rh.uid_headers, ["X-Remote-Uid"]);
        assert_eq!(rh.group_headers, ["X-Remote-Group"]);
        assert_eq!(rh.extra_prefixes, ["X-Remote-Extra-"]);
        let summary = config.summary();
        assert!(
            summary.contains("allowed names [\"front-proxy-client\"]"),
            "{summary}"
        );
        assert!(!summary.contains("BEGIN CERTIFICATE"), "{summary}");
    }

    #[test]
    fn missing_keys_mean_no_such_trust() {
        assert_eq!(
            AuthConfig::parse(&BTreeMap::new()).unwrap(),
            AuthConfig::default()
        );
        let only_client = AuthConfig::parse(&data(&[
            (CLIENT_CA_KEY, &ca_pem("c")),
            (REQUESTHEADER_CA_KEY, ""),
        ]))
        .unwrap();
        assert!(only_client.client_ca.is_some());
        assert_eq!(only_client.request_header, None);
        let no_lists = AuthConfig::parse(&data(&[(REQUESTHEADER_CA_KEY, &ca_pem("p"))])).unwrap();
        assert_eq!(
            no_lists.request_header.unwrap().allowed_names,
            Vec::<String>::new()
        );
    }

    #[test]
    fn bad_values_name_the_key() {
        let proxy = ca_pem("p");
        assert_eq!(
            AuthConfig::parse(&data(&[
                (REQUESTHEADER_CA_KEY, &proxy),
                (ALLOWED_NAMES_KEY, "front-proxy-client")
            ])),
            Err(r#"data["requestheader-allowed-names"] is not a JSON array of strings"#.to_owned())
        );
        assert_eq!(
            AuthConfig::parse(&data(&[
                (REQUESTHEADER_CA_KEY, &proxy),
                (GROUP_HEADERS_KEY, "[1]")
            ])),
            Err(r#"data["requestheader-group-headers"] is not a JSON array of strings"#.to_owned())
        );
        assert_eq!(
            AuthConfig::parse(&data(&[(CLIENT_CA_KEY, "not a certificate")])),
            Err(r#"data["client-ca-file"] holds no PEM certificate"#.to_owned())
        );
    }
}
