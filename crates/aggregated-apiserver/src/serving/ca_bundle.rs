//! The APIService `caBundle` controller: keeps kube-apiserver trusting the serving CA. It watches the one
//! APIService (never polls) and the CA channel, and merge-patches `caBundle` and `insecureSkipTLSVerify: false`
//! when they differ. Failures are logged and retried; they never stop the server or affect readiness.

use futures::StreamExt as _;
use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until};

use super::apiservice::{
    APISERVICE_NAME, Backoff, Decision, FIELD_MANAGER, MISSING_PERMISSION_LOG, NOT_REGISTERED_LOG,
    OPT_OUT_ANNOTATION, OPTED_OUT_LOG, PATCH_FAILED_LOG, SET_AGAIN_LOG, SET_LOG, TrustFields,
    WATCH_FAILED_LOG, WarnLimiter, apiservice_resource, decide,
};

/// Keeps the APIService `v1alpha1.aggregation.coder.com` trusting the CA on `ca`. Runs until the task is dropped.
pub async fn run_ca_bundle_controller(client: kube::Client, ca: watch::Receiver<Vec<u8>>) {
    run_ca_bundle_controller_for(client, APISERVICE_NAME.to_owned(), ca).await;
}

/// [`run_ca_bundle_controller`] for the APIService `name` (tests register their own).
pub async fn run_ca_bundle_controller_for(
    client: kube::Client,
    name: String,
    mut ca: watch::Receiver<Vec<u8>>,
) {
    let api: Api<DynamicObject> = Api::all_with(client, &apiservice_resource());
    // A metadata.name field selector lets RBAC allow list and watch through resourceNames.
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = watcher::watcher(api.clone(), config).default_backoff().boxed();
    let mut controller = Controller::new(api, name);
    let mut ca_open = true;
    loop {
        let retry_at = controller.retry_at;
        let check = tokio::select! {
            event = events.next() => match event {
                Some(Ok(event)) => {
                    controller.observe(event);
                    true
                }
                Some(Err(error)) => {
                    controller.watch_failed(&error);
                    false
                }
                None => return,
            },
            changed = ca.changed(), if ca_open => {
                // A closed channel keeps its last CA; the APIService watch goes on.
                ca_open = changed.is_ok();
                ca_open
            },
            () = sleep_until(retry_at.unwrap_or_else(Instant::now)), if retry_at.is_some() => {
                controller.retry_at = None;
                true
            },
        };
        if check {
            let ca_pem = ca.borrow().clone();
            controller.sync(&ca_pem).await;
        }
    }
}

struct Controller {
    api: Api<DynamicObject>,
    name: String,
    /// The APIService as last seen by the watch; `None` when it does not exist.
    current: Option<TrustFields>,
    /// Objects of a (re)list in progress.
    listing: Option<TrustFields>,
    /// The first list has completed; before that "absent" is not known yet.
    listed: bool,
    retry_at: Option<Instant>,
    backoff: Backoff,
    warnings: WarnLimiter,
    /// The CA this process last wrote: writing it again means another writer changed the APIService.
    written_ca: Option<Vec<u8>>,
    /// The resourceVersion of this process's last write: watch events older than it are stale (they were queued
    /// while the patch was in flight) and must not undo what the patch's answer showed.
    written_version: Option<u64>,
    said_opted_out: bool,
    said_not_registered: bool,
}

impl Controller {
    fn new(api: Api<DynamicObject>, name: String) -> Self {
        Self {
            api,
            name,
            current: None,
            listing: None,
            listed: false,
            retry_at: None,
            backoff: Backoff::default(),
            warnings: WarnLimiter::default(),
            written_ca: None,
            written_version: None,
            said_opted_out: false,
            said_not_registered: false,
        }
    }

    fn observe(&mut self, event: Event<DynamicObject>) {
        match event {
            Event::Apply(object) if !self.is_stale(&object) => self.current = Some(TrustFields::of(&object)),
            Event::Apply(_) => {}
            Event::Delete(_) => self.current = None,
            Event::Init => self.listing = None,
            Event::InitApply(object) => self.listing = Some(TrustFields::of(&object)),
            Event::InitDone => {
                self.current = self.listing.take();
                self.listed = true;
            }
        }
    }

    /// Older than this process's last write (etcd resourceVersions are increasing numbers; anything else is never
    /// treated as stale).
    fn is_stale(&self, object: &DynamicObject) -> bool {
        let version = object
            .metadata
            .resource_version
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok());
        matches!((version, self.written_version), (Some(seen), Some(written)) if seen < written)
    }

    fn watch_failed(&mut self, error: &kube::runtime::watcher::Error) {
        if self.warnings.allow("watch", Instant::now()) {
            tracing::warn!(apiservice = %self.name, %error, "{WATCH_FAILED_LOG}");
        }
    }

    async fn sync(&mut self, ca_pem: &[u8]) {
        if !self.listed {
            return;
        }
        let decision = decide(self.current.as_ref(), ca_pem);
        self.note_state(&decision);
        let Decision::Patch(body) = decision else {
            self.succeeded();
            return;
        };
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        match self.api.patch(&self.name, &params, &Patch::Merge(&body)).await {
            Ok(patched) => {
                self.current = Some(TrustFields::of(&patched));
                self.written_version = patched
                    .metadata
                    .resource_version
                    .as_deref()
                    .and_then(|v| v.parse::<u64>().ok());
                let again = self.written_ca.as_deref() == Some(ca_pem);
                let message = if again { SET_AGAIN_LOG } else { SET_LOG };
                tracing::info!(apiservice = %self.name, field_manager = FIELD_MANAGER, "{message}");
                self.written_ca = Some(ca_pem.to_vec());
                self.succeeded();
            }
            // Deleted meanwhile: the watch reports it, and a new one is patched when it appears.
            Err(kube::Error::Api(status)) if status.code == 404 => self.succeeded(),
            Err(error) => self.failed(&error),
        }
    }

    /// Logs the opt-out and a missing APIService once each time they begin.
    fn note_state(&mut self, decision: &Decision) {
        let opted_out = *decision == Decision::OptedOut;
        if opted_out && !self.said_opted_out {
            tracing::info!(
                apiservice = %self.name,
                annotation = %format!("{OPT_OUT_ANNOTATION}=false"),
                "{OPTED_OUT_LOG}"
            );
        }
        self.said_opted_out = opted_out;
        let absent = *decision == Decision::NotRegistered;
        if absent && !self.said_not_registered {
            tracing::info!(apiservice = %self.name, "{NOT_REGISTERED_LOG}");
        }
        self.said_not_registered = absent;
    }

    fn succeeded(&mut self) {
        self.backoff.reset();
        self.retry_at = None;
    }

    fn failed(&mut self, error: &kube::Error) {
        let forbidden = matches!(error, kube::Error::Api(status) if status.code == 403);
        let kind = if forbidden { "forbidden" } else { "patch" };
        if self.warnings.allow(kind, Instant::now()) {
            if forbidden {
                let permission = format!("patch apiservices.apiregistration.k8s.io/{}", self.name);
                tracing::warn!(apiservice = %self.name, %permission, %error, "{MISSING_PERMISSION_LOG}");
            } else {
                tracing::warn!(apiservice = %self.name, %error, "{PATCH_FAILED_LOG}");
            }
        }
        self.retry_at = Some(Instant::now() + self.backoff.next_delay());
    }
}
