//! The pure decisions of a run (docs/controllers/template-test.md), each over Coder answers the shell already
//! read: is the answer about what was asked, may the owner own test workspaces, is the version usable, what did
//! the create answer prove, does a workspace found after an uncertain create belong to this test, and are its
//! agents ready. Messages name IDs and the test's own names, never Coder's texts, parameters or agent names.

use coder_k8s_api::template_test::reasons;
use coder_k8s_coder_client::Error as CoderError;
use coder_k8s_coder_client::types::builds::{Transition, WorkspaceBuild};
use coder_k8s_coder_client::types::jobs::JobStatus;
use coder_k8s_coder_client::types::template_versions::TemplateVersion;
use coder_k8s_coder_client::types::users::{OrganizationMember, User};
use uuid::Uuid;

use super::status::Outcome;
use crate::conditions::ConditionStatus;

/// The log line of an answer about something else than was asked.
pub const MISMATCH_LOG: &str = "Coder answered something other than the controller asked for";

/// Coder answered about another object than the one asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch(pub String);

impl Mismatch {
    /// The wait a mismatch becomes: the deadline, not a growing error backoff, ends it.
    pub fn step(&self) -> Outcome {
        Outcome::wait(reasons::CODER_ANSWER_MISMATCH, self.0.clone())
    }
}

/// `Ok` when Coder's answer names what was asked for.
pub fn answered(kind: &str, asked: &str, answer: &str) -> Result<(), Mismatch> {
    if asked == answer {
        Ok(())
    } else {
        Err(Mismatch(format!(
            "Coder answered {kind} {answer:?} when asked for {asked:?}."
        )))
    }
}

/// Organization roles a test workspace owner may hold.
const ALLOWED_ORG_ROLES: [&str; 2] = ["organization-member", "organization-workspace-access"];

/// Why the user may not own test workspaces (site-level rules), if it may not. Every start build hands the owner's
/// token to the template, so only a plain member qualifies.
pub fn owner_refusal(user: &User) -> Option<String> {
    if user.status != "active" {
        return Some(format!(
            "status {:?} is not allowed; the user must be active.",
            user.status
        ));
    }
    if !user.is_service_account && user.login_type != "password" && user.login_type != "none" {
        return Some(format!(
            "login type {:?} belongs to a person; use a service account or a password user.",
            user.login_type
        ));
    }
    user.roles
        .iter()
        .find(|r| r.name != "member")
        .map(|r| format!("site role {:?} is not allowed.", r.name))
}

/// Why the owner's standing in one organization refuses it, if it does: its roles there and the organization's
/// default member roles must all be plain member roles.
pub fn organization_refusal(
    organization: Uuid,
    default_roles: &[String],
    member: Option<&OrganizationMember>,
) -> Option<String> {
    if let Some(role) = default_roles
        .iter()
        .find(|r| !ALLOWED_ORG_ROLES.contains(&r.as_str()))
    {
        return Some(format!(
            "default member role {role:?} in organization {organization} is not allowed."
        ));
    }
    member?
        .roles
        .iter()
        .find(|r| !ALLOWED_ORG_ROLES.contains(&r.name.as_str()))
        .map(|r| format!("role {:?} in organization {organization} is not allowed.", r.name))
}

/// What the version under test allows: `None` when it imported successfully.
pub fn version_step(version: &TemplateVersion, template: Uuid, template_text: &str) -> Option<Outcome> {
    if version.template_id != Some(template) {
        return Some(Outcome::fail(
            reasons::TEMPLATE_VERSION_MISMATCH,
            format!(
                "Version {} does not belong to template {template_text:?}.",
                version.id
            ),
        ));
    }
    if version.archived {
        return Some(Outcome::fail(
            reasons::TEMPLATE_VERSION_ARCHIVED,
            format!("Version {} is archived.", version.name),
        ));
    }
    match version.job.status {
        JobStatus::Succeeded => None,
        JobStatus::Pending | JobStatus::Running => Some(Outcome::wait(
            reasons::TEMPLATE_VERSION_IMPORTING,
            format!("Version {} is still importing.", version.name),
        )),
        other => {
            let how = match other {
                JobStatus::Failed => "failed".to_owned(),
                JobStatus::Canceled | JobStatus::Canceling => "was canceled".to_owned(),
                other => format!("ended {}", job_word(other)),
            };
            Some(Outcome::fail(
                reasons::TEMPLATE_VERSION_IMPORT_FAILED,
                format!("The import of version {} {how}.", version.name),
            ))
        }
    }
}

