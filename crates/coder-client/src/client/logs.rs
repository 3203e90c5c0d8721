//! Provisioner job log calls of [`CoderClient`] for template versions and workspace builds: the logs
//! so far, and the followed `?follow` websocket stream ([`LogStream`]).

use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use uuid::Uuid;

use super::transport::Ws;
use super::{CoderClient, Result};
use crate::error::{Error, UnavailableReason};
use crate::types::logs::ProvisionerJobLog;

/// A stream of job logs from a `?follow` websocket; it ends after Coder's close 1000.
pub type LogStream = Pin<Box<dyn Stream<Item = Result<ProvisionerJobLog>> + Send>>;

/// The open websocket and the idle timeout; `None` once the stream has ended.
type FollowState = Option<(Ws, Duration)>;

impl CoderClient {
    /// `GET /api/v2/templateversions/{id}/logs[?after=N]`: the logs so far.
    pub async fn template_version_logs(
        &self,
        id: Uuid,
        after: Option<i64>,
    ) -> Result<Vec<ProvisionerJobLog>> {
        self.job_logs("templateversions", id, after).await
    }

    /// Follows the import logs of a template version (`?follow&after=N` websocket).
    pub async fn follow_template_version_logs(&self, id: Uuid, after: i64) -> Result<LogStream> {
        self.follow_logs("templateversions", id, after).await
    }

    /// `GET /api/v2/workspacebuilds/{id}/logs[?after=N]`: the logs so far.
    pub async fn workspace_build_logs(&self, id: Uuid, after: Option<i64>) -> Result<Vec<ProvisionerJobLog>> {
        self.job_logs("workspacebuilds", id, after).await
    }

    /// Follows the logs of a build (`?follow&after=N` websocket). The stream ends after Coder's close
    /// 1000 (job done); any other end yields one [`Error::Unavailable`] and stops.
    pub async fn follow_workspace_build_logs(&self, id: Uuid, after: i64) -> Result<LogStream> {
        self.follow_logs("workspacebuilds", id, after).await
    }

    /// `GET /api/v2/workspacebuilds/{id}/logs` as raw JSON, read up to `limit` bytes. A longer answer is cut at
    /// `limit` and reported with `true` (the caller decodes the complete entries), where
    /// [`CoderClient::workspace_build_logs`] would fail with [`Error::BodyTooLarge`].
    pub async fn workspace_build_logs_capped(&self, id: Uuid, limit: usize) -> Result<(Bytes, bool)> {
        let url = self.endpoint(&["workspacebuilds", &id.to_string(), "logs"])?;
        self.get_capped(url, limit).await
    }

    async fn job_logs(&self, kind: &str, id: Uuid, after: Option<i64>) -> Result<Vec<ProvisionerJobLog>> {
        let after = after.map(|a| a.to_string());
        let query: Vec<(&str, &str)> = after.iter().map(|a| ("after", a.as_str())).collect();
        self.get_json(&[kind, &id.to_string(), "logs"], &query).await
    }

    /// Opens the `?follow&after=N` websocket; the stream is bounded by the log idle timeout, not by
    /// the call timeout.
    async fn follow_logs(&self, kind: &str, id: Uuid, after: i64) -> Result<LogStream> {
        let mut url = self.endpoint(&[kind, &id.to_string(), "logs"])?;
        url.set_query(Some(&format!("follow&after={after}")));
        let ws = self.open_websocket(url).await?;
        let idle = self.inner.options.log_idle_timeout;
        Ok(Box::pin(futures::stream::unfold(Some((ws, idle)), next_log)))
    }
}

/// One step of a [`LogStream`]: the next log, or the error that ends the stream, or the end after a
/// normal close.
async fn next_log(state: FollowState) -> Option<(Result<ProvisionerJobLog>, FollowState)> {
    let (mut ws, idle) = state?;
    let data = match next_payload(&mut ws, idle).await {
        Ok(Some(data)) => data,
        Ok(None) => return None,
        Err(e) => return Some((Err(e), None)),
    };
    match serde_json::from_slice::<ProvisionerJobLog>(&data) {
        Ok(log) => Some((Ok(log), Some((ws, idle)))),
        Err(e) => Some((Err(Error::decode(format!("log message: {e}"))), None)),
    }
}

