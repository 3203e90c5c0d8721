//! `coderworkspaces/<name>/start` and `coderworkspaces/<name>/stop` (verb `create`): bring a workspace to the
//! requested state with at most one Coder build.
//!
//! The latest build decides ([`decide`]): a build that already does what was asked answers `InProgress` or
//! `Unchanged` with no write; another active or canceling build is a 409; otherwise one build is queued (`Queued`).
//! A dry run evaluates the same table and answers `WouldQueue` instead of queueing. Every Coder call of a request
//! shares one budget (25 s); the calls before the build is confirmed end 5 s before it, so an uncertain build POST
//! (a timeout, a transport error, a 502/503/504 of a proxy) can still be confirmed by one re-read of the workspace.
//! The POST is never repeated: after a Coder 409 the workspace is re-read once to see whether the build that won
//! already does what was asked; after an uncertain POST a new build of the requested kind, started by the
//! operator's own user, confirms it, and anything else is a 504 that says the result is uncertain.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use coder_k8s_api::aggregation::{
    API_VERSION, CoderWorkspaceTransition, CoderWorkspaceTransitionStatus, GROUP, transition_outcomes,
};
use coder_k8s_coder_client::types::builds::{CreateWorkspaceBuildRequest, Transition, WorkspaceBuild};
use coder_k8s_coder_client::types::jobs::JobStatus;
use coder_k8s_coder_client::types::workspaces::Workspace;
use coder_k8s_coder_client::{CoderClient, Error as CoderError};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;
use tokio::time::Instant;

use super::errors::{map_coder_error, within};
use super::provider::Provider;
use super::resources::{WORKSPACES, subject};
use super::workspace_rules::{build_request, workspace_conflict};
use super::workspaces::{Resolved, resolve, with_build};
use crate::generic::{
    ApiError, EventType, ParentEvent, SubresourceDef, SubresourceHandler, SubresourceRequest, Verb,
};

/// The kind of the request and response body.
pub const KIND: &str = "CoderWorkspaceTransition";

/// The time limits of one start or stop request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransitionLimits {
    /// Every Coder call of the request ends within this (also within the request's own deadline).
    pub budget: Duration,
    /// The end of the budget kept for the re-read that confirms an uncertain build POST; the calls before it end
    /// this much earlier. Must be shorter than `budget`.
    pub confirm_reserve: Duration,
}

impl Default for TransitionLimits {
    fn default() -> Self {
        Self {
            budget: Duration::from_secs(25),
            confirm_reserve: Duration::from_secs(5),
        }
    }
}

/// Which subresource: `start` or `stop`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Start,
    Stop,
}

impl Action {
    /// The build transition the action queues.
    pub fn transition(self) -> Transition {
        match self {
            Self::Start => Transition::Start,
            Self::Stop => Transition::Stop,
        }
    }
}

/// The `start` subresource of `coderworkspaces`, backed by Coder through `provider`.
pub fn start(provider: Arc<dyn Provider>) -> SubresourceDef {
    subresource(provider, Action::Start, TransitionLimits::default())
}

/// The `stop` subresource of `coderworkspaces`.
pub fn stop(provider: Arc<dyn Provider>) -> SubresourceDef {
    subresource(provider, Action::Stop, TransitionLimits::default())
}

/// The `start` or `stop` subresource with other limits (tests use short ones).
pub fn subresource(provider: Arc<dyn Provider>, action: Action, limits: TransitionLimits) -> SubresourceDef {
    let transition = action.transition();
    SubresourceDef {
        name: transition_name(transition),
        kind: KIND,
        verbs: &[Verb::Create],
        handler: Arc::new(TransitionHandler {
            provider,
            transition,
            limits,
        }),
    }
}

/// What the latest build means for a request of one transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// A new build is needed.
    Queue,
    /// The latest build is that transition and still pending or running.
    InProgress,
    /// The latest build is that transition and succeeded.
    Unchanged,
}