fn job_word(status: JobStatus) -> String {
    serde_json::to_value(status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned())
}

/// What the create call's failure proved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CreateAnswer {
    /// Nothing was created: clear the marker and wait with this step (the create is sent again later).
    NoEffect(Outcome),
    /// Coder refused for good: the run fails, nothing was created.
    Refused(Outcome),
    /// The create may have been applied: read Coder, never send it again.
    Uncertain,
}

/// Classifies a failed create. Only answers that prove no effect allow another create: 429, 401, 406 and a
/// connection that was never opened.
pub fn create_answer(error: &CoderError, owner: &str, name: &str) -> CreateAnswer {
    use coder_k8s_coder_client::error::UnavailableReason;
    let retry = |reason: &'static str, what: &str| {
        let mut step = Outcome::wait(
            reason,
            format!("The workspace create was not applied ({what}); it is sent again."),
        );
        step.rate_limited = error.retry_after().map(Some).or(match error {
            CoderError::RateLimited { .. } => Some(None),
            _ => None,
        });
        CreateAnswer::NoEffect(step)
    };
    match error {
        CoderError::RateLimited { .. } => retry(reasons::CREATE_RETRYING, "Coder answered 429"),
        CoderError::Unauthorized { .. } => retry(reasons::CREATE_RETRYING, "Coder answered 401"),
        CoderError::Unavailable {
            reason: UnavailableReason::Connect,
            ..
        } => retry(reasons::CREATE_RETRYING, "no connection"),
        CoderError::Rejected { status: 406, .. } => CreateAnswer::NoEffect(Outcome::wait(
            reasons::TEMPLATE_VERSION_IMPORTING,
            "Coder does not accept the version yet because it is still importing.",
        )),
        CoderError::Conflict { .. } => CreateAnswer::Refused(Outcome::fail(
            reasons::WORKSPACE_NAME_CONFLICT,
            format!("Coder user {owner} already has a workspace named {name}."),
        )),
        CoderError::NotFound { .. } | CoderError::Forbidden { .. } => {
            CreateAnswer::Refused(rejected(error.status().unwrap_or_default(), name))
        }
        CoderError::Rejected { status, .. } if (400..500).contains(status) => {
            CreateAnswer::Refused(rejected(*status, name))
        }
        _ => CreateAnswer::Uncertain,
    }
}

fn rejected(status: u16, name: &str) -> Outcome {
    Outcome::fail(
        reasons::CREATE_REJECTED,
        format!("Coder refused to create workspace {name} (HTTP {status})."),
    )
}

/// What the pinned facts of the run are, for the ownership proof.
pub struct Pins<'a> {
    pub organization: &'a str,
    pub template: &'a str,
    pub version: &'a str,
}

/// The start build that proves this test created the workspace: the workspace is in the pinned organization and
/// template, and its first build not made by Coder's prebuild user is a start build by the operator with the pinned
/// version. `None` without proof (also when build 1 is not among the builds read).
pub fn proving_build<'a>(
    workspace: (&str, &str),
    builds: &'a [WorkspaceBuild],
    operator: Uuid,
    pins: &Pins<'_>,
) -> Option<&'a WorkspaceBuild> {
    if workspace != (pins.organization, pins.template) {
        return None;
    }
    builds.iter().find(|b| b.build_number == 1)?;
    let claim = builds
        .iter()
        .filter(|b| b.initiator_id != PREBUILDS_USER)
        .min_by_key(|b| b.build_number)?;
    let proven = claim.transition == Transition::Start
        && claim.initiator_id == operator
        && claim.template_version_id.to_string() == pins.version
        && !claim.id.is_nil();
    proven.then_some(claim)
}

