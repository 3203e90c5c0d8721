//! Integration tests of the `coder-k8s` binary and the CRDs, against a real etcd + kube-apiserver built from Go
//! modules (crates/testenv) and the real kubectl.
mod cli;
mod crds;
mod support;
