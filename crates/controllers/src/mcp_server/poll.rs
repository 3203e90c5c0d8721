//! The shared poll of what settled CoderMCPServer objects wait on in Coder: their config edited or disabled in the
//! dashboard, a taken slug freed, a listed group or the organization created. Once per interval it reads one list
//! of MCP server configs (and one of groups, when an object there lists any) per control plane and organization,
//! for every object there together, and reconciles an object only when what it waits on changed since the last poll
//! (or when it is new to the poll, so that a change between its last pass and its first poll is not missed). A
//! settled object therefore costs no pass and no Coder call of its own at rest. What the poll sees is pure:
//! `places`, `fingerprint` and `due`.

use std::collections::{BTreeMap, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use coder_k8s_api::mcp_server::{CoderMCPServer, reasons};
use coder_k8s_coder_client::ai::McpServerConfig;
use futures::StreamExt;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};

use super::coder;
use super::desired::organization_allowed;
use super::status::ready_reason;
use crate::context::Context;
use crate::triggers::Triggers;
use crate::upstream::operator_client;

/// The reasons of a settled object whose outcome only a change in Coder can alter (every other settled reason
/// waits on a change of the object, its Secrets or its control plane, which the watches deliver).
const WAITS_ON_CODER: &[&str] = &[
    reasons::SYNCED,
    reasons::DISABLED_EXTERNALLY,
    reasons::SLUG_CONFLICT,
    reasons::GROUP_NOT_FOUND,
    reasons::ORGANIZATION_NOT_FOUND,
];

/// Where objects are polled together: a control plane and the organization the spec names (by name or ID; Coder
/// accepts both in paths, and the spec, not an ID recorded earlier, says which organization is meant now).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Place {
    pub namespace: String,
    pub control_plane: String,
    pub organization: String,
}

/// What Coder showed at one place in one poll.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Shown {
    /// The organization's MCP server configs; `None` when the organization does not exist.
    pub configs: Option<Vec<McpServerConfig>>,
    /// The organization's group names, sorted (read only when an object there lists groups).
    pub groups: Vec<String>,
}

/// The trigger stream of the poll: every `interval` (the operator's Coder poll interval), the objects to reconcile.
pub fn triggers(ctx: Arc<Context>, store: Store<CoderMCPServer>) -> Triggers<CoderMCPServer> {
    let interval = ctx.settings.entitlements_interval;
    let poll = Poll {
        ctx,
        store,
        seen: HashMap::new(),
    };
    futures::stream::unfold(poll, move |mut poll| async move {
        tokio::time::sleep(interval).await;
        let due = poll.once().await;
        Some((futures::stream::iter(due), poll))
    })
    .flatten()
    .boxed()
}

struct Poll {
    ctx: Arc<Context>,
    store: Store<CoderMCPServer>,
    /// UID → the fingerprint of what the object waited on at the last poll.
    seen: HashMap<String, u64>,
}

impl Poll {
    /// One poll: reads every place once and returns the objects whose fingerprint changed or is new. An object
    /// whose place could not be read keeps its last fingerprint.
    async fn once(&mut self) -> Vec<ObjectRef<CoderMCPServer>> {
        let mut now = HashMap::new();
        let mut servers_by_uid = HashMap::new();
        let control_planes = &self.ctx.k8s.caches.control_planes;
        // The poll makes no call the object's own pass would not: its control plane exists, is not being deleted
        // and lets the organization in.
        let allowed = |server: &CoderMCPServer| {
            let namespace = server.namespace().unwrap_or_default();
            control_planes
                .get(&namespace, &server.spec.control_plane_ref.name)
                .is_some_and(|cp| {
                    cp.metadata.deletion_timestamp.is_none()
                        && organization_allowed(&cp, &server.spec.organization)
                })
        };
        for (place, servers) in places(&self.store.state(), allowed) {
            let shown = self.read(&place, &servers).await;
            for server in servers {
                let uid = server.uid().unwrap_or_default();
                let print = match &shown {
                    Some(shown) => Some(fingerprint(&server, shown)),
                    None => self.seen.get(&uid).copied(),
                };
                if let Some(print) = print {
                    now.insert(uid.clone(), print);
                }
                servers_by_uid.insert(uid, server);
            }
        }
        let due = due(&self.seen, &now);
        self.seen = now;
        due.iter()
            .filter_map(|uid| servers_by_uid.get(uid))
            .map(|server| ObjectRef::from_obj(server.as_ref()))
            .collect()
    }

