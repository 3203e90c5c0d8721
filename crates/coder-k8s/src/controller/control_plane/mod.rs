//! CoderControlPlane. Built so far: the pure core — names and labels (`names`) and the desired objects
//! (`desired`), and the condition decisions (`status`). The reconciler that applies them is not built yet.
pub mod desired;
pub mod names;
pub mod status;