/// The decision table on the latest build. Start: start pending/running → `InProgress`, start succeeded →
/// `Unchanged`, stop succeeded → `Queue`, stop pending/running → 409; stop: the same with start and stop swapped.
/// Any build being canceled and an active delete → 409 naming the build; a failed or canceled build → `Queue`; a
/// succeeded delete (only seen in a race: Coder hides deleted workspaces) → 404, so neither recreates it.
pub fn decide(want: Transition, name: &str, latest: &WorkspaceBuild) -> Result<Decision, ApiError> {
    let busy = |what: &str| {
        workspace_conflict(
            name,
            &format!(
                "a {} build {what} (build #{}, job {}); retry after it ends",
                transition_name(latest.transition),
                latest.build_number,
                job_status_name(latest.job.status)
            ),
        )
    };
    match latest.job.status {
        JobStatus::Pending | JobStatus::Running if latest.transition == want => Ok(Decision::InProgress),
        JobStatus::Pending | JobStatus::Running => Err(busy("is active")),
        JobStatus::Canceling => Err(busy("is being canceled")),
        JobStatus::Succeeded if latest.transition == want => Ok(Decision::Unchanged),
        JobStatus::Succeeded if latest.transition == Transition::Delete => {
            Err(ApiError::not_found(GROUP, WORKSPACES, name))
        }
        JobStatus::Succeeded | JobStatus::Failed | JobStatus::Canceled => Ok(Decision::Queue),
        JobStatus::Unknown => Err(ApiError::internal(format!(
            "the latest build of workspace {name:?} has a job status this server does not know"
        ))),
    }
}

/// `start`, `stop` or `delete`, as Coder and the transition status spell it.
pub fn transition_name(transition: Transition) -> &'static str {
    match transition {
        Transition::Start => "start",
        Transition::Stop => "stop",
        Transition::Delete => "delete",
    }
}

fn job_status_name(status: JobStatus) -> &'static str {
    match status {
        JobStatus::Pending => "pending",
        JobStatus::Running => "running",
        JobStatus::Succeeded => "succeeded",
        JobStatus::Canceling => "canceling",
        JobStatus::Canceled => "canceled",
        JobStatus::Failed => "failed",
        JobStatus::Unknown => "unknown",
    }
}

/// Whether a failed build POST leaves it open that Coder queued the build: no answer in time, a transport failure,
/// an unreadable answer, or a gateway's 502/503/504 (a proxy can fail after Coder accepted the build).
fn uncertain(error: &CoderError) -> bool {
    match error {
        CoderError::Unavailable { status, .. } => matches!(status, None | Some(502..=504)),
        CoderError::Decode { .. } | CoderError::BodyTooLarge { .. } => true,
        _ => false,
    }
}

/// Whether `found`, the latest build after an uncertain POST, is the build that POST queued: a new build of the
/// requested transition (and version, when one was named), started by the user of the operator's token. A build
/// someone else queued meanwhile does not confirm it.
fn confirms(
    previous: uuid::Uuid,
    found: &WorkspaceBuild,
    request: &CreateWorkspaceBuildRequest,
    me: uuid::Uuid,
) -> bool {
    found.id != previous
        && found.transition == request.transition
        && request
            .template_version_id
            .is_none_or(|v| v == found.template_version_id)
        && !me.is_nil()
        && found.initiator_id == me
}

/// The answer of a request: `status` for `name` in `namespace`, with no other field.
fn transition_object(
    name: &str,
    namespace: &str,
    status: CoderWorkspaceTransitionStatus,
) -> CoderWorkspaceTransition {
    CoderWorkspaceTransition {
        api_version: API_VERSION.to_owned(),
        kind: KIND.to_owned(),
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        status,
    }
}

/// The status of an outcome; the build fields name `build` when there is one.
fn status(
    transition: Transition,
    outcome: &str,
    dry_run: bool,
    build: Option<&WorkspaceBuild>,
) -> CoderWorkspaceTransitionStatus {
    CoderWorkspaceTransitionStatus {
        transition: transition_name(transition).to_owned(),
        outcome: outcome.to_owned(),
        dry_run,
        build_id: build.map(|b| b.id.to_string()).unwrap_or_default(),
        build_number: build
            .map(|b| i32::try_from(b.build_number).unwrap_or(i32::MAX))
            .unwrap_or_default(),
        job_status: build
            .map(|b| job_status_name(b.job.status).to_owned())
            .unwrap_or_default(),
    }
}

fn outcome_name(decision: Decision) -> &'static str {
    match decision {
        Decision::Queue => transition_outcomes::QUEUED,
        Decision::InProgress => transition_outcomes::IN_PROGRESS,
        Decision::Unchanged => transition_outcomes::UNCHANGED,
    }
}