    /// What Coder shows at `place`; `None` when the control plane cannot be reached or a call failed.
    async fn read(&self, place: &Place, servers: &[Arc<CoderMCPServer>]) -> Option<Shown> {
        let upstream = operator_client(&self.ctx, &place.namespace, &place.control_plane)
            .await
            .ok()?;
        let failed = |error: coder_k8s_coder_client::Error, what: &str| {
            tracing::debug!(%error, namespace = %place.namespace, control_plane = %place.control_plane, "MCP server poll: {what} failed; tried again at the next poll");
            None
        };
        let configs = match coder::list(&upstream.coder, &place.organization).await {
            Ok(configs) => Some(configs),
            Err(error) if error.is_not_found() => None,
            Err(error) => return failed(error, "list MCP server configs"),
        };
        let mut groups = Vec::new();
        if configs.is_some() && servers.iter().any(|s| s.spec.access.is_some()) {
            match upstream.coder.groups(&place.organization).await {
                Ok(found) => groups = found.into_iter().map(|g| g.name).collect(),
                Err(error) => return failed(error, "list groups"),
            }
            groups.sort();
        }
        Some(Shown { configs, groups })
    }
}

/// The objects the poll looks after, by place: settled on a reason that waits on Coder, not being deleted, and
/// `allowed` (their control plane lets them reach Coder).
pub fn places(
    servers: &[Arc<CoderMCPServer>],
    allowed: impl Fn(&CoderMCPServer) -> bool,
) -> BTreeMap<Place, Vec<Arc<CoderMCPServer>>> {
    let mut out: BTreeMap<Place, Vec<Arc<CoderMCPServer>>> = BTreeMap::new();
    for server in servers.iter().filter(|s| waits_on_coder(s) && allowed(s)) {
        let place = Place {
            namespace: server.namespace().unwrap_or_default(),
            control_plane: server.spec.control_plane_ref.name.clone(),
            organization: server.spec.organization.clone(),
        };
        out.entry(place).or_default().push(server.clone());
    }
    out
}

fn waits_on_coder(server: &CoderMCPServer) -> bool {
    server.metadata.deletion_timestamp.is_none()
        && server
            .status
            .as_ref()
            .and_then(ready_reason)
            .is_some_and(|reason| WAITS_ON_CODER.contains(&reason))
}

/// What `server` waits on as Coder shows it: whether the organization exists, every config under its slug or its
/// recorded ID (all of each config's fields), and the group names when it lists groups.
pub fn fingerprint(server: &CoderMCPServer, shown: &Shown) -> u64 {
    let mut hasher = DefaultHasher::new();
    let recorded = server.status.as_ref().and_then(|s| s.server_id.as_deref());
    match &shown.configs {
        None => "no organization".hash(&mut hasher),
        Some(configs) => {
            let own = configs
                .iter()
                .filter(|c| c.slug == server.coder_slug() || recorded == Some(c.id.to_string().as_str()));
            for config in own {
                serde_json::to_string(config)
                    .unwrap_or_default()
                    .hash(&mut hasher);
            }
        }
    }
    if server.spec.access.is_some() {
        shown.groups.hash(&mut hasher);
    }
    hasher.finish()
}

