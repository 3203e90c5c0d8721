//! `ProvisionerJob`, shared by template versions and workspace builds.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Job status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    /// Queued.
    Pending,
    /// Running.
    Running,
    /// Succeeded.
    Succeeded,
    /// Being canceled.
    Canceling,
    /// Canceled.
    Canceled,
    /// Failed.
    Failed,
    /// Unknown (also any value this client does not know).
    #[default]
    #[serde(other)]
    Unknown,
}

impl JobStatus {
    /// Whether the job will not change any more.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Canceled | Self::Failed)
    }
}

/// `input` of a job.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct JobInput {
    /// Template version (imports).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template_version_id: Option<Uuid>,
    /// Workspace build (builds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace_build_id: Option<Uuid>,
    /// Error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `ProvisionerJob`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProvisionerJob {
    /// ID.
    pub id: Uuid,
    /// Created.
    pub created_at: String,
    /// Started.
    pub started_at: Option<String>,
    /// Completed.
    pub completed_at: Option<String>,
    /// Canceled.
    pub canceled_at: Option<String>,
    /// Error text.
    pub error: Option<String>,
    /// Error code (e.g. `REQUIRED_TEMPLATE_VARIABLES`).
    pub error_code: Option<String>,
    /// Status.
    pub status: JobStatus,
    /// Worker.
    pub worker_id: Option<Uuid>,
    /// File.
    pub file_id: Uuid,
    /// Tags.
    pub tags: BTreeMap<String, String>,
    /// Queue position.
    pub queue_position: i64,
    /// Queue size.
    pub queue_size: i64,
    /// Organization.
    pub organization_id: Uuid,
    /// Initiator.
    pub initiator_id: Uuid,
    /// Input.
    pub input: JobInput,
    /// `template_version_import`, `workspace_build`, `template_version_dry_run`.
    #[serde(rename = "type")]
    pub job_type: String,
    /// Logs overflowed.
    pub logs_overflowed: bool,
}

/// The tags Coder adds to a job or a daemon whose tags name no `scope`: the organization scope and no owner.
pub fn effective_tags(tags: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut effective = tags.clone();
    if !effective.contains_key("scope") {
        effective.insert("scope".to_owned(), "organization".to_owned());
        effective.insert("owner".to_owned(), String::new());
    }
    effective
}

/// Whether a daemon with `daemon` tags may take a job with `job` tags (both as Coder stores them, see
/// [`effective_tags`]): every tag of the job is one of the daemon's, except that an untagged job (organization scope,
/// no owner, nothing else) goes only to an untagged daemon.
pub fn daemon_takes_job(daemon: &BTreeMap<String, String>, job: &BTreeMap<String, String>) -> bool {
    let untagged = |tags: &BTreeMap<String, String>| {
        tags.len() == 2
            && tags.get("scope").map(String::as_str) == Some("organization")
            && tags.get("owner").map(String::as_str) == Some("")
    };
    if untagged(job) {
        return untagged(daemon);
    }
    job.iter().all(|(key, value)| daemon.get(key) == Some(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn tags_without_a_scope_get_the_organization_scope() {
        assert_eq!(
            effective_tags(&tags(&[("region", "eu")])),
            tags(&[("region", "eu"), ("scope", "organization"), ("owner", "")])
        );
        let user = tags(&[("scope", "user"), ("owner", "u-1")]);
        assert_eq!(effective_tags(&user), user);
    }

    #[test]
    fn a_daemon_takes_the_jobs_whose_tags_it_has() {
        let daemon = effective_tags(&tags(&[("region", "eu"), ("gpu", "yes")]));
        assert!(daemon_takes_job(
            &daemon,
            &effective_tags(&tags(&[("region", "eu")]))
        ));
        assert!(daemon_takes_job(&daemon, &daemon));
        assert!(!daemon_takes_job(
            &daemon,
            &effective_tags(&tags(&[("region", "us")]))
        ));
        assert!(!daemon_takes_job(
            &daemon,
            &effective_tags(&tags(&[("arch", "arm")]))
        ));
    }

    #[test]
    fn an_untagged_job_goes_only_to_an_untagged_daemon() {
        let untagged = effective_tags(&BTreeMap::new());
        let tagged = effective_tags(&tags(&[("region", "eu")]));
        assert!(daemon_takes_job(&untagged, &untagged));
        assert!(!daemon_takes_job(&tagged, &untagged));
        assert!(!daemon_takes_job(&untagged, &tagged));
    }
}
