//! The hook through which a resource's watches also see changes made outside this server (in the backend directly,
//! or through another replica). The generic server knows nothing of how a feed finds changes: it joins the feed
//! when a watch starts, holds the returned [`FeedLease`] while the watch runs, and the feed publishes what it finds
//! into the resource's [`Broadcaster`]. Writes through this server still publish immediately.

use std::sync::Arc;

use async_trait::async_trait;

use super::status::ApiError;
use super::watch::Broadcaster;

/// What a watch that joins a feed asks for.
pub struct FeedRequest {
    /// The watched namespace; `None` for a watch across all namespaces.
    pub namespace: Option<String>,
    /// The counter the watch resumes after, when its resourceVersion named one.
    pub since: Option<u64>,
    /// The resource's broadcaster: where the feed publishes, and where it finds remembered lists.
    pub broadcaster: Arc<Broadcaster>,
}

/// A watch's membership in a feed. While any lease of a part of the feed lives, that part keeps publishing;
/// dropping the last one stops it.
pub struct FeedLease {
    covered_since: u64,
    _membership: Box<dyn Send + Sync>,
}

impl FeedLease {
    /// A lease whose feed has published every change after `covered_since` (a broadcaster counter) and keeps
    /// doing so while `membership` lives.
    pub fn new(covered_since: u64, membership: Box<dyn Send + Sync>) -> Self {
        Self {
            covered_since,
            _membership: membership,
        }
    }

    /// Every change after this counter is (or will be) in the broadcaster's events; a watch resuming from an
    /// earlier counter cannot be served completely.
    pub fn covered_since(&self) -> u64 {
        self.covered_since
    }
}

impl std::fmt::Debug for FeedLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FeedLease")
            .field("covered_since", &self.covered_since)
            .finish_non_exhaustive()
    }
}

/// A source of changes made behind the server's back, for one resource.
#[async_trait]
pub trait WatchFeed: Send + Sync {
    /// Starts (or joins) publishing the changes of `request.namespace` into `request.broadcaster`. An error ends
    /// the watch request with it (for example 503 while the backend cannot be reached).
    async fn join(&self, request: FeedRequest) -> Result<FeedLease, ApiError>;
}