/// Checks the optional request body: `{}` or nothing is enough; a `CoderWorkspaceTransition` may name the same
/// workspace and namespace as the URL; a status in it is ignored.
pub fn check_body(body: &[u8], content_type: &str, name: &str, namespace: &str) -> Result<(), ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    let value: Value = if content_type.contains("yaml") {
        serde_saphyr::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("the request body is not valid YAML: {e}")))?
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))?
    };
    if !value.is_object() {
        return Err(ApiError::bad_request(format!(
            "the request body must be a {KIND} object"
        )));
    }
    let given = |field: &str| value[field].as_str().filter(|v| !v.is_empty());
    if let Some(api_version) = given("apiVersion").filter(|v| *v != API_VERSION) {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({API_VERSION})"
        )));
    }
    if let Some(kind) = given("kind").filter(|k| *k != KIND) {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind ({KIND})"
        )));
    }
    let meta = &value["metadata"];
    if let Some(body_name) = meta["name"].as_str().filter(|n| !n.is_empty() && *n != name) {
        return Err(ApiError::bad_request(format!(
            "metadata.name {body_name:?} in the request body must match the workspace name {name:?} in the URL"
        )));
    }
    if meta["namespace"]
        .as_str()
        .is_some_and(|ns| !ns.is_empty() && ns != namespace)
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    Ok(())
}

struct TransitionHandler {
    provider: Arc<dyn Provider>,
    transition: Transition,
    limits: TransitionLimits,
}

/// The deadlines of one request.
#[derive(Clone, Copy, Debug)]
struct Deadlines {
    /// The lookup, the POST and the re-read after a Coder 409.
    calls: Instant,
    /// The re-read that confirms an uncertain POST.
    confirm: Instant,
}

/// What one request works on once the workspace was found.
struct Target<'a> {
    name: &'a str,
    namespace: &'a str,
    client: &'a CoderClient,
}

#[async_trait]
impl SubresourceHandler for TransitionHandler {
    async fn handle(&self, request: SubresourceRequest) -> Result<Response, ApiError> {
        let namespace = request
            .ctx
            .namespace
            .clone()
            .ok_or_else(|| ApiError::bad_request("namespace is required"))?;
        let content_type = request
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        check_body(&request.body, content_type, &request.name, &namespace)?;
        let deadlines = self.deadlines(request.ctx.deadline)?;
        let Resolved { backend, workspace } = resolve(
            self.provider.as_ref(),
            &request.ctx,
            &request.name,
            deadlines.calls,
        )
        .await?;
        let target = Target {
            name: &request.name,
            namespace: &namespace,
            client: &backend.client,
        };
        let latest = &workspace.latest_build;
        let dry_run = request.ctx.dry_run;
        match decide(self.transition, target.name, latest)? {
            Decision::Queue if dry_run => {
                let status = status(self.transition, transition_outcomes::WOULD_QUEUE, true, None);
                Ok(self.answer(&target, status))
            }
            Decision::Queue => self.queue(&target, workspace, deadlines).await,
            decided => {
                let status = status(self.transition, outcome_name(decided), dry_run, Some(latest));
                Ok(self.answer(&target, status))
            }
        }
    }
}

impl TransitionHandler {
    fn deadlines(&self, request_deadline: Instant) -> Result<Deadlines, ApiError> {
        let TransitionLimits {
            budget,
            confirm_reserve,
        } = self.limits;
        if confirm_reserve.is_zero() || confirm_reserve >= budget {
            return Err(ApiError::internal(format!(
                "the transition budget {budget:?} must be longer than its confirmation reserve {confirm_reserve:?}"
            )));
        }
        let now = Instant::now();
        Ok(Deadlines {
            calls: request_deadline.min(now + (budget - confirm_reserve)),
            confirm: request_deadline.min(now + budget),
        })
    }

    /// Posts the one build of this request and answers from Coder's reply.
    async fn queue(
        &self,
        target: &Target<'_>,
        workspace: Workspace,
        deadlines: Deadlines,
    ) -> Result<Response, ApiError> {
        let request = build_request(self.transition, &workspace)?;
        let posted = tokio::time::timeout_at(
            deadlines.calls,
            target.client.create_workspace_build(workspace.id, &request),
        )
        .await;
        match posted {
            Ok(Ok(build)) => self.queued(target, workspace, build),
            Ok(Err(CoderError::Conflict { message })) => {
                self.after_conflict(target, workspace.id, &message, deadlines)
                    .await
            }
            Ok(Err(error)) if !uncertain(&error) => {
                Err(map_coder_error(&error, subject(WORKSPACES, target.name)))
            }
            Ok(Err(_)) | Err(_) => self.confirm(target, &workspace, &request, deadlines).await,
        }
    }

