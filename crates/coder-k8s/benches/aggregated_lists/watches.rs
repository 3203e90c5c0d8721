//! Open watches through kube-apiserver, held for the rest window: each reads its stream and notes when it ends, so
//! the report can show that all of them stayed open.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context as _, Result};
use futures::{AsyncBufReadExt as _, StreamExt as _};

/// One open watch.
pub struct Watch {
    pub path: String,
    ended: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Watch {
    /// Lists `path` and watches from the list's resourceVersion through kube-apiserver, as client-go's reflector
    /// and `kubectl get -w` do, reading the watch in the background.
    pub async fn open(kube: &kube::Client, path: &str) -> Result<Self> {
        let list: serde_json::Value = serde_json::from_str(
            &kube
                .request_text(http::Request::get(path).body(Vec::new())?)
                .await
                .with_context(|| format!("listing {path}"))?,
        )?;
        let version = list["metadata"]["resourceVersion"]
            .as_str()
            .with_context(|| format!("the list of {path} has no resourceVersion"))?;
        let request = http::Request::get(format!(
            "{path}?watch=1&allowWatchBookmarks=true&resourceVersion={version}"
        ))
        .body(Vec::new())?;
        let stream = kube
            .request_stream(request)
            .await
            .with_context(|| format!("opening a watch of {path} from resourceVersion {version:?}"))?;
        let ended = Arc::new(AtomicBool::new(false));
        let done = ended.clone();
        let task = tokio::spawn(async move {
            let mut lines = stream.lines();
            while let Some(Ok(_)) = lines.next().await {}
            done.store(true, Ordering::Relaxed);
        });
        Ok(Self {
            path: path.to_owned(),
            ended,
            task,
        })
    }

    pub fn is_open(&self) -> bool {
        !self.ended.load(Ordering::Relaxed)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}
