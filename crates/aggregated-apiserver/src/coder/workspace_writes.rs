//! The Coder calls behind the settings and parameters of `coderworkspaces` writes, in the order an update makes
//! them: the autostart schedule first (Coder checks its zone, so a refusal leaves everything else unwritten), then
//! the one build (with changed parameter values), then the time to live and automatic updates, which were checked
//! in full before. A failure stops at that call; a repeated write finds the earlier ones done and finishes the
//! rest. Also the single-object view (with the latest build's parameters and recorded Secret references).

use std::collections::BTreeMap;
use std::sync::Arc;

use coder_k8s_api::aggregation::{CoderWorkspaceSecretKeyRef, GROUP};
use coder_k8s_coder_client::CoderClient;
use coder_k8s_coder_client::types::builds::CreateWorkspaceBuildRequest;
use coder_k8s_coder_client::types::workspaces::{
    RichParameterValue, UpdateWorkspaceAutomaticUpdatesRequest, UpdateWorkspaceAutostartRequest,
    UpdateWorkspaceTtlRequest, Workspace,
};
use serde_json::Value;
use tokio::time::Instant;
use uuid::Uuid;

use super::convert;
use super::errors::within;
use super::field_errors::{self, FieldError};
use super::resources::{WORKSPACES, subject};
use super::workspace_secrets::{ParameterSecrets, Record, recorded_references};
use super::workspace_settings::{self as settings, FieldErrors, SettingsChanges, WantedValue};
use crate::generic::ApiError;

/// One workspace a request works on in Coder.
pub(crate) struct Target<'a> {
    pub client: &'a CoderClient,
    pub namespace: &'a str,
    /// The object name (`<organization>.<owner>.<workspace>`).
    pub name: &'a str,
    pub deadline: Instant,
    pub secrets: Option<&'a Arc<dyn ParameterSecrets>>,
}

