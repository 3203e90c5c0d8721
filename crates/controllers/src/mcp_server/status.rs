//! The status of a CoderMCPServer from the outcome of one pass (docs/controllers/mcp-server.md): `Ready` when Coder
//! matches the spec, `Pending` while the operator works or waits for something outside it, `Stalled` when a person
//! must act. The conditions `Ready`, `Reconciling` and `Stalled` follow; the message is cut to 256 bytes and never
//! holds Coder's own texts or a credential.

use coder_k8s_api::mcp_server::{CoderMCPServerStatus, reasons};
use coder_k8s_api::shared::{CREDENTIAL_DESTINATIONS_ANNOTATION, CREDENTIAL_LABEL};
use coder_k8s_coder_client::Error as CoderError;

use super::desired::CredentialRef;
use crate::credentials;
use crate::sync_status;
pub use crate::sync_status::Outcome;

/// Longest condition message, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 256;

/// Coder's config matches the spec.
pub fn synced(message: impl Into<String>) -> Outcome {
    Outcome::ready(reasons::SYNCED, message)
}

/// The reason of a credential Secret without a value under its key.
pub const KEY_MISSING: &str = "KeyMissing";

/// The stall of a credential Secret that cannot be used (`reason`: a credential-rule refusal or [`KEY_MISSING`]);
/// it names the Secret, the key and the origin, never a value.
pub fn credential_not_ready(reference: &CredentialRef, reason: &str) -> Outcome {
    let (secret, origin) = (&reference.secret, &reference.destination);
    let why = match reason {
        credentials::reasons::SECRET_NOT_FOUND => format!("Secret {secret:?} does not exist"),
        credentials::reasons::SECRET_NOT_MARKED => {
            format!("Secret {secret:?} does not carry the label {CREDENTIAL_LABEL}=true")
        }
        KEY_MISSING => format!("Secret {secret:?} has no value under key {:?}", reference.key),
        _ => format!(
            "Secret {secret:?} does not list {origin} in its annotation {CREDENTIAL_DESTINATIONS_ANNOTATION}"
        ),
    };
    Outcome::stalled(
        reasons::CREDENTIALS_NOT_READY,
        format!("{why}; the server is disabled in Coder until the Secret consents."),
    )
}

/// The control plane does not list the object's organization in its opt-in.
pub fn organization_not_allowed(control_plane: &str, organization: &str) -> Outcome {
    Outcome::stalled(
        reasons::MCP_SERVERS_NOT_ALLOWED,
        format!(
            "CoderControlPlane {control_plane} does not list organization {organization:?} in spec.mcpServers.organizations."
        ),
    )
}

/// Coder has no organization of the spec's name.
pub fn organization_not_found(organization: &str) -> Outcome {
    Outcome::stalled(
        reasons::ORGANIZATION_NOT_FOUND,
        format!("Coder has no organization {organization:?}."),
    )
}

/// A config under the object's slug that this object cannot prove it created.
pub fn slug_taken(slug: &str) -> Outcome {
    Outcome::stalled(
        reasons::SLUG_CONFLICT,
        format!("An MCP server config that this object did not create uses the slug {slug:?}."),
    )
}

/// Coder refused a create or patch because another config uses the slug.
pub fn slug_conflict(slug: &str) -> Outcome {
    Outcome::stalled(
        reasons::SLUG_CONFLICT,
        format!("Another MCP server config in Coder uses the slug {slug:?}."),
    )
}

/// The answer to a create was lost: the next pass looks the slug up instead of sending another.
pub fn create_answer_lost() -> Outcome {
    Outcome::pending(
        reasons::CODER_UNAVAILABLE,
        "The create's answer was lost; the next pass looks the slug up in the organization.",
    )
}

/// Someone disabled the server in Coder while the spec did not change.
pub fn disabled_externally() -> Outcome {
    Outcome::stalled(
        reasons::DISABLED_EXTERNALLY,
        "The server was disabled in Coder; the operator leaves it disabled until the next spec edit.",
    )
}

/// A group `spec.access.groups` lists does not exist in the organization.
pub fn group_not_found(group: &str) -> Outcome {
    Outcome::stalled(
        reasons::GROUP_NOT_FOUND,
        format!("Coder has no group {group:?} in the organization; no group was given access."),
    )
}