/// Coder's prebuilds system user: only Coder's prebuild reconciler starts builds as it.
const PREBUILDS_USER: Uuid = Uuid::from_u128(0xc42f_df75_3097_471c_8c33_fb52_454d_81c0);

/// What the workspace's start build and agents say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// Keep waiting, or fail.
    NotYet(Outcome),
    /// Every top-level agent is connected and ready.
    Ready,
}

/// Readiness of the workspace whose latest build is `build` (the test's start build `start_build`).
pub fn readiness(build: &WorkspaceBuild, start_build: &str, name: &str) -> Readiness {
    if build.id.to_string() != start_build {
        return Readiness::NotYet(Outcome::fail(
            reasons::WORKSPACE_CHANGED_EXTERNALLY,
            format!(
                "Someone else started build {} of workspace {name}.",
                build.build_number
            ),
        ));
    }
    match build.job.status {
        JobStatus::Succeeded => agents_readiness(build, name),
        JobStatus::Failed => {
            let code = build
                .job
                .error_code
                .as_deref()
                .filter(|c| !c.is_empty() && c.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_'));
            let message = match code {
                Some(code) => format!("The start build of workspace {name} failed (error code {code})."),
                None => format!("The start build of workspace {name} failed."),
            };
            Readiness::NotYet(Outcome::fail(reasons::BUILD_FAILED, message))
        }
        JobStatus::Canceling | JobStatus::Canceled => Readiness::NotYet(Outcome::fail(
            reasons::BUILD_CANCELED,
            format!("Someone else canceled the start build of workspace {name}."),
        )),
        other => Readiness::NotYet(Outcome::wait(
            reasons::WAITING_FOR_BUILD,
            format!("The start build of workspace {name} is {}.", job_word(other)),
        )),
    }
}

/// Agents are named by ID: a template can derive agent names from parameter values, which never go into status.
fn agents_readiness(build: &WorkspaceBuild, name: &str) -> Readiness {
    let agents: Vec<_> = build
        .resources
        .iter()
        .flat_map(|r| &r.agents)
        .filter(|a| a.parent_id.is_none())
        .collect();
    if agents.is_empty() {
        return Readiness::NotYet(Outcome::fail(
            reasons::NO_AGENTS,
            format!("Workspace {name} has no agents, so nothing proves that it works."),
        ));
    }
    let mut waiting = None;
    for agent in &agents {
        let fail = |reason, text: String| Readiness::NotYet(Outcome::fail(reason, text));
        match agent.lifecycle_state.as_str() {
            "start_error" => {
                return fail(
                    reasons::AGENT_START_ERROR,
                    format!("The startup script of agent {} failed.", agent.id),
                );
            }
            "start_timeout" => {
                return fail(
                    reasons::AGENT_START_TIMEOUT,
                    format!("The startup script of agent {} timed out.", agent.id),
                );
            }
            "shutting_down" | "shutdown_timeout" | "shutdown_error" | "off" => {
                return fail(
                    reasons::AGENT_STOPPED,
                    format!("Agent {} is {}.", agent.id, word(&agent.lifecycle_state)),
                );
            }
            _ => {}
        }
        if agent.status == "timeout" {
            return fail(
                reasons::AGENT_CONNECTION_TIMEOUT,
                format!("Agent {} did not connect in time.", agent.id),
            );
        }
        if waiting.is_none() && (agent.status != "connected" || agent.lifecycle_state != "ready") {
            waiting = Some(*agent);
        }
    }
    match waiting {
        Some(agent) => Readiness::NotYet(Outcome::wait(
            reasons::WAITING_FOR_AGENTS,
            format!(
                "Agent {} is {} and {}.",
                agent.id,
                word(&agent.status),
                word(&agent.lifecycle_state)
            ),
        )),
        None => Readiness::Ready,
    }
}

/// A state word from Coder, kept only when it is a plain word (it is shown in the status message).
fn word(text: &str) -> &str {
    if !text.is_empty() && text.len() <= 32 && text.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
        text
    } else {
        "in an unknown state"
    }
}

