//! What every Coder request ended with, for a process that counts them (the operator's
//! `coder_k8s_coder_requests_total`): the method, the endpoint as a route template (names and IDs replaced by `{}`,
//! so the number of series stays bounded), and the HTTP status or a transport failure. The client reports to one
//! observer per process, set once; without one nothing is recorded.

use std::sync::OnceLock;

/// One finished Coder request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request<'a> {
    pub method: &'a str,
    /// The path as a route template: `/api/v2/organizations/{}/templates`.
    pub endpoint: &'a str,
    /// The answer's status; `None` when no answer came (timeout, refused or dropped connection).
    pub status: Option<u16>,
}

type Observer = Box<dyn Fn(&Request<'_>) + Send + Sync>;

static OBSERVER: OnceLock<Observer> = OnceLock::new();

/// Sets the process's observer; `false` when one was set already (it stays).
pub fn set_observer(observer: impl Fn(&Request<'_>) + Send + Sync + 'static) -> bool {
    OBSERVER.set(Box::new(observer)).is_ok()
}

/// Reports one request to the observer, if there is one.
pub(crate) fn report(method: &str, path: &str, status: Option<u16>) {
    if let Some(observer) = OBSERVER.get() {
        let endpoint = endpoint_template(path);
        observer(&Request {
            method,
            endpoint: &endpoint,
            status,
        });
    }
}

/// The words of Coder's routes that the client calls; every other path segment is a name or an ID.
const ROUTE_WORDS: &[&str] = &[
    "acl",
    "ai",
    "ai-gateway",
    "api",
    "autostart",
    "autoupdates",
    "buildinfo",
    "builds",
    "cancel",
    "daemons",
    "deployment",
    "entitlements",
    "files",
    "first",
    "groups",
    "keys",
    "licenses",
    "login",
    "logs",
    "mcp-servers",
    "me",
    "members",
    "organizations",
    "parameters",
    "provisionerdaemons",
    "provisionerjobs",
    "provisionerkeys",
    "providers",
    "regenerate-token",
    "rich-parameters",
    "roles",
    "templates",
    "templateversions",
    "ttl",
    "users",
    "v2",
    "variables",
    "workspace",
    "workspacebuilds",
    "workspaceproxies",
    "workspaces",
];

/// `path` with every segment that is not a route word replaced by `{}`.
pub fn endpoint_template(path: &str) -> String {
    path.split('/')
        .map(|segment| match segment {
            "" => "",
            word if ROUTE_WORDS.contains(&word) => word,
            _ => "{}",
        })
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_ids_become_placeholders() {
        assert_eq!(
            endpoint_template("/api/v2/organizations/acme/templates"),
            "/api/v2/organizations/{}/templates"
        );
        assert_eq!(
            endpoint_template("/api/v2/workspacebuilds/6f1c1a4e-0000-4000-8000-000000000001/logs"),
            "/api/v2/workspacebuilds/{}/logs"
        );
        assert_eq!(
            endpoint_template("/api/v2/users/alice/workspace/dev"),
            "/api/v2/users/{}/workspace/{}"
        );
        assert_eq!(endpoint_template("/api/v2/entitlements"), "/api/v2/entitlements");
    }
}
