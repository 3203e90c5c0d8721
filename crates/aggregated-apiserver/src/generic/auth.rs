//! Who is calling and may they: the identity a request carries after authentication, the attributes an
//! authorizer decides on, and the two traits the server calls. Implementations: [`super::authn`] (front-proxy
//! certificates, TokenReview, client certificates) and [`super::authz`] (SubjectAccessReview); tests inject their own.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use axum::http::HeaderMap;
use rustls_pki_types::CertificateDer;

use super::status::ApiError;

/// An authenticated caller, as Kubernetes describes users.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// The client certificate chain a TLS connection presented (leaf first), put into each request's extensions by
/// the TLS accept loop. Absent on connections without a client certificate.
#[derive(Clone, Debug)]
pub struct PeerCertificates(pub Arc<Vec<CertificateDer<'static>>>);

/// Establishes who sent a request.
#[async_trait]
pub trait Authenticator: Send + Sync {
    /// The caller, or `None` when the request carries no credential this authenticator accepts (the server
    /// answers 401). Errors are for failures to decide (e.g. TokenReview unreachable): the server fails closed.
    async fn authenticate(
        &self,
        peer: Option<&PeerCertificates>,
        headers: &HeaderMap,
    ) -> Result<Option<UserInfo>, ApiError>;
}

/// What a request wants to do, in SubjectAccessReview terms.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Attributes {
    pub user: UserInfo,
    /// Kubernetes verb: get, list, watch, create, update, patch, delete, deletecollection (or the HTTP verb in
    /// lower case for non-resource requests).
    pub verb: String,
    /// Resource requests: group, version, resource, subresource, namespace, name. Empty strings when absent.
    pub resource: Option<ResourceAttributes>,
    /// Non-resource requests: the path.
    pub path: Option<String>,
}

/// The resource part of [`Attributes`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ResourceAttributes {
    pub group: String,
    pub version: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
}

/// An authorizer's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Denied, with the reason the authorizer gave (may be empty).
    Deny(String),
}

/// Decides whether a request may proceed.
#[async_trait]
pub trait Authorizer: Send + Sync {
    /// Errors are failures to decide; the server fails closed.
    async fn authorize(&self, attributes: &Attributes) -> Result<Decision, ApiError>;
}