impl Target<'_> {
    /// The object with the parameter values of `workspace`'s latest build.
    pub async fn shown(&self, workspace: &Workspace) -> Result<Value, ApiError> {
        let values = self.build_values(workspace.latest_build.id).await?;
        self.shown_with(workspace, &values).await
    }

    /// The object with `values`, a parameter recorded as set from a Secret shown as its reference.
    pub async fn shown_with(
        &self,
        workspace: &Workspace,
        values: &[RichParameterValue],
    ) -> Result<Value, ApiError> {
        let references = recorded_references(self.secrets, self.namespace, self.name, workspace.id).await?;
        convert::workspace_with_parameters(
            self.namespace,
            workspace,
            settings::shown_parameters(values, &references),
        )
    }

    /// The object of a workspace just written: with its parameters when they can be read, else without (the
    /// write happened; its answer must not turn into an error).
    pub async fn written(&self, workspace: &Workspace) -> Result<Value, ApiError> {
        match self.shown(workspace).await {
            Ok(object) => Ok(object),
            Err(error) => {
                tracing::info!(workspace = %self.name, error = %error.message, "answering a workspace write without its parameters");
                convert::workspace(self.namespace, workspace)
            }
        }
    }

    /// `GET /workspacebuilds/{id}/parameters`.
    pub async fn build_values(&self, build: Uuid) -> Result<Vec<RichParameterValue>, ApiError> {
        within(
            self.deadline,
            subject(WORKSPACES, self.name),
            self.client.workspace_build_parameters(build),
        )
        .await
    }

    /// The references recorded for this workspace.
    pub async fn recorded(
        &self,
        workspace: Uuid,
    ) -> Result<BTreeMap<String, CoderWorkspaceSecretKeyRef>, ApiError> {
        recorded_references(self.secrets, self.namespace, self.name, workspace).await
    }

    /// The record of this name as stored, whichever workspace it was written for.
    pub async fn stored_record(&self) -> Result<Option<Record>, ApiError> {
        match self.secrets {
            Some(secrets) => secrets.recorded(self.namespace, self.name).await,
            None => Ok(None),
        }
    }

    /// Records `references` (none: removes the record). Without a record store there is nothing to record: a
    /// reference was refused before.
    pub async fn record(
        &self,
        workspace: Option<Uuid>,
        references: BTreeMap<String, CoderWorkspaceSecretKeyRef>,
    ) -> Result<(), ApiError> {
        let Some(secrets) = self.secrets else {
            return Ok(());
        };
        let record = Record {
            workspace_id: workspace,
            references,
        };
        secrets.record(self.namespace, self.name, &record).await
    }

    /// The changed values checked against the parameters of template version `version` (a 422 naming each
    /// unknown or immutable parameter).
    pub async fn check_parameters(
        &self,
        version: Uuid,
        changed: &[WantedValue],
        current: Option<&[RichParameterValue]>,
    ) -> Result<(), ApiError> {
        let parameters = within(
            self.deadline,
            subject(WORKSPACES, self.name),
            self.client.template_version_rich_parameters(version),
        )
        .await?;
        let mut errors = FieldErrors::default();
        settings::check_against_version(changed, &parameters, current, &mut errors);
        errors.into_result(self.name)
    }

    /// A Coder 400 about a setting as the 422 of the spec field, with Coder's reason.
    pub fn refused_setting(&self, error: ApiError, field: &str, value: &str) -> ApiError {
        if error.code != 400 {
            return error;
        }
        let reason = FieldError::invalid(field, value, error.message.clone());
        field_errors::invalid("CoderWorkspace", GROUP, self.name, &[reason]).unwrap_or(error)
    }

    /// `PUT /workspaces/{id}/autostart`.
    pub async fn write_autostart(&self, workspace: Uuid, schedule: &Option<String>) -> Result<(), ApiError> {
        let request = UpdateWorkspaceAutostartRequest {
            schedule: schedule.clone(),
        };
        within(
            self.deadline,
            subject(WORKSPACES, self.name),
            self.client.update_workspace_autostart(workspace, &request),
        )
        .await
        .map_err(|e| {
            self.refused_setting(
                e,
                "spec.autostartSchedule",
                schedule.as_deref().unwrap_or_default(),
            )
        })
    }

    /// `PUT /workspaces/{id}/ttl`.
    pub async fn write_ttl(&self, workspace: Uuid, ttl_ms: Option<i64>) -> Result<(), ApiError> {
        let request = UpdateWorkspaceTtlRequest { ttl_ms };
        within(
            self.deadline,
            subject(WORKSPACES, self.name),
            self.client.update_workspace_ttl(workspace, &request),
        )
        .await
        .map_err(|e| self.refused_setting(e, "spec.ttlMillis", &ttl_ms.unwrap_or_default().to_string()))
    }

    /// `PUT /workspaces/{id}/autoupdates`.
    pub async fn write_automatic_updates(&self, workspace: Uuid, value: &str) -> Result<(), ApiError> {
        let request = UpdateWorkspaceAutomaticUpdatesRequest {
            automatic_updates: value.to_owned(),
        };
        within(
            self.deadline,
            subject(WORKSPACES, self.name),
            self.client
                .update_workspace_automatic_updates(workspace, &request),
        )
        .await
        .map_err(|e| self.refused_setting(e, "spec.automaticUpdates", value))
    }

    /// The writes of an update, in order; `workspace` follows them (its settings and latest build). `sensitive`
    /// are the build's values from Secrets, which no error text may repeat. A failure says whether the build (with
    /// its values) may have reached Coder.
    pub async fn write_update(
        &self,
        workspace: &mut Workspace,
        changes: &SettingsChanges,
        build: Option<&CreateWorkspaceBuildRequest>,
        sensitive: &[&str],
    ) -> Result<(), UpdateFailure> {
        if let Some(schedule) = &changes.autostart {
            self.write_autostart(workspace.id, schedule)
                .await
                .map_err(UpdateFailure::before_build)?;
            workspace.autostart_schedule.clone_from(schedule);
        }
        if let Some(request) = build {
            let queued = within(
                self.deadline,
                subject(WORKSPACES, self.name),
                self.client
                    .create_workspace_build_redacting(workspace.id, request, sensitive),
            )
            .await
            .map_err(|error| UpdateFailure {
                build_may_be_queued: !settings::certainly_refused(&error),
                error,
            })?;
            if !queued.updated_at.is_empty() {
                workspace.updated_at.clone_from(&queued.updated_at);
            }
            workspace.latest_build = queued;
        }
        let after_build = |error| UpdateFailure {
            error,
            build_may_be_queued: build.is_some(),
        };
        if let Some(ttl_ms) = changes.ttl_ms {
            self.write_ttl(workspace.id, ttl_ms).await.map_err(after_build)?;
            workspace.ttl_ms = ttl_ms;
        }
        if let Some(updates) = &changes.automatic_updates {
            self.write_automatic_updates(workspace.id, updates)
                .await
                .map_err(after_build)?;
            workspace.automatic_updates.clone_from(updates);
        }
        Ok(())
    }
}

/// An update that stopped at a failed Coder call.
pub(crate) struct UpdateFailure {
    pub error: ApiError,
    /// The build was queued, or its call failed without a refusal (a timeout, a 5xx).
    pub build_may_be_queued: bool,
}

impl UpdateFailure {
    fn before_build(error: ApiError) -> Self {
        Self {
            error,
            build_may_be_queued: false,
        }
    }
}
