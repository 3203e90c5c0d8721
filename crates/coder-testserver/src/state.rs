//! Shared server state: configuration, the PostgreSQL handle, fault rules, the request log and the
//! in-memory Coder objects (everything except users, organizations and API keys).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use serde_json::Value;
use tokio::sync::watch;
use uuid::Uuid;

use crate::config::{AgentSpec, BuildOutcome, Config, Entitlement};
use crate::db::Db;
use crate::faults::FaultRule;
use crate::recording::RecordedRequest;

/// Locks a mutex, recovering from poisoning (a panicking test must not wedge the server).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[derive(Clone)]
pub(crate) struct App(pub(crate) Arc<Inner>);

impl std::ops::Deref for App {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

pub(crate) struct Inner {
    /// The deployment ID `buildinfo` reports; a test can change it (a new Coder database behind the same URL).
    pub deployment_id: Mutex<String>,
    pub build_version: String,
    pub accepted_licenses: Vec<String>,
    pub build_duration: Duration,
    /// `Config::oidc_configured`.
    pub oidc_configured: bool,
    pub build_outcome: Mutex<BuildOutcome>,
    pub entitlements: Mutex<BTreeMap<String, Entitlement>>,
    /// Features left out of `/entitlements` (as an older or newer Coder would not list them).
    pub hidden_features: Mutex<std::collections::BTreeSet<String>>,
    pub db: Db,
    pub base_url: Mutex<String>,
    pub faults: Mutex<Vec<FaultRule>>,
    pub requests: Mutex<Vec<RecordedRequest>>,
    pub mem: Mutex<Mem>,
    /// Bumped on every job or log change; log followers wait on it.
    pub changes: watch::Sender<u64>,
    /// Tags no simulated daemon has: a job carrying one of them stays pending, as in a Coder without a daemon for
    /// its tags, until the tag is released.
    pub held_tags: Mutex<Vec<(String, String)>>,
}

impl App {
    pub(crate) fn new(config: &Config, db: Db) -> Self {
        let (changes, _) = watch::channel(0);
        Self(Arc::new(Inner {
            deployment_id: Mutex::new(config.deployment_id.clone()),
            build_version: config.build_version.clone(),
            accepted_licenses: config.accepted_licenses.clone(),
            build_duration: config.build_duration,
            oidc_configured: config.oidc_configured,
            build_outcome: Mutex::new(config.build_outcome),
            entitlements: Mutex::new(config.entitlements.clone()),
            hidden_features: Mutex::new(Default::default()),
            db,
            base_url: Mutex::new(String::new()),
            faults: Mutex::new(Vec::new()),
            requests: Mutex::new(Vec::new()),
            mem: Mutex::new(Mem::default()),
            changes,
            held_tags: Mutex::new(Vec::new()),
        }))
    }

    pub(crate) fn deployment_id(&self) -> String {
        lock(&self.deployment_id).clone()
    }

    pub(crate) fn mem(&self) -> MutexGuard<'_, Mem> {
        lock(&self.mem)
    }

    pub(crate) fn entitlement(&self, feature: &str) -> Entitlement {
        lock(&self.entitlements)
            .get(feature)
            .copied()
            .unwrap_or(Entitlement::NotEntitled)
    }

    pub(crate) fn notify(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// `http://127.0.0.1:PORT` without a trailing slash.
    pub(crate) fn base_url(&self) -> String {
        lock(&self.base_url).clone()
    }
}

#[derive(Clone, Debug)]
pub(crate) struct License {
    pub id: i32,
    pub uuid: Uuid,
    pub uploaded_at: String,
    pub jwt: String,
    pub claims: Value,
}

#[derive(Clone, Debug)]
pub(crate) struct ProvisionerKey {
    pub id: Uuid,
    pub created_at: String,
    pub organization_id: Uuid,
    pub name: String,
    pub hashed_secret: [u8; 32],
    pub tags: BTreeMap<String, String>,
}

#[derive(Clone, Debug)]
pub(crate) struct Proxy {
    pub id: Uuid,
    pub name: String,
    pub display_name: String,
    pub icon: String,
    pub hashed_secret: [u8; 32],
    pub created_at: String,
    pub updated_at: String,
    pub deleted: bool,
}

#[derive(Clone, Debug)]
pub(crate) struct File {
    pub id: Uuid,
    pub hash: [u8; 32],
    pub created_by: Uuid,
    pub content_type: String,
    pub data: bytes::Bytes,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum JobKind {
    TemplateVersionImport { version_id: Uuid },
    WorkspaceBuild { build_id: Uuid },
}

#[derive(Clone, Debug)]
pub(crate) struct Job {
    pub id: Uuid,
    pub kind: JobKind,
    pub created_at: SystemTime,
    pub started_at: Option<SystemTime>,
    pub completed_at: Option<SystemTime>,
    pub canceled_at: Option<SystemTime>,
    pub error: Option<String>,
    pub error_code: Option<String>,
    pub organization_id: Uuid,
    pub initiator_id: Uuid,
    pub file_id: Uuid,
    pub tags: BTreeMap<String, String>,
    pub worker_id: Option<Uuid>,
}

impl Job {
    /// A new pending job; the simulated provisioner picks it up.
    pub(crate) fn pending(
        kind: JobKind,
        organization_id: Uuid,
        initiator_id: Uuid,
        file_id: Uuid,
        tags: BTreeMap<String, String>,
    ) -> Self {
        Self {
            id: Uuid::new_v4(),
            kind,
            created_at: SystemTime::now(),
            started_at: None,
            completed_at: None,
            canceled_at: None,
            error: None,
            error_code: None,
            organization_id,
            initiator_id,
            file_id,
            tags,
            worker_id: None,
        }
    }

