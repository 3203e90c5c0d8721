//! `codertemplates/<name>/promote`: makes an existing version of a template its active version.
//!
//! Every answer reports what the server saw in Coder. The request is checked first (the version ID, that it is a
//! version of this template whose import succeeded and that is not archived); an already active version and a dry
//! run send no write. The activation is sent once, only when enough of the request time is left for it and for the
//! re-read that confirms it, and it is never retried: Coder's refusal is mapped to a fixed message, and anything else
//! (success, timeout, transport error, 5xx) is settled by reading the template once more.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use coder_k8s_api::aggregation::{
    API_VERSION, CoderTemplateVersionPromotion, CoderTemplateVersionPromotionSpec,
    CoderTemplateVersionPromotionStatus, GROUP, promotion_results,
};
use coder_k8s_coder_client::types::jobs::JobStatus;
use coder_k8s_coder_client::types::templates::Template;
use coder_k8s_coder_client::{CoderClient, Error as CoderError};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;
use tokio::time::Instant;
use uuid::Uuid;

use super::errors::{map_coder_error, within};
use super::names::{self, TemplateName};
use super::provider::Provider;
use super::resources::{TEMPLATES, backend_of, not_canonical, subject};
use super::templates::named_template;
use crate::generic::negotiate::{self, Answering, BodyType, ResponseFormat};
use crate::generic::{ApiError, SubresourceDef, SubresourceHandler, SubresourceRequest, Verb};

/// The kind of the request and response body.
pub const KIND: &str = "CoderTemplateVersionPromotion";

/// How the promotion spends the request's time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PromoteSettings {
    /// The most the activation call may take (10 s).
    pub activation_budget: Duration,
    /// Time kept for the confirming re-read and the answer (5 s). The re-read ends a fifth of it before the request
    /// deadline, so an activation is always followed by this server's own answer.
    pub reread_reserve: Duration,
}

impl Default for PromoteSettings {
    fn default() -> Self {
        Self {
            activation_budget: Duration::from_secs(10),
            reread_reserve: Duration::from_secs(5),
        }
    }
}

/// The `promote` subresource of `codertemplates`.
pub fn subresource(provider: Arc<dyn Provider>) -> SubresourceDef {
    subresource_with(provider, PromoteSettings::default())
}

/// The `promote` subresource with other time settings (tests).
pub fn subresource_with(provider: Arc<dyn Provider>, settings: PromoteSettings) -> SubresourceDef {
    SubresourceDef {
        name: "promote",
        kind: KIND,
        verbs: &[Verb::Create],
        handler: Arc::new(PromoteHandler { provider, settings }),
    }
}

struct PromoteHandler {
    provider: Arc<dyn Provider>,
    settings: PromoteSettings,
}

/// A checked request: the template named, and the version to activate.
struct Checked {
    name: String,
    template_name: TemplateName,
    version: Uuid,
}

#[async_trait]
impl SubresourceHandler for PromoteHandler {
    async fn handle(&self, request: SubresourceRequest) -> Result<Response, ApiError> {
        let format = negotiate::response_format(&request.headers, Answering::Object, None)?;
        let checked = check_request(&request)?;
        let namespace = request.ctx.namespace.clone().unwrap_or_default();
        let Some(backend) = backend_of(self.provider.as_ref(), &request.ctx).await? else {
            return Err(ApiError::not_found(GROUP, TEMPLATES, &checked.name));
        };
        let outcome = self
            .promote(
                &backend.client,
                &checked,
                request.ctx.deadline,
                request.ctx.dry_run,
            )
            .await?;
        let body = answer(&checked, &namespace, outcome)?;
        Ok(respond(&format, &body))
    }
}

/// What the promotion found: the result, and the active version before and after.
struct Outcome {
    result: &'static str,
    previous: Uuid,
    active: Uuid,
}

