//! What a CoderTemplateTest asks for, pure (docs/controllers/template-test.md): the workspace name derived from the
//! object UID, the `<organization>.<template>` split, the run's deadline, the deletion-policy annotation, the
//! controller's poll intervals, and the delete step, decided from the workspace's latest build: cancel an active start
//! or stop build, wait on an active delete build, count a failed delete build of this test once, wait out the backoff
//! after it (1 min doubling to 30 min, from that job's completion time), or create the delete build.

use std::collections::BTreeMap;
use std::time::Duration;

use coder_k8s_api::template_test::{CoderTemplateTestSpec, DELETION_POLICY_ANNOTATION};
use coder_k8s_coder_client::types::builds::{Transition, WorkspaceBuild};
use coder_k8s_coder_client::types::jobs::JobStatus;
use k8s_openapi::jiff::Timestamp;
use uuid::Uuid;

/// Prefix of every test workspace.
pub const WORKSPACE_PREFIX: &str = "ktt-";
/// Hex characters of the UID in the workspace name (32 characters in all, Coder's limit).
const UID_HEX: usize = 28;
/// `timeoutSeconds` when the spec leaves it out.
pub const DEFAULT_TIMEOUT_SECONDS: i32 = 900;
/// The longest status message, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 256;
/// How many of a workspace's newest builds prove ownership after an uncertain create.
pub const OWNERSHIP_BUILDS: u32 = 100;

/// `ktt-` and the first 28 lowercase hex characters of the UID without dashes; `None` for a UID that has fewer.
pub fn workspace_name(uid: &str) -> Option<String> {
    let hex: String = uid.chars().filter(|c| *c != '-').collect();
    let usable = hex.len() >= UID_HEX
        && hex
            .chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c));
    usable.then(|| format!("{WORKSPACE_PREFIX}{}", &hex[..UID_HEX]))
}

/// `<organization>.<template>` as its two names.
pub fn template_parts(template: &str) -> Option<(&str, &str)> {
    template
        .split_once('.')
        .filter(|(org, name)| !org.is_empty() && !name.is_empty())
}

/// The run's bound in seconds.
pub fn timeout_seconds(spec: &CoderTemplateTestSpec) -> i32 {
    spec.timeout_seconds.unwrap_or(DEFAULT_TIMEOUT_SECONDS)
}

/// What the `coder.com/deletion-policy` annotation asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeletionPolicy {
    /// No annotation, or `delete`.
    Delete,
    /// `retain`: keep the workspace (honoured only when the control plane allows it).
    Retain,
    /// Another value: ignored, and noted in the message.
    Ignored(String),
}

/// The deletion policy of an object with these annotations.
pub fn deletion_policy(annotations: &BTreeMap<String, String>) -> DeletionPolicy {
    match annotations.get(DELETION_POLICY_ANNOTATION).map(String::as_str) {
        None | Some("delete") => DeletionPolicy::Delete,
        Some("retain") => DeletionPolicy::Retain,
        Some(other) => DeletionPolicy::Ignored(other.to_owned()),
    }
}

/// The controller's intervals. They derive from the shared retry interval (30 s by default) so tests that shorten
/// it run the whole phase machine fast: Pending 15 s, Running 5 s, an unreachable Coder during cleanup 60 s,
/// failed delete builds 1 min doubling to 30 min, and 15 min for an uncertain create to show up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timings {
    pub pending: Duration,
    pub running: Duration,
    pub cleanup_unreachable: Duration,
    pub delete_backoff_base: Duration,
    pub delete_backoff_cap: Duration,
    /// How long reads look for the workspace after an uncertain create before its outcome counts as unknown.
    pub settle: Duration,
}

impl Timings {
    pub fn from_retry_interval(retry: Duration) -> Self {
        Self {
            pending: retry / 2,
            running: retry / 6,
            cleanup_unreachable: retry * 2,
            delete_backoff_base: retry * 2,
            delete_backoff_cap: retry * 60,
            settle: retry * 30,
        }
    }
}

/// What the delete step does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeleteAction {
    /// The workspace is deleted; `externally` when no delete build of this test did it.
    Gone { externally: bool },
    /// Cancel the active start or stop build (Coder cancels only while its job still has `expect_status`).
    Cancel {
        build: Uuid,
        expect_status: &'static str,
    },
    /// A delete build (or a cancel) is in progress: wait.
    Wait,
    /// The delete build of this test failed and is not counted yet: count it.
    CountFailure { build: Uuid },
    /// A counted failure's backoff still runs for this long.
    Backoff(Duration),
    /// Send a delete build.
    CreateDelete,
}