    /// After a Coder 409 (another build became active after the lookup): one re-read decides whether that build
    /// already does what was asked; otherwise the 409 stands, with Coder's reason.
    async fn after_conflict(
        &self,
        target: &Target<'_>,
        workspace: uuid::Uuid,
        coder_message: &str,
        deadlines: Deadlines,
    ) -> Result<Response, ApiError> {
        let current = within(
            deadlines.calls,
            subject(WORKSPACES, target.name),
            target.client.workspace(workspace),
        )
        .await?;
        let latest = &current.latest_build;
        match decide(self.transition, target.name, latest) {
            Ok(Decision::Queue) => {}
            Ok(decided) => {
                let status = status(self.transition, outcome_name(decided), false, Some(latest));
                return Ok(self.answer(target, status));
            }
            Err(error) if error.code != 409 => return Err(error),
            Err(_) => {}
        }
        Err(workspace_conflict(
            target.name,
            &format!("{}; retry after the active build ends", coder_message.trim()),
        ))
    }

    /// After an uncertain POST: one re-read within the rest of the budget either finds the build this request
    /// queued (`Queued`) or the answer is a 504 that says the result is uncertain. The POST is never repeated.
    async fn confirm(
        &self,
        target: &Target<'_>,
        before: &Workspace,
        request: &CreateWorkspaceBuildRequest,
        deadlines: Deadlines,
    ) -> Result<Response, ApiError> {
        let reread = tokio::time::timeout_at(deadlines.confirm, async {
            let current = target.client.workspace(before.id).await.ok()?;
            let me = target.client.me().await.ok()?;
            confirms(before.latest_build.id, &current.latest_build, request, me.id).then_some(current)
        })
        .await;
        if let Ok(Some(current)) = reread {
            let build = current.latest_build.clone();
            return self.queued(target, current, build);
        }
        Err(ApiError::timeout(format!(
            "the result is uncertain: the Coder API did not confirm the {} build in time; re-read the workspace's latest build before you retry",
            transition_name(self.transition)
        )))
    }

    /// `Queued` for a build this request queued; watchers of `coderworkspaces` see the workspace with that build,
    /// as after an update of `spec.running`.
    fn queued(
        &self,
        target: &Target<'_>,
        workspace: Workspace,
        build: WorkspaceBuild,
    ) -> Result<Response, ApiError> {
        let status = status(self.transition, transition_outcomes::QUEUED, false, Some(&build));
        let object = with_build(target.namespace, workspace, build)?;
        let mut response = self.answer(target, status);
        response.extensions_mut().insert(ParentEvent {
            kind: EventType::Modified,
            object,
        });
        Ok(response)
    }