impl PromoteHandler {
    async fn promote(
        &self,
        client: &CoderClient,
        checked: &Checked,
        deadline: Instant,
        dry_run: bool,
    ) -> Result<Outcome, ApiError> {
        let template = lookup_template(client, checked, deadline).await?;
        require_promotable(client, checked, &template, deadline).await?;
        let previous = template.active_version_id;
        let outcome = |result, active| Outcome {
            result,
            previous,
            active,
        };
        // Coder accepts a repeated activation but still records it: an active version gets no request at all.
        if previous == checked.version {
            return Ok(outcome(promotion_results::ALREADY_ACTIVE, previous));
        }
        if dry_run {
            return Ok(outcome(promotion_results::WOULD_PROMOTE, previous));
        }
        let needed = self.settings.activation_budget + self.settings.reread_reserve;
        if deadline.saturating_duration_since(Instant::now()) < needed {
            return Err(not_attempted(checked));
        }
        let activation = self.activate(client, checked, &template).await;
        if let Err(error) = &activation
            && let Some(refusal) = refusal(error, checked)
        {
            return Err(refusal);
        }
        let reread_deadline = deadline
            .checked_sub(self.settings.reread_reserve / 5)
            .unwrap_or(deadline);
        let confirmed = tokio::time::timeout_at(reread_deadline, client.template(template.id))
            .await
            .map_err(|_| could_not_confirm(checked))?
            .map_err(|_| could_not_confirm(checked))?;
        match confirmed.active_version_id {
            active if active == checked.version => Ok(outcome(promotion_results::PROMOTED, active)),
            active if activation.is_err() && active == previous => Err(could_not_confirm(checked)),
            active => Err(superseded(checked, active)),
        }
    }

    /// The one activation call, bounded by the activation budget (a timeout reads as an uncertain answer).
    async fn activate(
        &self,
        client: &CoderClient,
        checked: &Checked,
        template: &Template,
    ) -> Result<(), CoderError> {
        let call = client.promote_template_version(template.id, checked.version);
        match tokio::time::timeout(self.settings.activation_budget, call).await {
            Ok(result) => result,
            Err(_) => Err(CoderError::Unavailable {
                reason: coder_k8s_coder_client::UnavailableReason::Timeout,
                status: None,
                message: "the activation did not answer within its budget".to_owned(),
            }),
        }
    }
}

/// The body's version ID (422 unless a UUID other than the nil one), its name (empty or the template's) and the
/// template name in the path.
fn check_request(request: &SubresourceRequest) -> Result<Checked, ApiError> {
    let name = request.name.clone();
    let template_name = names::parse_template_name(&name)?;
    let body = decode_body(request)?;
    check_type(&body)?;
    if !body.metadata.name.as_deref().unwrap_or_default().is_empty()
        && body.metadata.name.as_deref() != Some(name.as_str())
    {
        return Err(ApiError::bad_request(format!(
            "metadata.name {:?} must be empty or match the template name {name:?}",
            body.metadata.name.unwrap_or_default()
        )));
    }
    if let (Some(given), Some(namespace)) = (&body.metadata.namespace, &request.ctx.namespace)
        && !given.is_empty()
        && given != namespace
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let raw = body.spec.version_id;
    let version = Uuid::parse_str(&raw)
        .ok()
        .filter(|id| !id.is_nil())
        .ok_or_else(|| {
            ApiError::invalid(format!(
                "{KIND}.{GROUP} {name:?} is invalid: spec.versionID: Invalid value: {raw:?}: must be the Coder ID (a UUID) of a template version"
            ))
        })?;
    Ok(Checked {
        name,
        template_name,
        version,
    })
}

/// The body as JSON or YAML by `Content-Type`; an empty body reads as `{}`.
fn decode_body(request: &SubresourceRequest) -> Result<CoderTemplateVersionPromotion, ApiError> {
    if request.body.iter().all(u8::is_ascii_whitespace) {
        return Ok(CoderTemplateVersionPromotion::default());
    }
    let parsed = match negotiate::body_type(&request.headers, false)? {
        BodyType::Yaml => serde_saphyr::from_slice::<CoderTemplateVersionPromotion>(&request.body)
            .map_err(|e| e.to_string()),
        _ => {
            serde_json::from_slice::<CoderTemplateVersionPromotion>(&request.body).map_err(|e| e.to_string())
        }
    };
    parsed.map_err(|e| ApiError::bad_request(format!("the body is not a valid {KIND}: {e}")))
}

