//! CoderProvisioner: the pure core — names and desired objects (`desired`) — and the reconciler (`reconcile`).
pub mod desired;
pub mod reconcile;
