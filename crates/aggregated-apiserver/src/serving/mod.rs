//! The serving certificate and the trust kube-apiserver places in it: the Secret `coder-k8s-apiserver-tls`
//! (created, validated, renewed in place and hot-reloaded) and the APIService `caBundle` controller.

pub mod apiservice;
pub mod ca_bundle;
pub mod cert_secret;
pub mod material;

pub use ca_bundle::{run_ca_bundle_controller, run_ca_bundle_controller_for};
pub use cert_secret::{
    RENEWAL_CHECK_INTERVAL, ServingMaterial, ServingSettings, load_or_create, run_renewal, run_renewal_every,
    self_signed_localhost,
};