/// The backoff after `failures` failed delete builds: 1 min, 2 min, 4 min, … at most 30 min (scaled by `timings`).
pub fn delete_backoff(failures: i32, timings: &Timings) -> Duration {
    let doublings = u32::try_from(failures.saturating_sub(1).max(0))
        .unwrap_or(0)
        .min(16);
    timings
        .delete_backoff_base
        .saturating_mul(1 << doublings)
        .min(timings.delete_backoff_cap)
}

/// The next step of the delete, from the latest build, the delete build this test last sent (`None` once its
/// failure was counted) and the failures counted so far.
pub fn delete_action(
    latest: &WorkspaceBuild,
    own_delete_build: Option<&str>,
    failures: i32,
    now: Timestamp,
    timings: &Timings,
) -> DeleteAction {
    let status = latest.job.status;
    let active = matches!(
        status,
        JobStatus::Pending | JobStatus::Running | JobStatus::Canceling
    );
    let ours = own_delete_build == Some(latest.id.to_string().as_str());
    match latest.transition {
        Transition::Delete if status == JobStatus::Succeeded => DeleteAction::Gone {
            externally: !ours && failures == 0,
        },
        Transition::Delete if active => DeleteAction::Wait,
        Transition::Delete if ours => DeleteAction::CountFailure { build: latest.id },
        Transition::Delete => match remaining_backoff(latest, failures, now, timings) {
            Some(left) => DeleteAction::Backoff(left),
            None => DeleteAction::CreateDelete,
        },
        _ => match status {
            JobStatus::Pending => DeleteAction::Cancel {
                build: latest.id,
                expect_status: "pending",
            },
            JobStatus::Running => DeleteAction::Cancel {
                build: latest.id,
                expect_status: "running",
            },
            JobStatus::Canceling => DeleteAction::Wait,
            _ => DeleteAction::CreateDelete,
        },
    }
}