/// A Coder call failed: `NotSupported` for a Coder without the route, `OperatorAccessNotReady` when Coder refuses
/// the operator user (it must be a site owner), `Rejected` for another refusal, else a `CoderUnavailable` wait.
/// The message names the call and the HTTP status, never Coder's text.
pub fn coder_failed(action: &str, error: &CoderError) -> Outcome {
    if error.is_route_not_found() {
        return Outcome::stalled(
            reasons::NOT_SUPPORTED,
            format!("{action}: this Coder has no MCP server routes; Coder v2.37.2 or later is needed."),
        );
    }
    match error {
        CoderError::Forbidden { .. } | CoderError::Unauthorized { .. } => Outcome::stalled(
            reasons::OPERATOR_ACCESS_NOT_READY,
            format!(
                "{action}: Coder refused the operator user ({}); it must be a site owner.",
                error.category()
            ),
        ),
        CoderError::Rejected { status, .. } => Outcome::stalled(
            reasons::REJECTED,
            format!("{action}: Coder rejected the request ({status}); check the spec."),
        ),
        _ => {
            let summary = match error.status() {
                Some(status) => format!("Coder answered {status}"),
                None => format!("Coder could not be reached ({})", error.category()),
            };
            let outcome = Outcome::pending(reasons::CODER_UNAVAILABLE, format!("{action}: {summary}."));
            match error {
                CoderError::RateLimited { retry_after, .. } => outcome.rate_limited(*retry_after),
                _ => outcome,
            }
        }
    }
}

/// `message` cut to at most 256 bytes at a character boundary.
pub fn bounded(message: &str) -> String {
    crate::digest::byte_prefix(message, MAX_MESSAGE_BYTES).to_owned()
}

/// The reason of the `Ready` condition, if set.
pub fn ready_reason(status: &CoderMCPServerStatus) -> Option<&str> {
    sync_status::ready_reason(&status.conditions)
}

/// Whether the last pass left Coder's config enabled and in line with the spec (a disable seen now came from
/// someone else): `Synced`, `GroupNotFound` (the config was synced before the access step) or `DisabledExternally`.
pub fn was_in_sync(status: &CoderMCPServerStatus) -> bool {
    status.server_id.is_some()
        && matches!(
            ready_reason(status),
            Some(reasons::SYNCED | reasons::GROUP_NOT_FOUND | reasons::DISABLED_EXTERNALLY)
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync_status::SyncedStatus;
    use coder_k8s_api::mcp_server::MCPServerPhase;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;
    use std::time::Duration;

    fn now() -> Time {
        Time(Timestamp::UNIX_EPOCH)
    }

    fn condition(status: &CoderMCPServerStatus, type_: &str) -> (String, String) {
        let c = status.conditions.iter().find(|c| c.type_ == type_).unwrap();
        (c.status.clone(), c.reason.clone())
    }

    #[test]
    fn each_outcome_sets_its_phase_and_conditions() {
        let mut status = CoderMCPServerStatus::default();
        status.record(&synced("in sync"), Some(3), &now());
        assert_eq!(status.phase, Some(MCPServerPhase::Ready));
        assert_eq!(condition(&status, "Ready"), ("True".into(), "Synced".into()));
        assert_eq!(condition(&status, "Stalled").0, "False");
        assert_eq!(status.observed_generation, Some(3));
        let disabled = Outcome::stalled(reasons::DISABLED_EXTERNALLY, "x");
        status.record(&disabled, Some(3), &now());
        assert_eq!(status.phase, Some(MCPServerPhase::Stalled));
        assert_eq!(
            condition(&status, "Stalled"),
            ("True".into(), "DisabledExternally".into())
        );
        assert_eq!(condition(&status, "Ready").0, "False");
        status.record(
            &Outcome::pending(reasons::CODER_UNAVAILABLE, "y"),
            Some(3),
            &now(),
        );
        assert_eq!(status.phase, Some(MCPServerPhase::Pending));
        assert_eq!(condition(&status, "Reconciling").0, "True");
    }

    #[test]
    fn only_a_config_left_in_sync_reads_a_disable_as_external() {
        let mut before = CoderMCPServerStatus::default();
        before.record(&synced("ok"), None, &now());
        assert!(!was_in_sync(&before), "no config yet");
        before.server_id = Some("id".into());
        assert!(was_in_sync(&before));
        let mut after = before.clone();
        let stall = Outcome::stalled(reasons::MCP_SERVERS_NOT_ALLOWED, "not listed");
        after.record(&stall, None, &now());
        assert!(!was_in_sync(&after));
    }

    #[test]
    fn coder_failures_name_the_call_not_coders_text() {
        let route = CoderError::Unavailable {
            reason: coder_k8s_coder_client::UnavailableReason::RouteNotFound,
            status: Some(404),
            message: "Route not found.".into(),
        };
        assert_eq!(coder_failed("list", &route).reason, reasons::NOT_SUPPORTED);
        let forbidden = CoderError::Forbidden {
            message: "secret detail".into(),
        };
        let outcome = coder_failed("list", &forbidden);
        assert_eq!(outcome.reason, reasons::OPERATOR_ACCESS_NOT_READY);
        assert!(!outcome.message.contains("secret detail"));
        let limited = CoderError::RateLimited {
            retry_after: Some(Duration::from_secs(3)),
            message: String::new(),
        };
        assert_eq!(
            coder_failed("list", &limited).rate_limited,
            Some(Some(Duration::from_secs(3)))
        );
        assert_eq!(bounded(&"é".repeat(200)).len(), 256);
    }
}
