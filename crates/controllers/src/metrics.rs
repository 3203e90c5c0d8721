//! Reconcile metrics of every controller: runs, duration and failures by bounded category.

use std::sync::Arc;
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailureLabels {
    kind: &'static str,
    category: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProvisionerJobLabels {
    namespace: String,
    name: String,
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RecordKindLabels {
    kind: String,
}

impl RecordKindLabels {
    fn of(kind: &str) -> Self {
        Self {
            kind: kind.to_owned(),
        }
    }
}

/// The reconcile metrics, registered once per process.
pub struct ReconcileMetrics {
    runs: Family<KindLabels, Counter>,
    template_tests: Family<ReasonLabels, Counter>,
    records_swept: Family<RecordKindLabels, Counter>,
    records_unmatched: Family<RecordKindLabels, Gauge>,
    released_without_delete: Family<RecordKindLabels, Counter>,
    failures: Family<FailureLabels, Counter>,
    duration: Family<KindLabels, Histogram>,
    provisioner_jobs: Family<ProvisionerJobLabels, Gauge>,
}

impl ReconcileMetrics {
    /// Registers `coder_k8s_reconcile_*` in `registry`.
    pub fn register(registry: &mut Registry) -> Arc<Self> {
        let metrics = Self {
            runs: Family::default(),
            template_tests: Family::default(),
            records_swept: Family::default(),
            records_unmatched: Family::default(),
            released_without_delete: Family::default(),
            failures: Family::default(),
            duration: Family::new_with_constructor(|| {
                Histogram::new([0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 60.0, 120.0])
            }),
            provisioner_jobs: Family::default(),
        };
        registry.register(
            "coder_k8s_reconcile_runs",
            "Reconciles started, by kind",
            metrics.runs.clone(),
        );
        registry.register(
            "coder_k8s_reconcile_failures",
            "Reconciles that failed, by kind and error category",
            metrics.failures.clone(),
        );
        registry.register(
            "coder_k8s_reconcile_duration_seconds",
            "Duration of reconciles, by kind",
            metrics.duration.clone(),
        );
        registry.register(
            "coder_k8s_template_test_runs",
            "CoderTemplateTest runs that ended, by final reason",
            metrics.template_tests.clone(),
        );
        registry.register(
            "coder_k8s_cleanup_records_swept",
            "Cleanup records whose leftovers the sweep deleted in Coder, by kind",
            metrics.records_swept.clone(),
        );
        registry.register(
            "coder_k8s_cleanup_records_unmatched",
            "Cleanup records of deleted objects that no ready control plane in their namespace matches, by kind",
            metrics.records_unmatched.clone(),
        );
        registry.register(
            "coder_k8s_cleanup_released_without_delete",
            "Finalizers released without a delete in Coder, by kind",
            metrics.released_without_delete.clone(),
        );
        registry.register(
            "coder_k8s_provisioner_jobs",
            "Coder's provisioner jobs a CoderProvisioner's daemons can take, by state (pending, running), for the objects that read the queue (spec.autoscaling)",
            metrics.provisioner_jobs.clone(),
        );
        Arc::new(metrics)
    }

    /// Sets the pending and running jobs of provisioner `namespace/name`.
    pub fn set_provisioner_jobs(&self, namespace: &str, name: &str, pending: i64, running: i64) {
        for (state, count) in [("pending", pending), ("running", running)] {
            self.provisioner_jobs
                .get_or_create(&ProvisionerJobLabels {
                    namespace: namespace.to_owned(),
                    name: name.to_owned(),
                    state,
                })
                .set(count);
        }
    }

    /// Drops the job series of provisioner `namespace/name` (it no longer reads the queue, or is gone).
    pub fn forget_provisioner_jobs(&self, namespace: &str, name: &str) {
        for state in ["pending", "running"] {
            self.provisioner_jobs.remove(&ProvisionerJobLabels {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                state,
            });
        }
    }

    /// The job counts last set for provisioner `namespace/name`: (pending, running).
    pub fn provisioner_jobs(&self, namespace: &str, name: &str) -> (i64, i64) {
        let get = |state| {
            self.provisioner_jobs
                .get_or_create(&ProvisionerJobLabels {
                    namespace: namespace.to_owned(),
                    name: name.to_owned(),
                    state,
                })
                .get()
        };
        (get("pending"), get("running"))
    }

    /// Counts a cleanup record the sweep finished.
    pub fn cleanup_record_swept(&self, kind: &str) {
        self.records_swept
            .get_or_create(&RecordKindLabels::of(kind))
            .inc();
    }

    /// Sets the number of unmatched cleanup records of `kind`.
    pub fn set_cleanup_records_unmatched(&self, kind: &str, count: i64) {
        self.records_unmatched
            .get_or_create(&RecordKindLabels::of(kind))
            .set(count);
    }

    /// Counts a finalizer released without a delete in Coder.
    pub fn cleanup_released_without_delete(&self, kind: &str) {
        self.released_without_delete
            .get_or_create(&RecordKindLabels::of(kind))
            .inc();
    }

    /// The cleanup metrics of `kind`: swept, unmatched, released without a delete.
    pub fn cleanup_counts(&self, kind: &str) -> (u64, i64, u64) {
        let labels = RecordKindLabels::of(kind);
        (
            self.records_swept.get_or_create(&labels).get(),
            self.records_unmatched.get_or_create(&labels).get(),
            self.released_without_delete.get_or_create(&labels).get(),
        )
    }

    /// Counts a CoderTemplateTest run that ended with `reason`.
    pub fn template_test_finished(&self, reason: &str) {
        self.template_tests
            .get_or_create(&ReasonLabels {
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// CoderTemplateTest runs that ended with `reason` so far.
    pub fn template_tests_finished(&self, reason: &str) -> u64 {
        self.template_tests
            .get_or_create(&ReasonLabels {
                reason: reason.to_owned(),
            })
            .get()
    }

    /// Counts a reconcile and records its duration when the guard drops.
    pub fn start(&self, kind: &'static str) -> Measure<'_> {
        self.runs.get_or_create(&KindLabels { kind }).inc();
        Measure {
            metrics: self,
            kind,
            started: Instant::now(),
        }
    }

    /// Reconciles of `kind` started so far.
    pub fn runs(&self, kind: &'static str) -> u64 {
        self.runs.get_or_create(&KindLabels { kind }).get()
    }

    /// Counts a failed reconcile.
    pub fn failure(&self, kind: &'static str, category: &'static str) {
        self.failures
            .get_or_create(&FailureLabels { kind, category })
            .inc();
    }
}

/// Records the duration of one reconcile on drop.
pub struct Measure<'a> {
    metrics: &'a ReconcileMetrics,
    kind: &'static str,
    started: Instant,
}

impl Drop for Measure<'_> {
    fn drop(&mut self) {
        self.metrics
            .duration
            .get_or_create(&KindLabels { kind: self.kind })
            .observe(self.started.elapsed().as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    #[test]
    fn runs_failures_and_durations_are_exported() {
        let mut registry = Registry::default();
        let metrics = ReconcileMetrics::register(&mut registry);
        drop(metrics.start("CoderControlPlane"));
        metrics.failure("CoderControlPlane", "kube");
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(
            text.contains(r#"coder_k8s_reconcile_runs_total{kind="CoderControlPlane"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(
                r#"coder_k8s_reconcile_failures_total{kind="CoderControlPlane",category="kube"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(r#"coder_k8s_reconcile_duration_seconds_count{kind="CoderControlPlane"} 1"#),
            "{text}"
        );
    }
}
