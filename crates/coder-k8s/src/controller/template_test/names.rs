//! Names and fixed inputs of a CoderTemplateTest (docs/controllers/template-test.md): the workspace name derived
//! from the object UID, the `<organization>.<template>` split, the run's deadline, the deletion-policy annotation
//! and the controller's poll intervals.

use std::collections::BTreeMap;
use std::time::Duration;

use coder_k8s_api::template_test::{CoderTemplateTestSpec, DELETION_POLICY_ANNOTATION};

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
}