/// The UIDs whose fingerprint in `now` differs from `before`, or that `before` did not have.
pub fn due(before: &HashMap<String, u64>, now: &HashMap<String, u64>) -> Vec<String> {
    let mut due: Vec<String> = now
        .iter()
        .filter(|(uid, print)| before.get(*uid) != Some(print))
        .map(|(uid, _)| uid.clone())
        .collect();
    due.sort();
    due
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use serde_json::json;

    fn server(name: &str, reason: &str, organization: &str) -> Arc<CoderMCPServer> {
        let mut server: CoderMCPServer = serde_json::from_value(json!({
            "apiVersion": "coder.com/v1alpha1",
            "kind": "CoderMCPServer",
            "metadata": {"name": name, "namespace": "team", "uid": format!("uid-{name}")},
            "spec": {"controlPlaneRef": {"name": "coder"}, "organization": organization, "url": "https://mcp.example.com"},
        }))
        .unwrap();
        let status = server.status.get_or_insert_with(Default::default);
        // An ID recorded for an organization the spec no longer names does not decide the place.
        status.organization_id = Some("recorded-id".to_owned());
        status.conditions = vec![Condition {
            type_: "Ready".to_owned(),
            status: "True".to_owned(),
            reason: reason.to_owned(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(Default::default()),
        }];
        Arc::new(server)
    }

    fn config(slug: &str, enabled: bool) -> McpServerConfig {
        McpServerConfig {
            slug: slug.to_owned(),
            enabled,
            ..McpServerConfig::default()
        }
    }

    #[test]
    fn only_settled_objects_that_wait_on_coder_are_polled_by_control_plane_and_organization() {
        let mut deleting = (*server("going", reasons::SYNCED, "org-1")).clone();
        deleting.metadata.deletion_timestamp = Some(Time(Default::default()));
        let servers = [
            server("a", reasons::SYNCED, "org-1"),
            server("b", reasons::DISABLED_EXTERNALLY, "org-1"),
            server("c", reasons::ORGANIZATION_NOT_FOUND, "default"),
            server("d", reasons::MCP_SERVERS_NOT_ALLOWED, "org-1"),
            server("e", reasons::CREDENTIALS_NOT_READY, "org-1"),
            server("f", reasons::SYNCED, "withdrawn"),
            Arc::new(deleting),
        ];
        // `f`'s control plane no longer lets its organization in (its status is not rewritten yet).
        let places = places(&servers, |s| s.spec.organization != "withdrawn");
        let names: Vec<(String, Vec<String>)> = places
            .iter()
            .map(|(place, servers)| {
                (
                    place.organization.clone(),
                    servers.iter().map(|s| s.name_any()).collect(),
                )
            })
            .collect();
        assert_eq!(
            names,
            vec![
                ("default".to_owned(), vec!["c".to_owned()]),
                ("org-1".to_owned(), vec!["a".to_owned(), "b".to_owned()]),
            ]
        );
        assert!(
            places
                .keys()
                .all(|p| p.namespace == "team" && p.control_plane == "coder")
        );
    }

    #[test]
    fn the_fingerprint_follows_the_objects_own_config_and_nothing_else() {
        let a = server("a", reasons::SYNCED, "org-1");
        let shown = |configs: Vec<McpServerConfig>| Shown {
            configs: Some(configs),
            groups: vec!["engineers".to_owned()],
        };
        let base = fingerprint(&a, &shown(vec![config("a", true), config("other", true)]));
        assert_eq!(
            base,
            fingerprint(&a, &shown(vec![config("a", true), config("other", false)]))
        );
        assert_ne!(
            base,
            fingerprint(&a, &shown(vec![config("a", false), config("other", true)]))
        );
        assert_ne!(base, fingerprint(&a, &shown(vec![config("other", true)])));
        // Groups matter only to an object that lists some.
        let mut fewer = shown(vec![config("a", true), config("other", true)]);
        fewer.groups.clear();
        assert_eq!(base, fingerprint(&a, &fewer));
        let mut with_access = (*a).clone();
        with_access.spec.access = serde_json::from_value(json!({"groups": ["engineers"]})).unwrap();
        assert_ne!(
            fingerprint(&with_access, &fewer),
            fingerprint(
                &with_access,
                &shown(vec![config("a", true), config("other", true)])
            )
        );
        // A missing organization is a state of its own.
        let missing = Shown::default();
        assert_ne!(fingerprint(&a, &missing), fingerprint(&a, &shown(Vec::new())));
    }

    #[test]
    fn due_are_the_changed_and_the_new_but_not_the_unchanged_or_gone() {
        let before = HashMap::from([
            ("same".to_owned(), 1),
            ("changed".to_owned(), 2),
            ("gone".to_owned(), 3),
        ]);
        let now = HashMap::from([
            ("same".to_owned(), 1),
            ("changed".to_owned(), 9),
            ("new".to_owned(), 4),
        ]);
        assert_eq!(due(&before, &now), vec!["changed".to_owned(), "new".to_owned()]);
        assert_eq!(due(&now, &now), Vec::<String>::new());
    }
}