/// The next text or binary message, skipping control frames; `None` after a normal close.
async fn next_payload(ws: &mut Ws, idle: Duration) -> Result<Option<Bytes>> {
    loop {
        match receive(ws, idle).await? {
            Message::Text(t) => return Ok(Some(Bytes::copy_from_slice(t.as_bytes()))),
            Message::Binary(b) => return Ok(Some(b)),
            Message::Close(frame) => return closed(frame).map(|()| None),
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => continue,
        }
    }
}

/// The next message; silence for `idle`, an end without a close frame or a read error is
/// [`Error::Unavailable`].
async fn receive(ws: &mut Ws, idle: Duration) -> Result<Message> {
    match tokio::time::timeout(idle, ws.next()).await {
        Err(_) => Err(Error::unavailable(
            UnavailableReason::Timeout,
            format!("no log message or heartbeat within {idle:?}"),
        )),
        Ok(None) => Err(Error::unavailable(
            UnavailableReason::ConnectionDropped,
            "the log stream ended without a close frame",
        )),
        Ok(Some(Err(e))) => Err(Error::unavailable(
            UnavailableReason::ConnectionDropped,
            format!("log stream: {e}"),
        )),
        Ok(Some(Ok(message))) => Ok(message),
    }
}

/// A close without a frame or with 1000 ends the stream normally; any other code is an error.
fn closed(frame: Option<CloseFrame>) -> Result<()> {
    match frame {
        None => Ok(()),
        Some(f) if f.code == CloseCode::Normal => Ok(()),
        Some(f) => Err(Error::unavailable(
            UnavailableReason::ConnectionDropped,
            format!("log stream closed with {}: {}", u16::from(f.code), f.reason),
        )),
    }
}

#[cfg(test)]
mod tests {
    //! Followed logs against a scripted websocket server: normal and abnormal closes, redirects,
    //! and the idle timeout.

    use std::sync::Arc;

    use futures::SinkExt;
    use tokio::net::TcpListener;
    use url::Url;

    use super::super::test_support::{Log, TOKEN, client, response, serve};
    use super::super::{ClientOptions, SESSION_TOKEN_HEADER};
    use super::*;
    use crate::secret::SessionToken;

    async fn ws_server(close: CloseCode) -> (Url, Log) {
        ws_server_paced(close, Duration::ZERO).await
    }

    /// A websocket server that records the handshake, sends three logs `pause` apart, then closes
    /// with `close`.
    #[allow(clippy::result_large_err)] // the callback signature is tungstenite's
    async fn ws_server_paced(close: CloseCode, pause: Duration) -> (Url, Log) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = Url::parse(&format!("http://{}", listener.local_addr().unwrap())).unwrap();
        let log: Log = Arc::default();
        let log2 = log.clone();
        tokio::spawn(async move {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let log = log2.clone();
            let callback = move |req: &tokio_tungstenite::tungstenite::handshake::server::Request, resp| {
                log.lock().unwrap().push(format!(
                    "{}?{} token={}",
                    req.uri().path(),
                    req.uri().query().unwrap_or(""),
                    req.headers()
                        .get(SESSION_TOKEN_HEADER)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                ));
                Ok(resp)
            };
            let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(stream, callback).await else {
                return;
            };
            for id in 1..=3 {
                tokio::time::sleep(pause).await;
                let log =
                    format!(r#"{{"id":{id},"log_level":"info","stage":"Planning","output":"line {id}"}}"#);
                if ws.send(Message::text(log)).await.is_err() {
                    return;
                }
            }
            let _ = ws
                .send(Message::Close(Some(CloseFrame {
                    code: close,
                    reason: "done".into(),
                })))
                .await;
            let _ = ws.next().await;
        });
        (url, log)
    }