/// The step after an uncertain create, from what Coder shows under the workspace name.
pub fn confirm_step(
    found: Option<(bool, bool)>,
    name: &str,
    settled: bool,
    operator_is_owner: bool,
) -> Outcome {
    // `found`: (live, proven).
    match found {
        Some((true, true)) => Outcome::wait(
            reasons::WAITING_FOR_BUILD,
            format!("Workspace {name} was created."),
        ),
        Some((true, false)) => Outcome::fail(
            reasons::WORKSPACE_NAME_CONFLICT,
            format!("Workspace {name} exists, but nothing proves that this test created it."),
        )
        .with_deleted(ConditionStatus::Unknown, reasons::OWNERSHIP_UNKNOWN),
        Some((false, true)) => Outcome::fail(
            reasons::WORKSPACE_DELETED_EXTERNALLY,
            format!("Workspace {name} was deleted by someone else."),
        )
        .with_deleted(ConditionStatus::True, reasons::DELETED_EXTERNALLY),
        _ if !settled => Outcome::wait(
            reasons::CONFIRMING_CREATE,
            format!("No workspace {name} from this test found yet; reading again."),
        ),
        _ if !operator_is_owner => Outcome::wait(
            reasons::CONFIRMING_CREATE,
            format!(
                "No workspace {name} found, but the operator user is not a site owner, so that proves nothing."
            ),
        ),
        _ => Outcome::fail(
            reasons::CREATE_OUTCOME_UNKNOWN,
            format!("No workspace {name} from this test appeared after the create request."),
        )
        .with_deleted(ConditionStatus::True, reasons::NOT_CREATED),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coder_k8s_coder_client::types::builds::{WorkspaceAgent, WorkspaceResource};
    use coder_k8s_coder_client::types::users::Role;

    fn role(name: &str) -> Role {
        Role {
            name: name.into(),
            ..Default::default()
        }
    }

    #[test]
    fn answers_must_name_what_was_asked() {
        assert!(answered("template", "docker", "docker").is_ok());
        let mismatch = answered("template", "docker", "other").unwrap_err();
        assert_eq!(mismatch.step().reason, "CoderAnswerMismatch");
        assert!(mismatch.0.contains("\"other\""));
    }

    #[test]
    fn only_plain_active_members_own_test_workspaces() {
        let ok = User {
            status: "active".into(),
            login_type: "password".into(),
            ..Default::default()
        };
        assert_eq!(owner_refusal(&ok), None);
        let member = User {
            roles: vec![role("member")],
            ..ok.clone()
        };
        assert_eq!(owner_refusal(&member), None);
        let admin = User {
            roles: vec![role("owner")],
            ..ok.clone()
        };
        assert!(owner_refusal(&admin).unwrap().contains("site role \"owner\""));
        let suspended = User {
            status: "suspended".into(),
            ..ok.clone()
        };
        assert!(owner_refusal(&suspended).is_some());
        let person = User {
            login_type: "oidc".into(),
            ..ok.clone()
        };
        assert!(owner_refusal(&person).is_some());
        let service = User {
            login_type: "oidc".into(),
            is_service_account: true,
            ..ok
        };
        assert_eq!(owner_refusal(&service), None);
    }

    #[test]
    fn organization_roles_beyond_member_refuse_the_owner() {
        let org = Uuid::from_u128(1);
        let member = |roles: &[&str]| OrganizationMember {
            roles: roles.iter().map(|r| role(r)).collect(),
            ..Default::default()
        };
        assert_eq!(organization_refusal(org, &[], Some(&member(&[]))), None);
        assert_eq!(
            organization_refusal(
                org,
                &["organization-workspace-access".into()],
                Some(&member(&["organization-member"]))
            ),
            None
        );
        assert!(organization_refusal(org, &[], Some(&member(&["organization-admin"]))).is_some());
        assert!(organization_refusal(org, &["organization-auditor".into()], None).is_some());
    }

    fn version(status: JobStatus, archived: bool, template: Uuid) -> TemplateVersion {
        let mut v = TemplateVersion {
            name: "v1".into(),
            template_id: Some(template),
            archived,
            ..Default::default()
        };
        v.job.status = status;
        v
    }

    #[test]
    fn versions_are_usable_only_when_imported_unarchived_and_of_the_template() {
        let t = Uuid::from_u128(9);
        assert_eq!(
            version_step(&version(JobStatus::Succeeded, false, t), t, "o.t"),
            None
        );
        let reason = |v: TemplateVersion| version_step(&v, t, "o.t").unwrap().reason;
        assert_eq!(
            reason(version(JobStatus::Running, false, t)),
            "TemplateVersionImporting"
        );
        assert_eq!(
            reason(version(JobStatus::Failed, false, t)),
            "TemplateVersionImportFailed"
        );
        let failed = version_step(&version(JobStatus::Failed, false, t), t, "o.t").unwrap();
        assert_eq!(failed.message, "The import of version v1 failed.");
        let canceled = version_step(&version(JobStatus::Canceled, false, t), t, "o.t").unwrap();
        assert_eq!(canceled.message, "The import of version v1 was canceled.");
        assert_eq!(
            reason(version(JobStatus::Succeeded, true, t)),
            "TemplateVersionArchived"
        );
        assert_eq!(
            reason(version(JobStatus::Succeeded, false, Uuid::from_u128(8))),
            "TemplateVersionMismatch"
        );
    }

    #[test]
    fn create_answers_that_prove_no_effect_allow_a_retry_and_others_never() {
        use coder_k8s_coder_client::error::UnavailableReason;
        let classify = |e: CoderError| create_answer(&e, "u", "ktt-x");
        let reason = |a: CreateAnswer| match a {
            CreateAnswer::NoEffect(s) => ("retry", s.reason),
            CreateAnswer::Refused(s) => ("refused", s.reason),
            CreateAnswer::Uncertain => ("uncertain", ""),
        };
        assert_eq!(
            reason(classify(CoderError::RateLimited {
                retry_after: None,
                message: String::new()
            })),
            ("retry", "CreateRetrying")
        );
        assert_eq!(
            reason(classify(CoderError::Rejected {
                status: 406,
                message: String::new()
            })),
            ("retry", "TemplateVersionImporting")
        );
        assert_eq!(
            reason(classify(CoderError::Conflict {
                message: String::new()
            })),
            ("refused", "WorkspaceNameConflict")
        );
        assert_eq!(
            reason(classify(CoderError::Rejected {
                status: 400,
                message: String::new()
            })),
            ("refused", "CreateRejected")
        );
        for uncertain in [
            UnavailableReason::Timeout,
            UnavailableReason::ConnectionDropped,
            UnavailableReason::ServerError,
        ] {
            let e = CoderError::Unavailable {
                reason: uncertain,
                status: None,
                message: String::new(),
            };
            assert_eq!(reason(classify(e)), ("uncertain", ""), "{uncertain}");
        }
        let refused = CoderError::Unavailable {
            reason: UnavailableReason::Connect,
            status: None,
            message: String::new(),
        };
        assert_eq!(reason(classify(refused)), ("retry", "CreateRetrying"));
    }

    fn build(number: i64, transition: Transition, initiator: Uuid, version: Uuid) -> WorkspaceBuild {
        WorkspaceBuild {
            id: Uuid::from_u128(100 + number as u128),
            build_number: number,
            transition,
            initiator_id: initiator,
            template_version_id: version,
            ..Default::default()
        }
    }

    #[test]
    fn ownership_is_proven_by_the_operators_first_start_build_with_the_pinned_version() {
        let (operator, version) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let pins = Pins {
            organization: "o",
            template: "t",
            version: &version.to_string(),
        };
        let mine = [
            build(2, Transition::Stop, operator, version),
            build(1, Transition::Start, operator, version),
        ];
        assert_eq!(
            proving_build(("o", "t"), &mine, operator, &pins).map(|b| b.build_number),
            Some(1)
        );
        assert!(proving_build(("o", "other"), &mine, operator, &pins).is_none());
        let someone_else = [build(1, Transition::Start, Uuid::from_u128(5), version)];
        assert!(proving_build(("o", "t"), &someone_else, operator, &pins).is_none());
        let other_version = [build(1, Transition::Start, operator, Uuid::from_u128(6))];
        assert!(proving_build(("o", "t"), &other_version, operator, &pins).is_none());
        let without_first = [build(101, Transition::Start, operator, version)];
        assert!(proving_build(("o", "t"), &without_first, operator, &pins).is_none());
        let claimed_prebuild = [
            build(1, Transition::Start, PREBUILDS_USER, version),
            build(2, Transition::Start, operator, version),
        ];
        assert_eq!(
            proving_build(("o", "t"), &claimed_prebuild, operator, &pins).map(|b| b.build_number),
            Some(2)
        );
    }

    fn started(agents: Vec<WorkspaceAgent>) -> WorkspaceBuild {
        let mut b = build(1, Transition::Start, Uuid::nil(), Uuid::nil());
        b.job.status = JobStatus::Succeeded;
        b.resources = vec![WorkspaceResource {
            id: Uuid::nil(),
            agents,
        }];
        b
    }

    fn agent(status: &str, lifecycle: &str, parent: bool) -> WorkspaceAgent {
        WorkspaceAgent {
            id: Uuid::from_u128(7),
            status: status.into(),
            lifecycle_state: lifecycle.into(),
            parent_id: parent.then(|| Uuid::from_u128(8)),
            ..Default::default()
        }
    }

    fn readiness_reason(b: &WorkspaceBuild) -> &'static str {
        match readiness(b, &b.id.to_string(), "ktt-x") {
            Readiness::Ready => "ready",
            Readiness::NotYet(s) => s.reason,
        }
    }

    #[test]
    fn top_level_agents_decide_readiness() {
        assert_eq!(
            readiness_reason(&started(vec![agent("connected", "ready", false)])),
            "ready"
        );
        // A sub-agent that is not ready does not hold the test.
        assert_eq!(
            readiness_reason(&started(vec![
                agent("connected", "ready", false),
                agent("connecting", "created", true)
            ])),
            "ready"
        );
        assert_eq!(readiness_reason(&started(vec![])), "NoAgents");
        assert_eq!(
            readiness_reason(&started(vec![agent("connecting", "ready", true)])),
            "NoAgents"
        );
        assert_eq!(
            readiness_reason(&started(vec![agent("connecting", "created", false)])),
            "WaitingForAgents"
        );
        assert_eq!(
            readiness_reason(&started(vec![agent("timeout", "created", false)])),
            "AgentConnectionTimeout"
        );
        assert_eq!(
            readiness_reason(&started(vec![agent("connected", "start_error", false)])),
            "AgentStartError"
        );
        assert_eq!(
            readiness_reason(&started(vec![agent("connected", "start_timeout", false)])),
            "AgentStartTimeout"
        );
        assert_eq!(
            readiness_reason(&started(vec![agent("connected", "off", false)])),
            "AgentStopped"
        );
    }

    #[test]
    fn the_start_build_decides_before_the_agents() {
        let mut b = started(vec![agent("connected", "ready", false)]);
        b.job.status = JobStatus::Running;
        assert_eq!(readiness_reason(&b), "WaitingForBuild");
        b.job.status = JobStatus::Failed;
        assert_eq!(readiness_reason(&b), "BuildFailed");
        b.job.status = JobStatus::Canceled;
        assert_eq!(readiness_reason(&b), "BuildCanceled");
        let other = readiness(&b, "not-the-start-build", "ktt-x");
        assert!(matches!(other, Readiness::NotYet(s) if s.reason == "WorkspaceChangedExternally"));
    }

    #[test]
    fn an_uncertain_create_is_confirmed_from_what_coder_shows() {
        let reason = |found, settled, owner| confirm_step(found, "ktt-x", settled, owner).reason;
        assert_eq!(reason(Some((true, true)), false, true), "WaitingForBuild");
        assert_eq!(reason(Some((true, false)), false, true), "WorkspaceNameConflict");
        assert_eq!(
            reason(Some((false, true)), false, true),
            "WorkspaceDeletedExternally"
        );
        assert_eq!(reason(None, false, true), "ConfirmingCreate");
        assert_eq!(reason(None, true, false), "ConfirmingCreate");
        assert_eq!(reason(None, true, true), "CreateOutcomeUnknown");
    }
}
