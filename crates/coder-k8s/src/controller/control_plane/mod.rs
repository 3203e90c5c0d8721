//! CoderControlPlane. Built so far: the pure core — names and labels (`names`) and the desired objects
//! (`desired`). The reconciler that applies them is not built yet.
pub mod desired;
pub mod names;
