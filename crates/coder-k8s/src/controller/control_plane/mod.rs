//! CoderControlPlane: the pure core — names and labels (`names`), the desired objects (`desired`), the condition
//! decisions (`status`) — and the reconciler that applies it (`reconcile`).
pub mod desired;
pub mod names;
pub mod reconcile;
pub mod status;
