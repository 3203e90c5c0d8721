//! Unit-test helpers of the client: a minimal scripted HTTP/1.1 server over raw TCP that records
//! each request head, canned answers, and a client sending a fixed test token.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use url::Url;

use super::CoderClient;
use crate::secret::SessionToken;

/// The session token every test client sends.
pub(super) const TOKEN: &str = "abcdefghij-0123456789abcdefghijkl";

/// The request heads (or handshake summaries) a test server saw, in order.
pub(super) type Log = Arc<Mutex<Vec<String>>>;

/// `Content-Type: application/json`.
pub(super) const JSON: (&str, &str) = ("Content-Type", "application/json");
/// The header that marks an answer as Coder's own.
pub(super) const CODER: (&str, &str) = ("X-Coder-Build-Version", "v2.30.0");
/// A `GET /users/me` answer for an owner.
pub(super) const ME: &str = r#"{"id":"00000000-0000-0000-0000-000000000001","username":"coder-k8s-operator","roles":[{"name":"owner","display_name":"Owner"}]}"#;

/// Reads one request head (and its body, by Content-Length); returns the head.
async fn read_request(stream: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await.ok()? == 0 {
            return None;
        }
        buf.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&buf).into_owned();
    let len = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).await.ok()?;
    Some(head)
}

/// A raw HTTP/1.1 answer with a Content-Length.
pub(super) fn response(status: &str, headers: &[(&str, &str)], body: &str) -> String {
    let mut r = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        r.push_str(&format!("{k}: {v}\r\n"));
    }
    r.push_str("\r\n");
    r.push_str(body);
    r
}

/// A server answering each request with `answer(index, head)`; `None` closes the connection and
/// `"SLEEP"` holds it for 3 s without answering.
pub(super) async fn serve<F>(answer: F) -> (Url, Log)
where
    F: Fn(usize, &str) -> Option<String> + Send + Sync + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = Url::parse(&format!("http://{}", listener.local_addr().unwrap())).unwrap();
    let log: Log = Arc::default();
    tokio::spawn(accept_all(listener, Arc::new(answer), log.clone()));
    (url, log)
}

async fn accept_all<F>(listener: TcpListener, answer: Arc<F>, log: Log)
where
    F: Fn(usize, &str) -> Option<String> + Send + Sync + 'static,
{
    while let Ok((stream, _)) = listener.accept().await {
        tokio::spawn(answer_requests(stream, answer.clone(), log.clone()));
    }
}

async fn answer_requests<F>(mut stream: TcpStream, answer: Arc<F>, log: Log)
where
    F: Fn(usize, &str) -> Option<String> + Send + Sync + 'static,
{
    while let Some(head) = read_request(&mut stream).await {
        let index = {
            let mut l = log.lock().unwrap();
            l.push(head.clone());
            l.len() - 1
        };
        let Some(r) = answer(index, &head) else {
            return;
        };
        if r.starts_with("SLEEP") {
            tokio::time::sleep(Duration::from_secs(3)).await;
            return;
        }
        if stream.write_all(r.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// A client for `url` sending [`TOKEN`].
pub(super) fn client(url: &Url) -> CoderClient {
    CoderClient::new(url.clone(), SessionToken::new(TOKEN)).unwrap()
}

/// Whether the request head carries the header `name`.
pub(super) fn has_header(head: &str, name: &str) -> bool {
    head.lines().any(|l| {
        l.to_ascii_lowercase()
            .starts_with(&format!("{}:", name.to_ascii_lowercase()))
    })
}
