//! Counting the Coder requests a piece of work sends, so that a caller that repeats it (the aggregated API server's
//! watch pollers) can pace itself by what it costs Coder's rate limit.

use std::cell::Cell;
use std::future::Future;

tokio::task_local! {
    static SENT: Cell<u64>;
}

/// Runs `work` and returns its output with the number of requests every [`crate::CoderClient`] sent for it. Work that
/// `work` spawns onto other tasks is not counted; futures it polls itself (joined or buffered calls) are.
pub async fn counted<F: Future>(work: F) -> (F::Output, u64) {
    SENT.scope(Cell::new(0), async move {
        let output = work.await;
        (output, SENT.with(Cell::get))
    })
    .await
}

/// Notes one request sent, when the current task is counting.
pub(crate) fn note_request() {
    let _ = SENT.try_with(|sent| sent.set(sent.get() + 1));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn requests_are_counted_inside_the_scope_only() {
        note_request();
        let ((), sent) = counted(async {
            note_request();
            let both = async {
                note_request();
            };
            futures::join!(both, async { note_request() });
        })
        .await;
        assert_eq!(sent, 3);
        let ((), none) = counted(async {}).await;
        assert_eq!(none, 0);
    }
}