/// `apiVersion` and `kind`, when given, must name this body.
fn check_type(body: &CoderTemplateVersionPromotion) -> Result<(), ApiError> {
    if !body.api_version.is_empty() && body.api_version != API_VERSION {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({}) does not match the expected API version ({API_VERSION})",
            body.api_version
        )));
    }
    if !body.kind.is_empty() && body.kind != KIND {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({}) does not match the expected kind ({KIND})",
            body.kind
        )));
    }
    Ok(())
}

/// The template named exactly as requested: another spelling of the organization is a 400 that corrects it (the
/// template segment is checked only after that), an organization or template Coder does not show a 404.
async fn lookup_template(
    client: &CoderClient,
    checked: &Checked,
    deadline: Instant,
) -> Result<Template, ApiError> {
    let about = subject(TEMPLATES, &checked.name);
    let requested = &checked.template_name;
    let organization = within(deadline, about, client.organization(&requested.organization)).await?;
    if organization.name != requested.organization {
        let corrected = format!("{}.{}", organization.name, requested.template);
        return Err(not_canonical("template", &checked.name, &corrected));
    }
    named_template(
        client,
        deadline,
        TEMPLATES,
        &checked.name,
        &requested.organization,
        &requested.template,
    )
    .await
}

/// The version must belong to the template, be unarchived and have a succeeded import. An unknown version and one of
/// another template get the same answer, so the answer does not tell whether the other template's version exists.
async fn require_promotable(
    client: &CoderClient,
    checked: &Checked,
    template: &Template,
    deadline: Instant,
) -> Result<(), ApiError> {
    let about = subject(TEMPLATES, &checked.name);
    let version = match tokio::time::timeout_at(deadline, client.template_version(checked.version)).await {
        Err(_) => return Err(super::errors::timed_out(about)),
        Ok(Err(error)) if error.is_not_found() => return Err(not_a_version(checked)),
        Ok(Err(error)) => return Err(map_coder_error(&error, about)),
        Ok(Ok(version)) => version,
    };
    if version.template_id != Some(template.id) {
        return Err(not_a_version(checked));
    }
    if version.archived {
        return Err(ApiError::bad_request(format!(
            "version {} of template {:?} is archived; unarchive it in Coder before promoting it",
            checked.version, checked.name
        )));
    }
    if version.job.status != JobStatus::Succeeded {
        return Err(ApiError::bad_request(format!(
            "version {} of template {:?} cannot be promoted: its import job is {:?}; only versions whose import succeeded can be promoted",
            checked.version,
            checked.name,
            job_status(version.job.status)
        )));
    }
    Ok(())
}

fn job_status(status: JobStatus) -> &'static str {
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

/// Coder's refusal of the activation (a 4xx: nothing was applied) as a fixed message; `None` for answers that leave
/// the outcome open (success, timeout, transport error, 5xx). Coder's own text is not passed on.
fn refusal(error: &CoderError, checked: &Checked) -> Option<ApiError> {
    let status = error.status().filter(|s| (400..500).contains(s))?;
    Some(match status {
        404 => conflict(
            checked,
            &format!(
                "the template or version {} was not found in Coder during the activation; nothing was changed: re-read before retrying",
                checked.version
            ),
        ),
        429 => {
            let limited = ApiError::new(
                429,
                "TooManyRequests",
                "Coder rate-limited the activation; nothing was changed",
            );
            match error.retry_after() {
                Some(wait) => {
                    limited.with_retry_after(u32::try_from(wait.as_secs()).unwrap_or(u32::MAX).max(1))
                }
                None => limited,
            }
        }
        // A Coder 403 means the version cannot be promoted, not that the caller lacks access.
        other => ApiError::bad_request(format!(
            "Coder refused to activate version {} on template {:?} (status {other}); nothing was changed: check that its import succeeded and that it is not archived",
            checked.version, checked.name
        )),
    })
}

fn not_a_version(checked: &Checked) -> ApiError {
    ApiError::bad_request(format!(
        "spec.versionID is not a version of template {:?}",
        checked.name
    ))
}

