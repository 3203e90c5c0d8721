//! The stop of a workspace created with `running: false`. Coder starts every new workspace and refuses a stop build
//! while that first build is still active, so a stop asked for at once is usually refused. The create then leaves a
//! task behind that waits for the first build to end and queues the stop, so the workspace ends up stopped as its
//! spec says without a second apply.

use std::time::Duration;

use coder_k8s_coder_client::CoderClient;
use coder_k8s_coder_client::types::builds::{CreateWorkspaceBuildRequest, Transition};
use tokio::time::Instant;
use uuid::Uuid;

/// How long the task waits for the first build (Coder's own build timeout is longer, but a start that takes this long
/// is watched by its owner anyway).
const FIRST_BUILD_WAIT: Duration = Duration::from_secs(15 * 60);
/// The first pause between looks, doubled up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(500);
const MAX_PAUSE: Duration = Duration::from_secs(10);

/// What the task does after one look at the workspace.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// The first build is still active: look again.
    Wait,
    /// The first build ended and is still the latest: queue the stop.
    Stop,
    /// Another build came first (someone started or stopped the workspace meanwhile): nothing to do.
    Done,
}

/// The decision after one look: `latest` is the latest build's ID and whether its job ended.
pub fn next(first_build: Uuid, latest: Uuid, ended: bool) -> Next {
    match (latest == first_build, ended) {
        (false, _) => Next::Done,
        (true, false) => Next::Wait,
        (true, true) => Next::Stop,
    }
}

/// Starts the task that stops `workspace` once its first build `first_build` has ended. Failed looks are retried
/// until the wait ends; a refused stop is logged (the workspace then stays started, as before the task existed).
pub fn stop_after_first_build(client: CoderClient, workspace: Uuid, first_build: Uuid) {
    tokio::spawn(async move {
        let deadline = Instant::now() + FIRST_BUILD_WAIT;
        let mut pause = FIRST_PAUSE;
        while Instant::now() < deadline {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MAX_PAUSE);
            let Ok(current) = client.workspace(workspace).await else {
                continue;
            };
            let latest = &current.latest_build;
            match next(first_build, latest.id, latest.job.status.is_terminal()) {
                Next::Wait => continue,
                Next::Done => return,
                Next::Stop => {
                    let stop = CreateWorkspaceBuildRequest::transition(Transition::Stop);
                    if let Err(error) = client.create_workspace_build(workspace, &stop).await {
                        tracing::info!(%workspace, %error, "the stop of a workspace created with running: false was refused; it stays started");
                    }
                    return;
                }
            }
        }
        tracing::info!(%workspace, "the first build of a workspace created with running: false did not end in time; it stays started");
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stop_waits_for_the_first_build_and_never_follows_another_build() {
        let (first, other) = (Uuid::from_u128(1), Uuid::from_u128(2));
        assert_eq!(next(first, first, false), Next::Wait);
        assert_eq!(next(first, first, true), Next::Stop);
        assert_eq!(next(first, other, false), Next::Done);
        assert_eq!(next(first, other, true), Next::Done);
    }
}
