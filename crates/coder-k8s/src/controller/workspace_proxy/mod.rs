//! CoderWorkspaceProxy: the pure core (`desired`) and the reconciler (`reconcile`).
pub mod desired;
pub mod reconcile;
