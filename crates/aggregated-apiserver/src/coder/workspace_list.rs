//! Every workspace Coder shows the operator, read page by page, converted for a namespace, and reused while Coder
//! sends the same pages.
//!
//! The first page tells Coder's count; the other pages are fetched [`PAGES_AT_ONCE`] at a time. Should the count grow
//! meanwhile, the pages after it are fetched one by one until a short page; a workspace seen twice (shifted by a
//! delete between pages) is kept once. Each page is decoded as listings, the little a list shows of a workspace, and
//! compared with the page at the same place in the namespace's last list: a page that differs is converted as soon
//! as it arrives, so that its conversion overlaps the pages still in flight. When every page is the same as last
//! time, the list answers with the last list's objects.
//!
//! The comparison is of the decoded listings, not of Coder's bytes: a workspace's latest build carries when a
//! matching provisioner daemon was last seen, which changes while nothing a list shows does.

use std::sync::Arc;

use coder_k8s_coder_client::CoderClient;
use coder_k8s_coder_client::types::workspaces::{WorkspaceListing, WorkspacesPage};
use futures::{StreamExt as _, TryStreamExt as _};
use serde_json::Value;

use super::convert;
use super::errors::within;
use super::list_memo::{Converted, ListMemo};
use super::resources::{WORKSPACES, subject};
use crate::generic::{ApiError, RequestContext};

/// Workspaces per Coder page.
pub const PAGE: u32 = 100;
/// Pages fetched at once after the first: where Coder answers pages in parallel, a list of 1,000 workspaces waits for
/// about four rounds of pages instead of ten, with the same Coder calls.
pub const PAGES_AT_ONCE: usize = 4;

/// One page of Coder's workspace list, decoded as listings.
pub type Page = WorkspacesPage<WorkspaceListing>;

fn full(page: &Page) -> bool {
    page.workspaces.len() == PAGE as usize
}

/// A fetched page and, when it differs from the last list's page at its place, its converted workspaces.
struct Fetched {
    page: Page,
    converted: Option<Vec<(uuid::Uuid, Value)>>,
}

/// The workspaces of one Coder deployment converted for `namespace` (see the module documentation).
pub async fn all_workspaces(
    client: &CoderClient,
    ctx: &RequestContext,
    namespace: &str,
    memo: &ListMemo<Page>,
) -> Result<Arc<Vec<Value>>, ApiError> {
    let last = memo.last(namespace);
    let last = last.as_deref();
    let page = |offset: u32| fetch(client, ctx, namespace, offset, last);
    let mut fetched = vec![page(0).await?];
    if full(&fetched[0].page) {
        let planned = u32::try_from(fetched[0].page.count.max(0)).unwrap_or(u32::MAX);
        let offsets = (1..).map(|n| n * PAGE).take_while(|offset| *offset < planned);
        let pages: Vec<_> = futures::stream::iter(offsets)
            .map(page)
            .buffered(PAGES_AT_ONCE)
            .try_collect()
            .await?;
        fetched.extend(pages);
    }
    loop {
        let count = fetched.iter().map(|f| f.page.count).max().unwrap_or_default();
        let listed: usize = fetched.iter().map(|f| f.page.workspaces.len()).sum();
        let more = fetched.last().is_some_and(|f| full(&f.page));
        if !more || i64::try_from(listed).unwrap_or(i64::MAX) >= count {
            break;
        }
        fetched.push(page(u32::try_from(listed).unwrap_or(u32::MAX)).await?);
    }
    if let Some(last) = last
        && last.source.len() == fetched.len()
        && fetched.iter().all(|f| f.converted.is_none())
    {
        return Ok(last.objects.clone());
    }
    let objects = Arc::new(assemble(namespace, &mut fetched)?);
    memo.remember(
        namespace,
        fetched.into_iter().map(|f| f.page).collect(),
        objects.clone(),
    );
    Ok(objects)
}

/// The page at `offset`, converted unless it is the same as the last list's page at its place.
async fn fetch(
    client: &CoderClient,
    ctx: &RequestContext,
    namespace: &str,
    offset: u32,
    last: Option<&Converted<Page>>,
) -> Result<Fetched, ApiError> {
    let page = within(
        ctx.deadline,
        subject(WORKSPACES, ""),
        client.workspace_listings("", PAGE, offset),
    )
    .await?;
    let place = usize::try_from(offset / PAGE).unwrap_or(usize::MAX);
    let unchanged = last
        .and_then(|last| last.source.get(place))
        .is_some_and(|known| *known == page);
    let converted = if unchanged {
        None
    } else {
        Some(convert_page(namespace, &page)?)
    };
    Ok(Fetched { page, converted })
}

fn convert_page(namespace: &str, listed: &Page) -> Result<Vec<(uuid::Uuid, Value)>, ApiError> {
    listed
        .workspaces
        .iter()
        .map(|w| Ok((w.id, convert::listed_workspace(namespace, w)?)))
        .collect()
}

/// The objects of every page in order, each workspace once: the pages converted on arrival, and now those that were
/// the same as last time (some other page differs, so the last list's objects cannot be reused whole).
fn assemble(namespace: &str, fetched: &mut [Fetched]) -> Result<Vec<Value>, ApiError> {
    let mut seen = std::collections::HashSet::new();
    let mut objects = Vec::with_capacity(fetched.iter().map(|f| f.page.workspaces.len()).sum());
    for f in fetched {
        let converted = match f.converted.take() {
            Some(converted) => converted,
            None => convert_page(namespace, &f.page)?,
        };
        objects.extend(
            converted
                .into_iter()
                .filter(|(id, _)| seen.insert(*id))
                .map(|(_, object)| object),
        );
    }
    Ok(objects)
}