/// How long the backoff after the failed delete build `latest` still runs; `None` when it is over (or there is
/// no counted failure).
fn remaining_backoff(
    latest: &WorkspaceBuild,
    failures: i32,
    now: Timestamp,
    timings: &Timings,
) -> Option<Duration> {
    if failures <= 0 {
        return None;
    }
    let completed: Timestamp = latest.job.completed_at.as_deref()?.parse().ok()?;
    let waited = Duration::try_from(now.duration_since(completed)).unwrap_or_default();
    delete_backoff(failures, timings)
        .checked_sub(waited)
        .filter(|left| !left.is_zero())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workspace_name_is_ktt_and_28_hex_characters_of_the_uid() {
        let name = workspace_name("0f8fad5b-d9cb-469f-a165-70867728950e").unwrap();
        assert_eq!(name, "ktt-0f8fad5bd9cb469fa16570867728");
        assert_eq!(name.len(), 32);
        assert_eq!(workspace_name("0F8FAD5B-D9CB-469F-A165-70867728950E"), None);
        assert_eq!(workspace_name("short"), None);
        assert_eq!(workspace_name("zz8fad5b-d9cb-469f-a165-70867728950e"), None);
    }

    #[test]
    fn the_template_splits_into_organization_and_name() {
        assert_eq!(template_parts("coder.docker"), Some(("coder", "docker")));
        assert_eq!(template_parts("coder."), None);
        assert_eq!(template_parts("docker"), None);
    }

    #[test]
    fn the_deletion_policy_reads_retain_delete_and_notes_anything_else() {
        let with = |value: &str| BTreeMap::from([(DELETION_POLICY_ANNOTATION.to_owned(), value.to_owned())]);
        assert_eq!(deletion_policy(&BTreeMap::new()), DeletionPolicy::Delete);
        assert_eq!(deletion_policy(&with("delete")), DeletionPolicy::Delete);
        assert_eq!(deletion_policy(&with("retain")), DeletionPolicy::Retain);
        assert_eq!(
            deletion_policy(&with("Retain")),
            DeletionPolicy::Ignored("Retain".to_owned())
        );
    }

    #[test]
    fn the_default_timings_are_the_contracts() {
        let t = Timings::from_retry_interval(Duration::from_secs(30));
        assert_eq!(t.pending, Duration::from_secs(15));
        assert_eq!(t.running, Duration::from_secs(5));
        assert_eq!(t.cleanup_unreachable, Duration::from_secs(60));
        assert_eq!(t.delete_backoff_base, Duration::from_secs(60));
        assert_eq!(t.delete_backoff_cap, Duration::from_secs(1800));
        assert_eq!(t.settle, Duration::from_secs(900));
    }

    #[test]
    fn the_timeout_defaults_to_900_seconds() {
        let mut spec = CoderTemplateTestSpec {
            timeout_seconds: None,
            ..Default::default()
        };
        assert_eq!(timeout_seconds(&spec), 900);
        spec.timeout_seconds = Some(60);
        assert_eq!(timeout_seconds(&spec), 60);
    }

    fn timings() -> Timings {
        Timings::from_retry_interval(Duration::from_secs(30))
    }

    fn build(transition: Transition, status: JobStatus) -> WorkspaceBuild {
        let mut b = WorkspaceBuild {
            id: Uuid::from_u128(3),
            transition,
            ..Default::default()
        };
        b.job.status = status;
        b
    }

    fn now() -> Timestamp {
        "2026-01-01T00:10:00Z".parse().unwrap()
    }

    #[test]
    fn the_backoff_doubles_from_one_minute_to_thirty() {
        let minutes = |n| delete_backoff(n, &timings()).as_secs() / 60;
        assert_eq!(
            [
                minutes(1),
                minutes(2),
                minutes(3),
                minutes(5),
                minutes(6),
                minutes(40)
            ],
            [1, 2, 4, 16, 30, 30]
        );
    }

    #[test]
    fn an_active_start_build_is_canceled_with_its_status() {
        let b = build(Transition::Start, JobStatus::Running);
        assert_eq!(
            delete_action(&b, None, 0, now(), &timings()),
            DeleteAction::Cancel {
                build: b.id,
                expect_status: "running"
            }
        );
        let b = build(Transition::Stop, JobStatus::Pending);
        assert!(matches!(
            delete_action(&b, None, 0, now(), &timings()),
            DeleteAction::Cancel {
                expect_status: "pending",
                ..
            }
        ));
        let b = build(Transition::Start, JobStatus::Succeeded);
        assert_eq!(
            delete_action(&b, None, 0, now(), &timings()),
            DeleteAction::CreateDelete
        );
    }

    #[test]
    fn a_delete_build_is_waited_on_and_its_success_is_the_end() {
        let id = Uuid::from_u128(3).to_string();
        let running = build(Transition::Delete, JobStatus::Running);
        assert_eq!(
            delete_action(&running, Some(&id), 0, now(), &timings()),
            DeleteAction::Wait
        );
        let done = build(Transition::Delete, JobStatus::Succeeded);
        assert_eq!(
            delete_action(&done, Some(&id), 0, now(), &timings()),
            DeleteAction::Gone { externally: false }
        );
        assert_eq!(
            delete_action(&done, None, 0, now(), &timings()),
            DeleteAction::Gone { externally: true }
        );
    }

    #[test]
    fn a_failed_delete_is_counted_once_then_backs_off_from_its_completion() {
        let id = Uuid::from_u128(3).to_string();
        let mut failed = build(Transition::Delete, JobStatus::Failed);
        failed.job.completed_at = Some("2026-01-01T00:09:30Z".to_owned());
        assert_eq!(
            delete_action(&failed, Some(&id), 0, now(), &timings()),
            DeleteAction::CountFailure { build: failed.id }
        );
        // Counted (the own build is forgotten): 30 s of the first minute are left.
        assert_eq!(
            delete_action(&failed, None, 1, now(), &timings()),
            DeleteAction::Backoff(Duration::from_secs(30))
        );
        failed.job.completed_at = Some("2026-01-01T00:08:00Z".to_owned());
        assert_eq!(
            delete_action(&failed, None, 1, now(), &timings()),
            DeleteAction::CreateDelete
        );
        // Two minutes after it: the second failure's backoff (2 min) is over, the third's (4 min) is not.
        assert_eq!(
            delete_action(&failed, None, 2, now(), &timings()),
            DeleteAction::CreateDelete
        );
        assert_eq!(
            delete_action(&failed, None, 3, now(), &timings()),
            DeleteAction::Backoff(Duration::from_secs(120))
        );
    }
}
