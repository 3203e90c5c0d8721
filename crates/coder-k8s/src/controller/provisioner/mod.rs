//! CoderProvisioner. Built so far: the pure core — names and the desired ServiceAccount, Role, RoleBinding and
//! Deployment (`desired`). Key management against Coder and the reconciler are not built yet.
pub mod desired;