    /// Always 201 with the name, namespace and status only.
    fn answer(&self, target: &Target<'_>, status: CoderWorkspaceTransitionStatus) -> Response {
        let object = transition_object(target.name, target.namespace, status);
        match serde_json::to_vec(&object) {
            Ok(body) => (
                StatusCode::CREATED,
                [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))],
                body,
            )
                .into_response(),
            Err(e) => ApiError::internal(format!("serialize the transition answer: {e}")).into_response(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coder_k8s_coder_client::types::jobs::ProvisionerJob;

    fn build(transition: Transition, status: JobStatus) -> WorkspaceBuild {
        WorkspaceBuild {
            transition,
            build_number: 7,
            job: ProvisionerJob {
                status,
                ..ProvisionerJob::default()
            },
            ..WorkspaceBuild::default()
        }
    }

    /// What the table answers, as a short word: an outcome, or the error code.
    fn answer(want: Transition, latest: &WorkspaceBuild) -> String {
        match decide(want, "acme.alice.dev", latest) {
            Ok(Decision::Queue) => "Queue".into(),
            Ok(Decision::InProgress) => "InProgress".into(),
            Ok(Decision::Unchanged) => "Unchanged".into(),
            Err(error) => error.code.to_string(),
        }
    }

    #[test]
    fn the_decision_table_covers_every_latest_build() {
        use JobStatus::*;
        use Transition::{Delete, Start, Stop};
        let rows: [(Transition, JobStatus, &str, &str); 19] = [
            (Start, Pending, "InProgress", "409"),
            (Start, Running, "InProgress", "409"),
            (Start, Succeeded, "Unchanged", "Queue"),
            (Stop, Pending, "409", "InProgress"),
            (Stop, Running, "409", "InProgress"),
            (Stop, Succeeded, "Queue", "Unchanged"),
            (Delete, Pending, "409", "409"),
            (Delete, Running, "409", "409"),
            (Start, Canceling, "409", "409"),
            (Stop, Canceling, "409", "409"),
            (Delete, Canceling, "409", "409"),
            (Start, Failed, "Queue", "Queue"),
            (Start, Canceled, "Queue", "Queue"),
            (Stop, Failed, "Queue", "Queue"),
            (Stop, Canceled, "Queue", "Queue"),
            (Delete, Failed, "Queue", "Queue"),
            (Delete, Canceled, "Queue", "Queue"),
            (Delete, Succeeded, "404", "404"),
            (Start, Unknown, "500", "500"),
        ];
        for (transition, job, start, stop) in rows {
            let latest = build(transition, job);
            assert_eq!(answer(Start, &latest), start, "start on {transition:?}/{job:?}");
            assert_eq!(answer(Stop, &latest), stop, "stop on {transition:?}/{job:?}");
        }
    }

    #[test]
    fn conflicts_name_the_build_and_say_when_to_retry() {
        let active = decide(
            Transition::Start,
            "acme.alice.dev",
            &build(Transition::Stop, JobStatus::Running),
        )
        .unwrap_err();
        assert_eq!((active.code, active.reason), (409, "Conflict"));
        assert_eq!(
            active.message,
            r#"Operation cannot be fulfilled on coderworkspaces.aggregation.coder.com "acme.alice.dev": a stop build is active (build #7, job running); retry after it ends"#
        );
        let canceling = decide(
            Transition::Stop,
            "acme.alice.dev",
            &build(Transition::Delete, JobStatus::Canceling),
        )
        .unwrap_err();
        assert!(
            canceling
                .message
                .ends_with("a delete build is being canceled (build #7, job canceling); retry after it ends"),
            "{}",
            canceling.message
        );
    }

    #[test]
    fn only_unanswered_transport_and_gateway_failures_are_uncertain() {
        use coder_k8s_coder_client::UnavailableReason;
        let unavailable = |status| CoderError::Unavailable {
            reason: UnavailableReason::ServerError,
            status,
            message: String::new(),
        };
        for error in [
            unavailable(None),
            unavailable(Some(502)),
            unavailable(Some(503)),
            unavailable(Some(504)),
            CoderError::Decode {
                message: String::new(),
            },
        ] {
            assert!(uncertain(&error), "{error}");
        }
        for error in [
            unavailable(Some(500)),
            CoderError::Conflict {
                message: String::new(),
            },
            CoderError::Rejected {
                status: 400,
                message: String::new(),
            },
            CoderError::RateLimited {
                retry_after: None,
                message: String::new(),
            },
            CoderError::Forbidden {
                message: String::new(),
            },
        ] {
            assert!(!uncertain(&error), "{error}");
        }
    }

    #[test]
    fn only_a_new_build_of_the_request_by_the_operator_confirms_an_uncertain_post() {
        let me = uuid::Uuid::from_u128(1);
        let previous = uuid::Uuid::from_u128(2);
        let active = uuid::Uuid::from_u128(3);
        let new = WorkspaceBuild {
            id: uuid::Uuid::from_u128(4),
            transition: Transition::Start,
            initiator_id: me,
            template_version_id: active,
            ..WorkspaceBuild::default()
        };
        let start = CreateWorkspaceBuildRequest::transition(Transition::Start);
        let pinned = CreateWorkspaceBuildRequest {
            template_version_id: Some(active),
            ..start.clone()
        };
        assert!(confirms(previous, &new, &start, me));
        assert!(confirms(previous, &new, &pinned, me));
        assert!(
            !confirms(new.id, &new, &start, me),
            "the build seen before the POST"
        );
        assert!(!confirms(
            previous,
            &new,
            &CreateWorkspaceBuildRequest::transition(Transition::Stop),
            me
        ));
        assert!(
            !confirms(previous, &new, &start, uuid::Uuid::from_u128(9)),
            "another user's build"
        );
        assert!(!confirms(previous, &new, &start, uuid::Uuid::nil()));
        let other_version = CreateWorkspaceBuildRequest {
            template_version_id: Some(uuid::Uuid::from_u128(8)),
            ..start
        };
        assert!(!confirms(previous, &new, &other_version, me));
    }

    #[test]
    fn the_body_may_be_empty_or_name_the_same_workspace() {
        let check = |body: &str| check_body(body.as_bytes(), "application/json", "acme.alice.dev", "team");
        assert!(check("").is_ok());
        assert!(check("{}").is_ok());
        assert!(check(r#"{"apiVersion":"aggregation.coder.com/v1alpha1","kind":"CoderWorkspaceTransition","metadata":{"name":"acme.alice.dev","namespace":"team"},"status":{"outcome":"Unchanged"}}"#).is_ok());
        let other = check(r#"{"metadata":{"name":"acme.alice.other"}}"#).unwrap_err();
        assert_eq!(
            (other.code, other.message.as_str()),
            (
                400,
                r#"metadata.name "acme.alice.other" in the request body must match the workspace name "acme.alice.dev" in the URL"#
            )
        );
        assert_eq!(check(r#"{"kind":"CoderWorkspace"}"#).unwrap_err().code, 400);
        assert_eq!(check(r#"{"apiVersion":"v1"}"#).unwrap_err().code, 400);
        assert_eq!(
            check(r#"{"metadata":{"namespace":"other"}}"#).unwrap_err().code,
            400
        );
        assert_eq!(check("[]").unwrap_err().code, 400);
        assert_eq!(check("{").unwrap_err().code, 400);
        assert!(
            check_body(
                b"metadata:\n  name: acme.alice.dev\n",
                "application/yaml",
                "acme.alice.dev",
                "team"
            )
            .is_ok()
        );
    }

    #[test]
    fn statuses_carry_the_build_only_when_there_is_one() {
        let latest = WorkspaceBuild {
            id: uuid::Uuid::from_u128(5),
            build_number: 3,
            job: ProvisionerJob {
                status: JobStatus::Running,
                ..ProvisionerJob::default()
            },
            ..WorkspaceBuild::default()
        };
        let in_progress = status(Transition::Stop, "InProgress", true, Some(&latest));
        assert_eq!(
            serde_json::to_value(&in_progress).unwrap(),
            serde_json::json!({"transition": "stop", "outcome": "InProgress", "dryRun": true,
                               "buildID": latest.id.to_string(), "buildNumber": 3, "jobStatus": "running"})
        );
        let would = status(Transition::Start, "WouldQueue", true, None);
        assert_eq!(
            serde_json::to_value(transition_object("a.b.c", "team", would)).unwrap(),
            serde_json::json!({"apiVersion": "aggregation.coder.com/v1alpha1", "kind": "CoderWorkspaceTransition",
                               "metadata": {"name": "a.b.c", "namespace": "team"},
                               "status": {"transition": "start", "outcome": "WouldQueue", "dryRun": true}})
        );
    }

    #[test]
    fn a_reserve_as_long_as_the_budget_is_refused() {
        struct Nobody;
        #[async_trait]
        impl Provider for Nobody {
            async fn resolve(
                &self,
                _namespace: Option<&str>,
            ) -> Result<Vec<super::super::provider::Backend>, ApiError> {
                Ok(Vec::new())
            }
        }
        let handler = TransitionHandler {
            provider: Arc::new(Nobody),
            transition: Transition::Start,
            limits: TransitionLimits {
                budget: Duration::from_secs(1),
                confirm_reserve: Duration::from_secs(1),
            },
        };
        assert_eq!(handler.deadlines(Instant::now()).unwrap_err().code, 500);
        let fine = TransitionHandler {
            limits: TransitionLimits::default(),
            ..handler
        };
        let request_deadline = Instant::now() + Duration::from_secs(3);
        let deadlines = fine.deadlines(request_deadline).unwrap();
        assert_eq!(
            (deadlines.calls, deadlines.confirm),
            (request_deadline, request_deadline)
        );
        let far = Instant::now() + Duration::from_secs(600);
        let deadlines = fine.deadlines(far).unwrap();
        assert!(deadlines.calls < deadlines.confirm && deadlines.confirm < far);
    }
}
