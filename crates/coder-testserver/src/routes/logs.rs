//! Build and import logs: a JSON array, or with `?follow` a websocket of JSON text
//! frames that closes with 1000 "done" once the job has completed.

use std::time::Duration;

use axum::Router;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::Uri;
use axum::response::IntoResponse;
use axum::routing::get;
use serde_json::{Value, json};
use uuid::Uuid;

use super::{flag, query_params};
use crate::auth::Auth;
use crate::errors::{ApiError, ApiResult, ok, parse_uuid};
use crate::state::{App, Log, Mem};

const HEARTBEAT: Duration = Duration::from_secs(15);

pub(super) fn routes() -> Router<App> {
    Router::new()
        .route("/workspacebuilds/{id}/logs", get(build_logs))
        .route("/templateversions/{id}/logs", get(version_logs))
}

fn render_log(log: &Log) -> Value {
    json!({
        "id": log.id,
        "created_at": log.created_at,
        "log_source": log.source,
        "log_level": log.level,
        "stage": log.stage,
        "output": log.output,
    })
}

/// Logs of `job_id` after `after`, and whether the job has completed.
fn logs_after(mem: &Mem, job_id: Uuid, after: i64) -> (Vec<Value>, bool) {
    let logs = mem
        .logs
        .iter()
        .filter(|l| l.job_id == job_id && l.id > after)
        .map(render_log)
        .collect();
    let done = mem.jobs.get(&job_id).is_none_or(|j| j.completed_at.is_some());
    (logs, done)
}

async fn build_logs(
    State(app): State<App>,
    auth: Auth,
    Path(id): Path<String>,
    uri: Uri,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> ApiResult {
    let id = parse_uuid(&id)?;
    let job_id = {
        let mem = app.mem();
        let build = mem.build(id).ok_or_else(ApiError::not_found)?;
        let ws = mem
            .workspace(build.workspace_id)
            .ok_or_else(ApiError::not_found)?;
        if !auth.is_owner() && ws.owner.0 != auth.user.id {
            return Err(ApiError::not_found());
        }
        build.job_id
    };
    logs(app, job_id, &uri, upgrade)
}

async fn version_logs(
    State(app): State<App>,
    _auth: Auth,
    Path(id): Path<String>,
    uri: Uri,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> ApiResult {
    let id = parse_uuid(&id)?;
    let job_id = app.mem().version(id).ok_or_else(ApiError::not_found)?.job_id;
    logs(app, job_id, &uri, upgrade)
}

fn logs(
    app: App,
    job_id: Uuid,
    uri: &Uri,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> ApiResult {
    let params = query_params(uri);
    let after = match params.get("after").filter(|a| !a.is_empty()) {
        Some(after) => after
            .parse::<i64>()
            .map_err(|_| ApiError::bad_request("Query param \"after\" must be an integer."))?,
        None => 0,
    };
    if !flag(&params, "follow") {
        let (logs, _) = logs_after(&app.mem(), job_id, after);
        return ok(Value::Array(logs));
    }
    let upgrade =
        upgrade.map_err(|e| ApiError::bad_request("Failed to accept websocket.").detail(e.body_text()))?;
    Ok(upgrade
        .on_upgrade(move |socket| follow(app, job_id, after, socket))
        .into_response())
}

async fn follow(app: App, job_id: Uuid, mut after: i64, mut socket: WebSocket) {
    let mut changes = app.changes.subscribe();
    loop {
        changes.borrow_and_update();
        let (logs, done) = logs_after(&app.mem(), job_id, after);
        for log in logs {
            after = log["id"].as_i64().unwrap_or(after);
            if socket.send(Message::Text(log.to_string().into())).await.is_err() {
                return;
            }
        }
        if done {
            let frame = CloseFrame {
                code: 1000,
                reason: "done".into(),
            };
            let _ = socket.send(Message::Close(Some(frame))).await;
            // Wait (briefly) for the peer's close reply so the close handshake completes.
            let _ = tokio::time::timeout(Duration::from_secs(5), async {
                while let Some(Ok(message)) = socket.recv().await {
                    if matches!(message, Message::Close(_)) {
                        break;
                    }
                }
            })
            .await;
            return;
        }
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            incoming = socket.recv() => {
                match incoming {
                    None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                    Some(Ok(_)) => {}
                }
            }
            () = tokio::time::sleep(HEARTBEAT) => {
                if socket.send(Message::Ping(bytes::Bytes::new())).await.is_err() {
                    return;
                }
            }
        }
    }
}