    #[tokio::test]
    async fn capped_build_logs_cut_long_answers_instead_of_failing() {
        use super::super::test_support::{CODER, JSON};
        let body = format!("[{}]", vec![r#"{"id":1}"#; 100].join(","));
        let len = body.len();
        let (url, log) = serve(move |i, _| {
            Some(if i < 3 {
                response("200 OK", &[JSON, CODER], &body)
            } else {
                response(
                    "404 Not Found",
                    &[JSON, CODER],
                    r#"{"message":"Resource not found"}"#,
                )
            })
        })
        .await;
        let c = client(&url);
        let id = Uuid::from_u128(5);
        let (bytes, cut) = c.workspace_build_logs_capped(id, 50).await.unwrap();
        assert_eq!((bytes.len(), cut), (50, true));
        let (bytes, cut) = c.workspace_build_logs_capped(id, len).await.unwrap();
        assert_eq!(
            (bytes.len(), cut),
            (len, false),
            "an answer of exactly the cap is whole"
        );
        let (bytes, cut) = c.workspace_build_logs_capped(id, len - 1).await.unwrap();
        assert_eq!((bytes.len(), cut), (len - 1, true));
        let error = c.workspace_build_logs_capped(id, 50).await.unwrap_err();
        assert!(error.is_not_found(), "{error:?}");
        let first = log.lock().unwrap()[0].clone();
        assert!(
            first.starts_with(&format!("GET /api/v2/workspacebuilds/{id}/logs HTTP/1.1")),
            "{first}"
        );
    }

    #[tokio::test]
    async fn follow_logs_streams_until_close_1000() {
        let (url, log) = ws_server(CloseCode::Normal).await;
        let id = Uuid::nil();
        let stream = client(&url).follow_workspace_build_logs(id, 5).await.unwrap();
        let logs: Vec<_> = stream.collect().await;
        assert_eq!(logs.len(), 3, "{logs:?}");
        let ids: Vec<i64> = logs.into_iter().map(|l| l.unwrap().id).collect();
        assert_eq!(ids, vec![1, 2, 3]);
        let seen = log.lock().unwrap()[0].clone();
        assert_eq!(
            seen,
            format!("/api/v2/workspacebuilds/{id}/logs?follow&after=5 token={TOKEN}")
        );
    }

    #[tokio::test]
    async fn follow_logs_abnormal_close_is_an_error() {
        let (url, _) = ws_server(CloseCode::Error).await;
        let stream = client(&url)
            .follow_template_version_logs(Uuid::nil(), 0)
            .await
            .unwrap();
        let logs: Vec<_> = stream.collect().await;
        assert_eq!(logs.len(), 4);
        assert!(matches!(logs[3], Err(Error::Unavailable { .. })), "{:?}", logs[3]);
    }

    #[tokio::test]
    async fn follow_logs_refuses_cross_origin_redirects() {
        let (other, other_log) = serve(|_, _| Some(response("200 OK", &[], ""))).await;
        let target = other.join("/ws").unwrap().to_string();
        let (url, _) =
            serve(move |_, _| Some(response("307 Temporary Redirect", &[("Location", &target)], ""))).await;
        let err = match client(&url).follow_workspace_build_logs(Uuid::nil(), 0).await {
            Err(e) => e,
            Ok(_) => panic!("followed a cross-origin redirect"),
        };
        assert!(matches!(err, Error::RedirectRefused { .. }), "{err:?}");
        assert!(other_log.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn follow_outlives_the_call_timeout_but_not_the_idle_timeout() {
        // Messages 400 ms apart: longer than the 300 ms call timeout (handshake only) ...
        let (url, _) = ws_server_paced(CloseCode::Normal, Duration::from_millis(400)).await;
        let options = ClientOptions {
            timeout: Duration::from_millis(300),
            ..ClientOptions::default()
        };
        let c = CoderClient::with_options(url, Some(SessionToken::new(TOKEN)), options).unwrap();
        let logs: Vec<_> = c
            .follow_workspace_build_logs(Uuid::nil(), 0)
            .await
            .unwrap()
            .collect()
            .await;
        assert_eq!(logs.len(), 3, "{logs:?}");
        assert!(logs.iter().all(Result::is_ok), "{logs:?}");

        // ... but beyond a 150 ms idle timeout.
        let (url, _) = ws_server_paced(CloseCode::Normal, Duration::from_millis(400)).await;
        let options = ClientOptions {
            log_idle_timeout: Duration::from_millis(150),
            ..ClientOptions::default()
        };
        let c = CoderClient::with_options(url, Some(SessionToken::new(TOKEN)), options).unwrap();
        let logs: Vec<_> = c
            .follow_workspace_build_logs(Uuid::nil(), 0)
            .await
            .unwrap()
            .collect()
            .await;
        assert_eq!(logs.len(), 1, "{logs:?}");
        assert!(
            matches!(
                logs[0],
                Err(Error::Unavailable {
                    reason: UnavailableReason::Timeout,
                    ..
                })
            ),
            "{logs:?}"
        );
    }
}