fn not_attempted(checked: &Checked) -> ApiError {
    ApiError::timeout(format!(
        "Timeout: the promotion of version {} on template {:?} was not attempted: too little of the request time was left after the lookups; nothing was sent to Coder, so it is safe to try again",
        checked.version, checked.name
    ))
}

/// 503 without `Retry-After`: the activation may have been applied.
fn could_not_confirm(checked: &Checked) -> ApiError {
    ApiError::service_unavailable(format!(
        "could not confirm the promotion of version {} on template {:?}; it may or may not have been applied: re-read the template before retrying",
        checked.version, checked.name
    ))
}

fn superseded(checked: &Checked, active: Uuid) -> ApiError {
    conflict(
        checked,
        &format!(
            "the promotion of version {} was superseded by a concurrent change: version {active} is active; re-read before retrying",
            checked.version
        ),
    )
}

/// kube-apiserver's wording of a 409 Conflict about the template.
fn conflict(checked: &Checked, reason: &str) -> ApiError {
    ApiError::conflict(format!(
        "Operation cannot be fulfilled on {TEMPLATES}.{GROUP} {:?}: {reason}",
        checked.name
    ))
    .with_details(&checked.name, GROUP, TEMPLATES)
}

/// The response body: the request's name and version with what the server found.
fn answer(checked: &Checked, namespace: &str, outcome: Outcome) -> Result<Value, ApiError> {
    let body = CoderTemplateVersionPromotion {
        api_version: API_VERSION.to_owned(),
        kind: KIND.to_owned(),
        metadata: ObjectMeta {
            name: Some(checked.name.clone()),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        spec: CoderTemplateVersionPromotionSpec {
            version_id: checked.version.to_string(),
        },
        status: CoderTemplateVersionPromotionStatus {
            result: outcome.result.to_owned(),
            previous_active_version_id: outcome.previous.to_string(),
            active_version_id: outcome.active.to_string(),
        },
    };
    serde_json::to_value(body).map_err(|e| ApiError::internal(format!("encode the promotion: {e}")))
}

/// 201 in the negotiated encoding (YAML when asked for, JSON otherwise).
fn respond(format: &ResponseFormat, body: &Value) -> Response {
    let (content_type, text) = match format {
        ResponseFormat::Yaml => match serde_saphyr::to_string(body) {
            Ok(text) => ("application/yaml", text),
            Err(e) => {
                return ApiError::internal(format!("could not encode the answer as YAML: {e}"))
                    .into_response();
            }
        },
        _ => ("application/json", body.to_string()),
    };
    let mut response = (StatusCode::CREATED, text).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generic::{RequestContext, UserInfo};
    use bytes::Bytes;
    use std::collections::BTreeMap;

    fn request(name: &str, body: &str) -> SubresourceRequest {
        SubresourceRequest {
            ctx: RequestContext {
                user: UserInfo::default(),
                namespace: Some("team".into()),
                deadline: Instant::now(),
                dry_run: false,
                query: BTreeMap::new(),
            },
            name: name.to_owned(),
            method: http::Method::POST,
            headers: http::HeaderMap::new(),
            body: Bytes::copy_from_slice(body.as_bytes()),
        }
    }

    fn checked() -> Checked {
        Checked {
            name: "acme.docker".into(),
            template_name: names::parse_template_name("acme.docker").unwrap(),
            version: Uuid::from_u128(7),
        }
    }

    #[test]
    fn the_version_id_must_be_a_uuid() {
        let id = Uuid::from_u128(9);
        let body =
            format!(r#"{{"apiVersion":"{API_VERSION}","kind":"{KIND}","spec":{{"versionID":"{id}"}}}}"#);
        assert_eq!(check_request(&request("acme.docker", &body)).unwrap().version, id);
        for bad in [
            r#"{"spec":{"versionID":"v1"}}"#,
            r#"{"spec":{"versionID":"00000000-0000-0000-0000-000000000000"}}"#,
            "{}",
            "",
        ] {
            let error = check_request(&request("acme.docker", bad)).err().unwrap();
            assert_eq!((error.code, error.reason), (422, "Invalid"), "{bad}");
            assert!(
                error.message.starts_with(
                    "CoderTemplateVersionPromotion.aggregation.coder.com \"acme.docker\" is invalid: spec.versionID"
                ),
                "{}",
                error.message
            );
        }
    }

    #[test]
    fn names_kinds_and_bodies_are_checked() {
        let id = Uuid::from_u128(9);
        let with = |meta: &str| format!(r#"{{"metadata":{meta},"spec":{{"versionID":"{id}"}}}}"#);
        assert!(check_request(&request("acme.docker", &with(r#"{"name":"acme.docker"}"#))).is_ok());
        let error = check_request(&request("acme.docker", &with(r#"{"name":"acme.other"}"#)))
            .err()
            .unwrap();
        assert_eq!(
            error.message,
            r#"metadata.name "acme.other" must be empty or match the template name "acme.docker""#
        );
        let error = check_request(&request("acme.docker", &with(r#"{"namespace":"other"}"#)))
            .err()
            .unwrap();
        assert_eq!(error.code, 400);
        let wrong_kind = format!(r#"{{"kind":"CoderTemplate","spec":{{"versionID":"{id}"}}}}"#);
        assert_eq!(
            check_request(&request("acme.docker", &wrong_kind))
                .err()
                .unwrap()
                .code,
            400
        );
        assert_eq!(
            check_request(&request("acme.docker", "{")).err().unwrap().code,
            400
        );
        assert_eq!(check_request(&request("docker", "{}")).err().unwrap().code, 400);
    }

    #[test]
    fn coders_refusals_have_fixed_messages() {
        let checked = checked();
        let rejected = |status| CoderError::Rejected {
            status,
            message: "secret detail".into(),
        };
        let gone = refusal(&CoderError::NotFound { message: "x".into() }, &checked).unwrap();
        assert_eq!((gone.code, gone.reason), (409, "Conflict"));
        assert!(
            gone.message
                .contains("was not found in Coder during the activation"),
            "{}",
            gone.message
        );
        let limited = refusal(
            &CoderError::RateLimited {
                retry_after: None,
                message: "slow".into(),
            },
            &checked,
        )
        .unwrap();
        assert_eq!(
            (limited.code, limited.message.as_str()),
            (429, "Coder rate-limited the activation; nothing was changed")
        );
        for status in [400, 403, 422] {
            let error = refusal(&rejected(status), &checked).unwrap();
            assert_eq!(error.code, 400);
            assert!(
                error.message.starts_with("Coder refused to activate version"),
                "{}",
                error.message
            );
            assert!(error.message.contains(&format!("(status {status})")));
            assert!(!error.message.contains("secret detail"));
        }
        let uncertain = CoderError::Unavailable {
            reason: coder_k8s_coder_client::UnavailableReason::ServerError,
            status: Some(503),
            message: "down".into(),
        };
        assert!(refusal(&uncertain, &checked).is_none());
    }

    #[test]
    fn a_promotion_needs_ten_seconds_for_the_activation_and_five_for_the_re_read() {
        let settings = PromoteSettings::default();
        assert_eq!(
            (settings.activation_budget, settings.reread_reserve),
            (Duration::from_secs(10), Duration::from_secs(5))
        );
    }

    #[test]
    fn the_answer_carries_the_outcome() {
        let body = answer(
            &checked(),
            "team",
            Outcome {
                result: promotion_results::PROMOTED,
                previous: Uuid::from_u128(1),
                active: Uuid::from_u128(7),
            },
        )
        .unwrap();
        assert_eq!(body["kind"], KIND);
        assert_eq!(body["metadata"]["name"], "acme.docker");
        assert_eq!(body["metadata"]["namespace"], "team");
        assert_eq!(body["spec"]["versionID"], Uuid::from_u128(7).to_string());
        assert_eq!(body["status"]["result"], "Promoted");
        assert_eq!(
            body["status"]["previousActiveVersionID"],
            Uuid::from_u128(1).to_string()
        );
        assert_eq!(body["status"]["activeVersionID"], Uuid::from_u128(7).to_string());
    }
}