    /// The `job_status` Coder's database computes from the job's timestamps and error.
    pub(crate) fn status(&self) -> &'static str {
        match (self.completed_at, &self.error, self.canceled_at, self.started_at) {
            (Some(_), Some(_), _, _) => "failed",
            (Some(_), None, Some(_), _) => "canceled",
            (Some(_), None, None, _) => "succeeded",
            (None, Some(_), _, _) => "failed",
            (None, None, Some(_), _) => "canceling",
            (None, None, None, None) => "pending",
            (None, None, None, Some(_)) => "running",
        }
    }

    pub(crate) fn is_active(&self) -> bool {
        self.completed_at.is_none()
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Log {
    pub id: i64,
    pub job_id: Uuid,
    pub created_at: String,
    pub source: &'static str,
    pub level: &'static str,
    pub stage: String,
    pub output: String,
}

#[derive(Clone, Debug)]
pub(crate) struct TemplateVersion {
    pub id: Uuid,
    pub template_id: Option<Uuid>,
    pub organization_id: Uuid,
    pub created_at: String,
    pub updated_at: String,
    pub name: String,
    pub message: String,
    pub job_id: Uuid,
    pub created_by: (Uuid, String),
    pub archived: bool,
    /// `terraform` or `echo`; a template takes it from its first version.
    pub provisioner: String,
    /// `user_variable_values` of the create request: `(name, value)`.
    pub user_variable_values: Vec<(String, String)>,
    /// The variables the import found in the source, with the values it used (set when the import succeeds).
    pub variables: Vec<VersionVariable>,
}

/// A Terraform variable of a template version as Coder stores it (`template_version_variables`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct VersionVariable {
    pub name: String,
    pub description: String,
    /// `string`, `number` or `bool`.
    pub type_: String,
    pub default_value: String,
    pub required: bool,
    pub sensitive: bool,
    /// The value the import used: the request's, else the default.
    pub value: String,
}

#[derive(Clone, Debug)]
pub(crate) struct Template {
    pub id: Uuid,
    pub created_at: String,
    pub updated_at: String,
    pub organization: crate::db::Organization,
    pub name: String,
    pub display_name: String,
    pub description: String,
    pub icon: String,
    pub provisioner: String,
    pub active_version_id: Uuid,
    pub created_by: (Uuid, String),
    pub settings: TemplateSettings,
    /// `user_acl`: user ID → `admin` or `use`.
    pub user_acl: BTreeMap<Uuid, String>,
    /// `group_acl`: group ID → `admin` or `use` (the organization's Everyone group has the organization's ID).
    pub group_acl: BTreeMap<Uuid, String>,
    pub deleted: bool,
}

/// A template's settings as Coder's `templates` row stores them: durations in milliseconds, weekdays as Coder's
/// bitmaps (bit 0 Monday … bit 6 Sunday), the stored values whatever the license (the API renders some of them
/// only while the premium feature is licensed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TemplateSettings {
    pub default_ttl_ms: i64,
    pub activity_bump_ms: i64,
    pub autostop_requirement_days: u8,
    /// As stored: 0 reads as 1.
    pub autostop_requirement_weeks: i64,
    /// The days autostart is *not* allowed (Coder stores the inverse).
    pub autostart_block_days: u8,
    pub allow_user_autostart: bool,
    pub allow_user_autostop: bool,
    pub allow_user_cancel_workspace_jobs: bool,
    pub failure_ttl_ms: i64,
    pub time_til_dormant_ms: i64,
    pub time_til_dormant_autodelete_ms: i64,
    pub require_active_version: bool,
    /// The deprecation message; empty when not deprecated.
    pub deprecated: String,
    /// `owner`, `authenticated`, `organization` or `public`.
    pub max_port_sharing_level: String,
    pub use_classic_parameter_flow: bool,
    /// `simple` or `passthru`.
    pub cors_behavior: String,
}

impl Default for TemplateSettings {
    /// The column defaults of Coder's `templates` table.
    fn default() -> Self {
        Self {
            default_ttl_ms: 604_800_000,
            activity_bump_ms: 3_600_000,
            autostop_requirement_days: 0,
            autostop_requirement_weeks: 0,
            autostart_block_days: 0,
            allow_user_autostart: true,
            allow_user_autostop: true,
            allow_user_cancel_workspace_jobs: true,
            failure_ttl_ms: 0,
            time_til_dormant_ms: 0,
            time_til_dormant_autodelete_ms: 0,
            require_active_version: false,
            deprecated: String::new(),
            max_port_sharing_level: "owner".to_owned(),
            use_classic_parameter_flow: false,
            cors_behavior: "simple".to_owned(),
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Workspace {
    pub id: Uuid,
    pub created_at: String,
    pub updated_at: String,
    pub owner: (Uuid, String),
    pub organization: (Uuid, String),
    pub template_id: Uuid,
    pub name: String,
    pub autostart_schedule: Option<String>,
    pub ttl_ms: Option<i64>,
    pub automatic_updates: String,
    pub deleted: bool,
}

#[derive(Clone, Debug)]
pub(crate) struct Build {
    pub id: Uuid,
    pub created_at: String,
    pub workspace_id: Uuid,
    pub template_version_id: Uuid,
    pub build_number: i64,
    pub transition: String,
    pub initiator: (Uuid, String),
    pub job_id: Uuid,
    pub reason: String,
    /// The rich parameter values the build used (`workspace_build_parameters`), in the version's order.
    pub parameters: Vec<(String, String)>,
}

/// A row of Coder's `groups` table with its `group_members` (user IDs, in the order they were added).
#[derive(Clone, Debug)]
pub(crate) struct Group {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub name: String,
    pub display_name: String,
    pub avatar_url: String,
    /// Coder stores it as `int4`: a request's value is truncated as Go's `int32(...)` does.
    pub quota_allowance: i32,
    pub members: Vec<Uuid>,
}

impl Group {
    /// A group as `POST /organizations/{organization}/groups` inserts it: no members.
    pub(crate) fn new(organization_id: Uuid, name: &str) -> Self {
        Self {
            id: Uuid::new_v4(),
            organization_id,
            name: name.to_owned(),
            display_name: String::new(),
            avatar_url: String::new(),
            quota_allowance: 0,
            members: Vec::new(),
        }
    }

    /// Organization `organization_id`'s `Everyone` group as Coder inserts it (ID = organization ID); its members are
    /// the organization's members, never stored here.
    pub(crate) fn everyone(organization_id: Uuid) -> Self {
        Self {
            id: organization_id,
            ..Self::new(organization_id, "Everyone")
        }
    }

    pub(crate) fn is_everyone(&self) -> bool {
        self.id == self.organization_id
    }
}

/// Every in-memory Coder object.
#[derive(Default)]
pub(crate) struct Mem {
    pub licenses: Vec<License>,
    pub provisioner_keys: Vec<ProvisionerKey>,
    pub proxies: Vec<Proxy>,
    /// `display_name` and `icon` of the built-in `primary` proxy, once PATCHed.
    pub primary_proxy: Option<(String, String)>,
    pub files: Vec<File>,
    pub jobs: BTreeMap<Uuid, Job>,
    pub logs: Vec<Log>,
    pub template_versions: Vec<TemplateVersion>,
    pub templates: Vec<Template>,
    pub workspaces: Vec<Workspace>,
    pub builds: Vec<Build>,
    pub ai_gateway_keys: Vec<Value>,
    pub ai_providers: Vec<Value>,
    pub mcp_servers: Vec<Value>,
    /// The groups created with `POST /organizations/{organization}/groups` or `TestServer::add_group`, in creation
    /// order. Each organization's `Everyone` group (ID = organization ID, every member) is implicit; an entry with
    /// the organization's ID only keeps the settings a `PATCH /groups/{id}` gave it.
    pub groups: Vec<Group>,
    /// The agents every successful start build reports; `None` = one connected, ready agent.
    pub agents: Option<Vec<AgentSpec>>,
}

impl Mem {
    pub(crate) fn push_log(
        &mut self,
        job_id: Uuid,
        source: &'static str,
        level: &'static str,
        stage: &str,
        output: &str,
    ) {
        let id = self.logs.last().map_or(1, |l| l.id + 1);
        self.logs.push(Log {
            id,
            job_id,
            created_at: crate::util::now(),
            source,
            level,
            stage: stage.to_owned(),
            output: output.to_owned(),
        });
    }

    /// The groups of organization `org` besides `Everyone` (whose settings, once patched, are stored here too).
    pub(crate) fn added_groups(&self, org: Uuid) -> impl Iterator<Item = &Group> {
        self.groups
            .iter()
            .filter(move |g| g.organization_id == org && !g.is_everyone())
    }

    pub(crate) fn version(&self, id: Uuid) -> Option<&TemplateVersion> {
        self.template_versions.iter().find(|v| v.id == id)
    }

    pub(crate) fn template(&self, id: Uuid) -> Option<&Template> {
        self.templates.iter().find(|t| t.id == id && !t.deleted)
    }

    pub(crate) fn workspace(&self, id: Uuid) -> Option<&Workspace> {
        self.workspaces.iter().find(|w| w.id == id)
    }

    pub(crate) fn build(&self, id: Uuid) -> Option<&Build> {
        self.builds.iter().find(|b| b.id == id)
    }

    pub(crate) fn latest_build(&self, workspace_id: Uuid) -> Option<&Build> {
        self.builds
            .iter()
            .filter(|b| b.workspace_id == workspace_id)
            .max_by_key(|b| b.build_number)
    }
}
