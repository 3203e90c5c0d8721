//! Coder's template settings in a `CoderTemplate` (`spec` to write, `status` mirrored): their read-back from
//! Coder's template, their rules (checked before anything is sent), the metadata body that writes them, and which
//! of them need a premium feature.
//!
//! Every setting is optional: one the spec leaves out keeps Coder's value (the metadata body starts from the template
//! as just read), one the spec gives is written. Durations are Kubernetes durations of whole milliseconds, read back
//! in the shortest form (`8h`, `1h30m`). Coder v2.30.0 keeps the advanced scheduling settings, the required active
//! version and a new deprecation message without an error when their feature is not licensed, so a change of one of
//! them is refused here first ([`premium_changes`]) and checked after the write ([`not_applied`]).

use coder_k8s_api::aggregation::{
    CoderTemplateAutostartRequirement, CoderTemplateAutostopRequirement, CoderTemplateSettings,
};
use coder_k8s_coder_client::types::entitlements::Entitlements;
use coder_k8s_coder_client::types::templates::{
    CreateTemplateRequest, Template, TemplateAutostartRequirement, TemplateAutostopRequirement,
    UpdateTemplateMeta,
};

use super::field_errors::FieldError;
use crate::generic::handlers::parse_go_duration;

/// Weekday names in Coder's order (its bitmaps start with Monday).
pub const WEEKDAYS: [&str; 7] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];
/// The port-sharing levels Coder knows.
pub const PORT_SHARE_LEVELS: [&str; 4] = ["owner", "authenticated", "organization", "public"];
/// Coder's largest autostop requirement, in weeks.
pub const MAX_AUTOSTOP_WEEKS: i64 = 16;
/// Coder's shortest failure and dormancy duration above zero: one minute.
const MIN_TTL_MS: i64 = 60_000;

/// A premium feature behind a template setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Feature {
    Scheduling,
    AccessControl,
    SharedPorts,
}

impl Feature {
    /// Coder's feature name in `/entitlements`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Scheduling => "advanced_template_scheduling",
            Self::AccessControl => "access_control",
            Self::SharedPorts => "control_shared_ports",
        }
    }

    /// The name Coder shows.
    pub fn title(self) -> &'static str {
        match self {
            Self::Scheduling => "Advanced Template Scheduling",
            Self::AccessControl => "Access Control",
            Self::SharedPorts => "Control Shared Ports",
        }
    }
}

/// Which premium features a Coder deployment is licensed for: from `/entitlements`, none on open-source Coder
/// (which has no such route).
#[derive(Clone, Debug, Default)]
pub struct Licensed {
    entitlements: Option<Entitlements>,
}

impl Licensed {
    pub fn of(entitlements: Option<Entitlements>) -> Self {
        Self { entitlements }
    }

    /// Whether Coder has no entitlements route at all (open-source Coder).
    pub fn is_open_source(&self) -> bool {
        self.entitlements.is_none()
    }

    pub fn has(&self, feature: Feature) -> bool {
        self.entitlements
            .as_ref()
            .is_some_and(|e| e.is_entitled(feature.name()))
    }

    /// Why a change that needs `feature` is refused.
    pub fn refusal(&self, feature: Feature) -> String {
        let reason = if self.entitlements.is_some() {
            "which this Coder deployment is not licensed for"
        } else {
            "which open-source Coder does not have"
        };
        format!(
            "needs Coder's premium feature {} ({}), {reason}; Coder would keep its current value without an error, so nothing was changed",
            feature.title(),
            feature.name()
        )
    }
}

/// `ms` in the shortest duration form: `0s`, `500ms`, `90s` as `1m30s`, `8h`, `1h30m`.
pub fn compact_duration(ms: i64) -> String {
    if ms == 0 {
        return "0s".to_owned();
    }
    let sign = if ms < 0 { "-" } else { "" };
    let ms = ms.unsigned_abs();
    let (hours, minutes, seconds, millis) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000);
    let mut out = sign.to_owned();
    for (value, unit) in [(hours, "h"), (minutes, "m")] {
        if value > 0 {
            out.push_str(&format!("{value}{unit}"));
        }
    }
    match (seconds, millis) {
        (0, 0) => {}
        (s, 0) => out.push_str(&format!("{s}s")),
        (0, m) if hours == 0 && minutes == 0 => out.push_str(&format!("{m}ms")),
        (s, m) => out.push_str(&format!("{s}.{}s", format!("{m:03}").trim_end_matches('0'))),
    }
    out
}

/// A duration field in whole milliseconds, or its field error.
fn duration_ms(path: &str, raw: &str) -> Result<i64, FieldError> {
    let shape = "must be a duration such as \"8h\", \"30m\" or \"1h30m\"";
    if raw.starts_with('-') {
        return Err(FieldError::invalid(path, raw, "must not be negative"));
    }
    let duration = parse_go_duration(raw).ok_or_else(|| FieldError::invalid(path, raw, shape))?;
    let nanos = duration.as_nanos();
    let ms = (nanos + 500_000) / 1_000_000;
    // The parser works in floating point: a value within a microsecond of a whole millisecond is that millisecond.
    if nanos.abs_diff(ms * 1_000_000) > 1_000 {
        return Err(FieldError::invalid(
            path,
            raw,
            "must be a whole number of milliseconds",
        ));
    }
    i64::try_from(ms).map_err(|_| FieldError::invalid(path, raw, "is too long"))
}

/// The bitmap of weekday names (Monday is bit 0).
pub fn bitmap(days: &[String]) -> u8 {
    days.iter()
        .filter_map(|day| WEEKDAYS.iter().position(|d| d.eq_ignore_ascii_case(day)))
        .fold(0, |bits, bit| bits | (1 << bit))
}

/// The weekday names of a bitmap, Monday first.
pub fn weekdays(bits: u8) -> Vec<String> {
    WEEKDAYS
        .iter()
        .enumerate()
        .filter(|(bit, _)| bits & (1 << bit) != 0)
        .map(|(_, day)| (*day).to_owned())
        .collect()
}

/// The settings of Coder's template `t`, as the spec and the status show them (the access list is added by the
/// caller). A port-sharing level Coder does not render is left out.
pub fn read_back(t: &Template) -> CoderTemplateSettings {
    CoderTemplateSettings {
        default_ttl: Some(compact_duration(t.default_ttl_ms)),
        activity_bump: Some(compact_duration(t.activity_bump_ms)),
        autostop_requirement: Some(CoderTemplateAutostopRequirement {
            days_of_week: Some(weekdays(bitmap(&t.autostop_requirement.days_of_week))),
            weeks: Some(t.autostop_requirement.weeks.max(1)),
        }),
        autostart_requirement: Some(CoderTemplateAutostartRequirement {
            days_of_week: Some(weekdays(bitmap(&t.autostart_requirement.days_of_week))),
        }),
        allow_user_autostart: Some(t.allow_user_autostart),
        allow_user_autostop: Some(t.allow_user_autostop),
        allow_user_cancel_workspace_jobs: Some(t.allow_user_cancel_workspace_jobs),
        failure_ttl: Some(compact_duration(t.failure_ttl_ms)),
        time_til_dormant: Some(compact_duration(t.time_til_dormant_ms)),
        time_til_dormant_auto_delete: Some(compact_duration(t.time_til_dormant_autodelete_ms)),
        require_active_version: Some(t.require_active_version),
        deprecation_message: Some(t.deprecation_message.clone()),
        max_port_share_level: Some(t.max_port_share_level.clone()).filter(|l| !l.is_empty()),
        acl: None,
    }
}

/// What a spec's settings ask for, parsed: `None` keeps Coder's value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Desired {
    pub default_ttl_ms: Option<i64>,
    pub activity_bump_ms: Option<i64>,
    pub autostop_days: Option<u8>,
    pub autostop_weeks: Option<i64>,
    pub autostart_days: Option<u8>,
    pub allow_user_autostart: Option<bool>,
    pub allow_user_autostop: Option<bool>,
    pub allow_user_cancel_workspace_jobs: Option<bool>,
    pub failure_ttl_ms: Option<i64>,
    pub time_til_dormant_ms: Option<i64>,
    pub time_til_dormant_autodelete_ms: Option<i64>,
    pub require_active_version: Option<bool>,
    pub deprecation_message: Option<String>,
    pub max_port_share_level: Option<String>,
}

/// Collects the field errors of one spec while parsing it.
struct Parser {
    errors: Vec<FieldError>,
}

impl Parser {
    fn duration(&mut self, path: &str, raw: Option<&String>, at_least_a_minute: bool) -> Option<i64> {
        let ms = match duration_ms(path, raw?) {
            Ok(ms) => ms,
            Err(error) => {
                self.errors.push(error);
                return None;
            }
        };
        if at_least_a_minute && ms != 0 && ms < MIN_TTL_MS {
            self.errors.push(FieldError::invalid(
                path,
                raw?.as_str(),
                "must be 0s or at least 1m (Coder's shortest)",
            ));
        }
        Some(ms)
    }

    fn days(&mut self, path: &str, days: Option<&Vec<String>>) -> Option<u8> {
        let days = days?;
        let mut seen = Vec::new();
        for (index, day) in days.iter().enumerate() {
            let item = format!("{path}[{index}]");
            if !WEEKDAYS.contains(&day.as_str()) {
                self.errors.push(FieldError::unsupported(item, day, &WEEKDAYS));
            } else if seen.contains(day) {
                self.errors.push(FieldError::duplicate(item, day));
            }
            seen.push(day.clone());
        }
        Some(bitmap(days))
    }
}

/// Parses and checks the settings of a spec against Coder's own rules (paths are under `spec.`); the access list is
/// checked by [`super::template_acl`].
pub fn parse(settings: &CoderTemplateSettings) -> Result<Desired, Vec<FieldError>> {
    let mut p = Parser { errors: Vec::new() };
    let stop = settings.autostop_requirement.as_ref();
    let weeks = stop.and_then(|s| s.weeks);
    if let Some(w) = weeks
        && !(1..=MAX_AUTOSTOP_WEEKS).contains(&w)
    {
        p.errors.push(FieldError::invalid(
            "spec.autostopRequirement.weeks",
            w.to_string(),
            format!("must be between 1 and {MAX_AUTOSTOP_WEEKS}"),
        ));
    }
    let level = settings.max_port_share_level.clone();
    if let Some(l) = level
        .as_ref()
        .filter(|l| !PORT_SHARE_LEVELS.contains(&l.as_str()))
    {
        p.errors.push(FieldError::unsupported(
            "spec.maxPortShareLevel",
            l,
            &PORT_SHARE_LEVELS,
        ));
    }
    let desired = Desired {
        default_ttl_ms: p.duration("spec.defaultTTL", settings.default_ttl.as_ref(), false),
        activity_bump_ms: p.duration("spec.activityBump", settings.activity_bump.as_ref(), false),
        autostop_days: p.days(
            "spec.autostopRequirement.daysOfWeek",
            stop.and_then(|s| s.days_of_week.as_ref()),
        ),
        autostop_weeks: weeks,
        autostart_days: p.days(
            "spec.autostartRequirement.daysOfWeek",
            settings
                .autostart_requirement
                .as_ref()
                .and_then(|s| s.days_of_week.as_ref()),
        ),
        allow_user_autostart: settings.allow_user_autostart,
        allow_user_autostop: settings.allow_user_autostop,
        allow_user_cancel_workspace_jobs: settings.allow_user_cancel_workspace_jobs,
        failure_ttl_ms: p.duration("spec.failureTTL", settings.failure_ttl.as_ref(), true),
        time_til_dormant_ms: p.duration("spec.timeTilDormant", settings.time_til_dormant.as_ref(), true),
        time_til_dormant_autodelete_ms: p.duration(
            "spec.timeTilDormantAutoDelete",
            settings.time_til_dormant_auto_delete.as_ref(),
            true,
        ),
        require_active_version: settings.require_active_version,
        deprecation_message: settings.deprecation_message.clone(),
        max_port_share_level: level,
    };
    if p.errors.is_empty() {
        Ok(desired)
    } else {
        Err(p.errors)
    }
}

/// The texts of a spec that the metadata body always carries (v0.1.5: an empty one clears Coder's).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Texts {
    pub display_name: String,
    pub description: String,
    pub icon: String,
}

/// The metadata body that gives template `current` (read just before) what the spec asks: Coder resets every setting
/// a body leaves out, so it starts from all of `current`'s settings and replaces the texts and the settings the spec
/// gives.
pub fn metadata_body(current: &Template, texts: &Texts, desired: &Desired) -> UpdateTemplateMeta {
    let mut body = UpdateTemplateMeta {
        display_name: Some(texts.display_name.clone()),
        description: Some(texts.description.clone()),
        icon: Some(texts.icon.clone()),
        ..UpdateTemplateMeta::from_template(current)
    };
    let set = |target: &mut i64, value: Option<i64>| {
        if let Some(v) = value {
            *target = v;
        }
    };
    set(&mut body.default_ttl_ms, desired.default_ttl_ms);
    set(&mut body.activity_bump_ms, desired.activity_bump_ms);
    set(&mut body.failure_ttl_ms, desired.failure_ttl_ms);
    set(&mut body.time_til_dormant_ms, desired.time_til_dormant_ms);
    set(
        &mut body.time_til_dormant_autodelete_ms,
        desired.time_til_dormant_autodelete_ms,
    );
    if desired.autostop_days.is_some() || desired.autostop_weeks.is_some() {
        let now = &current.autostop_requirement;
        body.autostop_requirement = Some(TemplateAutostopRequirement {
            days_of_week: weekdays(desired.autostop_days.unwrap_or(bitmap(&now.days_of_week))),
            weeks: desired.autostop_weeks.unwrap_or(now.weeks.max(1)),
        });
    }
    if let Some(days) = desired.autostart_days {
        body.autostart_requirement = Some(TemplateAutostartRequirement {
            days_of_week: weekdays(days),
        });
    }
    let flag = |target: &mut bool, value: Option<bool>| {
        if let Some(v) = value {
            *target = v;
        }
    };
    flag(&mut body.allow_user_autostart, desired.allow_user_autostart);
    flag(&mut body.allow_user_autostop, desired.allow_user_autostop);
    flag(
        &mut body.allow_user_cancel_workspace_jobs,
        desired.allow_user_cancel_workspace_jobs,
    );
    flag(&mut body.require_active_version, desired.require_active_version);
    if let Some(message) = &desired.deprecation_message {
        body.deprecation_message = Some(message.clone());
    }
    if let Some(level) = &desired.max_port_share_level {
        body.max_port_share_level = Some(level.clone());
    }
    body
}

fn stop_of(body: &UpdateTemplateMeta, current: &Template) -> (u8, i64) {
    let stop = body
        .autostop_requirement
        .as_ref()
        .unwrap_or(&current.autostop_requirement);
    (bitmap(&stop.days_of_week), stop.weeks.max(1))
}

fn start_of(body: &UpdateTemplateMeta, current: &Template) -> u8 {
    bitmap(
        &body
            .autostart_requirement
            .as_ref()
            .unwrap_or(&current.autostart_requirement)
            .days_of_week,
    )
}

/// Whether `body` changes anything of `current` (weekday lists compared as sets).
pub fn changes(current: &Template, body: &UpdateTemplateMeta) -> bool {
    let unchanged = UpdateTemplateMeta::from_template(current);
    let normalized = UpdateTemplateMeta {
        autostop_requirement: unchanged.autostop_requirement.clone(),
        autostart_requirement: unchanged.autostart_requirement.clone(),
        ..body.clone()
    };
    normalized != unchanged
        || stop_of(body, current) != stop_of(&unchanged, current)
        || start_of(body, current) != start_of(&unchanged, current)
}

/// The premium settings `body` changes on `current`: the spec field and the feature it needs. Clearing a
/// deprecation needs none.
pub fn premium_changes(current: &Template, body: &UpdateTemplateMeta) -> Vec<(&'static str, Feature)> {
    let mut out = Vec::new();
    let (days, weeks) = stop_of(body, current);
    let mut check = |changed: bool, path: &'static str, feature: Feature| {
        if changed {
            out.push((path, feature));
        }
    };
    check(
        (days, weeks)
            != (
                bitmap(&current.autostop_requirement.days_of_week),
                current.autostop_requirement.weeks.max(1),
            ),
        "spec.autostopRequirement",
        Feature::Scheduling,
    );
    check(
        start_of(body, current) != bitmap(&current.autostart_requirement.days_of_week),
        "spec.autostartRequirement",
        Feature::Scheduling,
    );
    check(
        body.allow_user_autostart != current.allow_user_autostart,
        "spec.allowUserAutostart",
        Feature::Scheduling,
    );
    check(
        body.allow_user_autostop != current.allow_user_autostop,
        "spec.allowUserAutostop",
        Feature::Scheduling,
    );
    check(
        body.failure_ttl_ms != current.failure_ttl_ms,
        "spec.failureTTL",
        Feature::Scheduling,
    );
    check(
        body.time_til_dormant_ms != current.time_til_dormant_ms,
        "spec.timeTilDormant",
        Feature::Scheduling,
    );
    check(
        body.time_til_dormant_autodelete_ms != current.time_til_dormant_autodelete_ms,
        "spec.timeTilDormantAutoDelete",
        Feature::Scheduling,
    );
    check(
        body.require_active_version != current.require_active_version,
        "spec.requireActiveVersion",
        Feature::AccessControl,
    );
    check(
        body.deprecation_message
            .as_ref()
            .is_some_and(|m| !m.is_empty() && *m != current.deprecation_message),
        "spec.deprecationMessage",
        Feature::AccessControl,
    );
    check(
        body.max_port_share_level
            .as_ref()
            .is_some_and(|l| *l != current.max_port_share_level),
        "spec.maxPortShareLevel",
        Feature::SharedPorts,
    );
    out
}

/// The spec fields whose value `after` (the template read after the write) does not hold.
pub fn not_applied(desired: &Desired, after: &Template) -> Vec<&'static str> {
    let mut out = Vec::new();
    let mut check = |differs: bool, path: &'static str| {
        if differs {
            out.push(path);
        }
    };
    let ms = |want: Option<i64>, have: i64| want.is_some_and(|w| w != have);
    let flag = |want: Option<bool>, have: bool| want.is_some_and(|w| w != have);
    check(
        ms(desired.default_ttl_ms, after.default_ttl_ms),
        "spec.defaultTTL",
    );
    check(
        ms(desired.activity_bump_ms, after.activity_bump_ms),
        "spec.activityBump",
    );
    let stop = &after.autostop_requirement;
    check(
        desired
            .autostop_days
            .is_some_and(|d| d != bitmap(&stop.days_of_week))
            || desired.autostop_weeks.is_some_and(|w| w != stop.weeks.max(1)),
        "spec.autostopRequirement",
    );
    check(
        desired
            .autostart_days
            .is_some_and(|d| d != bitmap(&after.autostart_requirement.days_of_week)),
        "spec.autostartRequirement",
    );
    check(
        flag(desired.allow_user_autostart, after.allow_user_autostart),
        "spec.allowUserAutostart",
    );
    check(
        flag(desired.allow_user_autostop, after.allow_user_autostop),
        "spec.allowUserAutostop",
    );
    check(
        flag(
            desired.allow_user_cancel_workspace_jobs,
            after.allow_user_cancel_workspace_jobs,
        ),
        "spec.allowUserCancelWorkspaceJobs",
    );
    check(
        ms(desired.failure_ttl_ms, after.failure_ttl_ms),
        "spec.failureTTL",
    );
    check(
        ms(desired.time_til_dormant_ms, after.time_til_dormant_ms),
        "spec.timeTilDormant",
    );
    check(
        ms(
            desired.time_til_dormant_autodelete_ms,
            after.time_til_dormant_autodelete_ms,
        ),
        "spec.timeTilDormantAutoDelete",
    );
    check(
        flag(desired.require_active_version, after.require_active_version),
        "spec.requireActiveVersion",
    );
    check(
        desired
            .deprecation_message
            .as_ref()
            .is_some_and(|m| *m != after.deprecation_message),
        "spec.deprecationMessage",
    );
    check(
        desired
            .max_port_share_level
            .as_ref()
            .is_some_and(|l| *l != after.max_port_share_level),
        "spec.maxPortShareLevel",
    );
    out
}

/// The settings a template create can carry (all but the deprecation message, which a metadata update writes
/// afterwards).
pub fn create_settings(desired: &Desired, request: &mut CreateTemplateRequest) {
    request.default_ttl_ms = desired.default_ttl_ms;
    request.activity_bump_ms = desired.activity_bump_ms;
    if desired.autostop_days.is_some() || desired.autostop_weeks.is_some() {
        request.autostop_requirement = Some(TemplateAutostopRequirement {
            days_of_week: weekdays(desired.autostop_days.unwrap_or(0)),
            weeks: desired.autostop_weeks.unwrap_or(1),
        });
    }
    request.autostart_requirement = desired.autostart_days.map(|days| TemplateAutostartRequirement {
        days_of_week: weekdays(days),
    });
    request.allow_user_autostart = desired.allow_user_autostart;
    request.allow_user_autostop = desired.allow_user_autostop;
    request.allow_user_cancel_workspace_jobs = desired.allow_user_cancel_workspace_jobs;
    request.failure_ttl_ms = desired.failure_ttl_ms;
    request.dormant_ttl_ms = desired.time_til_dormant_ms;
    request.delete_ttl_ms = desired.time_til_dormant_autodelete_ms;
    request.require_active_version = desired.require_active_version.unwrap_or(false);
    request
        .max_port_share_level
        .clone_from(&desired.max_port_share_level);
}

/// The premium settings a new template would get that differ from what Coder gives a template by default: those
/// a create cannot carry silently on an unlicensed Coder.
pub fn premium_on_create(desired: &Desired) -> Vec<(&'static str, Feature)> {
    // Coder's defaults of a new template: no autostop requirement, autostart any day, users may set both
    // schedules, no failure or dormancy TTLs, no required active version, not deprecated.
    let defaults = Template {
        autostop_requirement: TemplateAutostopRequirement {
            days_of_week: Vec::new(),
            weeks: 1,
        },
        autostart_requirement: TemplateAutostartRequirement {
            days_of_week: weekdays(0b0111_1111),
        },
        allow_user_autostart: true,
        allow_user_autostop: true,
        max_port_share_level: "owner".to_owned(),
        ..Template::default()
    };
    let body = metadata_body(&defaults, &Texts::default(), desired);
    premium_changes(&defaults, &body)
        .into_iter()
        // Coder itself refuses an unlicensed port-sharing level on create, with its own message.
        .filter(|(_, feature)| *feature != Feature::SharedPorts)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_back_in_the_shortest_form() {
        for (ms, text) in [
            (0, "0s"),
            (500, "500ms"),
            (1_500, "1.5s"),
            (90_000, "1m30s"),
            (3_600_000, "1h"),
            (5_400_000, "1h30m"),
            (28_800_000, "8h"),
            (3_601_000, "1h1s"),
            (604_800_000, "168h"),
        ] {
            assert_eq!(compact_duration(ms), text, "{ms}");
            assert_eq!(duration_ms("f", text), Ok(ms), "{text}");
        }
    }

    #[test]
    fn durations_are_whole_non_negative_milliseconds() {
        assert_eq!(duration_ms("f", "0.1s"), Ok(100));
        assert_eq!(duration_ms("f", "2h45m"), Ok(9_900_000));
        assert_eq!(duration_ms("f", "0"), Ok(0));
        let error = duration_ms("spec.defaultTTL", "2x").unwrap_err();
        assert_eq!(
            error.to_string(),
            "spec.defaultTTL: Invalid value: \"2x\": must be a duration such as \"8h\", \"30m\" or \"1h30m\""
        );
        assert_eq!(
            duration_ms("f", "-1h").unwrap_err().to_string(),
            "f: Invalid value: \"-1h\": must not be negative"
        );
        assert_eq!(
            duration_ms("f", "1500us").unwrap_err().to_string(),
            "f: Invalid value: \"1500us\": must be a whole number of milliseconds"
        );
    }

    fn spec() -> CoderTemplateSettings {
        CoderTemplateSettings::default()
    }

    fn errors(settings: CoderTemplateSettings) -> Vec<String> {
        parse(&settings)
            .unwrap_err()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn coders_bounds_are_checked_with_the_field_named() {
        let minute_rule = "must be 0s or at least 1m (Coder's shortest)";
        assert_eq!(
            errors(CoderTemplateSettings {
                failure_ttl: Some("30s".into()),
                time_til_dormant: Some("59s".into()),
                time_til_dormant_auto_delete: Some("soon".into()),
                ..spec()
            }),
            [
                format!("spec.failureTTL: Invalid value: \"30s\": {minute_rule}"),
                format!("spec.timeTilDormant: Invalid value: \"59s\": {minute_rule}"),
                "spec.timeTilDormantAutoDelete: Invalid value: \"soon\": must be a duration such as \"8h\", \"30m\" or \"1h30m\"".to_owned(),
            ]
        );
        assert_eq!(
            errors(CoderTemplateSettings {
                autostop_requirement: Some(CoderTemplateAutostopRequirement {
                    days_of_week: Some(vec!["monday".into(), "Funday".into(), "monday".into()]),
                    weeks: Some(17),
                }),
                max_port_share_level: Some("everyone".into()),
                ..spec()
            }),
            [
                "spec.autostopRequirement.weeks: Invalid value: \"17\": must be between 1 and 16",
                "spec.maxPortShareLevel: Unsupported value: \"everyone\": supported values: \"owner\", \"authenticated\", \"organization\", \"public\"",
                "spec.autostopRequirement.daysOfWeek[1]: Unsupported value: \"Funday\": supported values: \"monday\", \"tuesday\", \"wednesday\", \"thursday\", \"friday\", \"saturday\", \"sunday\"",
                "spec.autostopRequirement.daysOfWeek[2]: Duplicate value: \"monday\"",
            ]
        );
        for weeks in [0, -1] {
            assert!(
                parse(&CoderTemplateSettings {
                    autostop_requirement: Some(CoderTemplateAutostopRequirement {
                        days_of_week: None,
                        weeks: Some(weeks),
                    }),
                    ..spec()
                })
                .is_err()
            );
        }
        assert_eq!(
            parse(&CoderTemplateSettings {
                failure_ttl: Some("0s".into()),
                time_til_dormant: Some("1m".into()),
                ..spec()
            })
            .unwrap()
            .time_til_dormant_ms,
            Some(60_000)
        );
    }

    fn coder_template() -> Template {
        Template {
            default_ttl_ms: 7_200_000,
            activity_bump_ms: 3_600_000,
            autostop_requirement: TemplateAutostopRequirement {
                days_of_week: vec!["monday".into()],
                weeks: 2,
            },
            autostart_requirement: TemplateAutostartRequirement {
                days_of_week: weekdays(0b0111_1111),
            },
            allow_user_autostart: true,
            allow_user_autostop: true,
            allow_user_cancel_workspace_jobs: false,
            max_port_share_level: "public".into(),
            cors_behavior: "simple".into(),
            ..Template::default()
        }
    }

    fn texts(t: &Template) -> Texts {
        Texts {
            display_name: t.display_name.clone(),
            description: t.description.clone(),
            icon: t.icon.clone(),
        }
    }

    #[test]
    fn the_read_back_written_again_changes_nothing() {
        let current = coder_template();
        let back = read_back(&current);
        assert_eq!(back.default_ttl.as_deref(), Some("2h"));
        assert_eq!(back.activity_bump.as_deref(), Some("1h"));
        assert_eq!(
            back.autostop_requirement,
            Some(CoderTemplateAutostopRequirement {
                days_of_week: Some(vec!["monday".into()]),
                weeks: Some(2),
            })
        );
        let desired = parse(&back).unwrap();
        let body = metadata_body(&current, &texts(&current), &desired);
        assert!(!changes(&current, &body), "{body:?}");
        assert!(premium_changes(&current, &body).is_empty());
        assert!(not_applied(&desired, &current).is_empty());
    }

    #[test]
    fn a_setting_left_out_keeps_coders_value_and_one_given_is_written() {
        let current = coder_template();
        let desired = parse(&CoderTemplateSettings {
            activity_bump: Some("30m".into()),
            allow_user_cancel_workspace_jobs: Some(true),
            autostop_requirement: Some(CoderTemplateAutostopRequirement {
                days_of_week: Some(vec!["sunday".into(), "friday".into()]),
                weeks: None,
            }),
            ..spec()
        })
        .unwrap();
        let body = metadata_body(&current, &texts(&current), &desired);
        assert!(changes(&current, &body));
        assert_eq!(body.default_ttl_ms, 7_200_000, "kept");
        assert_eq!(body.activity_bump_ms, 1_800_000);
        assert!(body.allow_user_cancel_workspace_jobs);
        assert_eq!(
            body.autostop_requirement,
            Some(TemplateAutostopRequirement {
                days_of_week: vec!["friday".into(), "sunday".into()],
                weeks: 2,
            }),
            "days in Coder's order, weeks kept"
        );
        assert_eq!(
            premium_changes(&current, &body),
            [("spec.autostopRequirement", Feature::Scheduling)]
        );
        assert_eq!(
            not_applied(&desired, &current),
            [
                "spec.activityBump",
                "spec.autostopRequirement",
                "spec.allowUserCancelWorkspaceJobs"
            ]
        );
    }

    #[test]
    fn each_premium_setting_names_its_feature_and_clearing_a_deprecation_is_free() {
        let mut current = coder_template();
        current.deprecation_message = "old".into();
        let desired = parse(&CoderTemplateSettings {
            autostart_requirement: Some(CoderTemplateAutostartRequirement {
                days_of_week: Some(vec!["monday".into()]),
            }),
            allow_user_autostart: Some(false),
            allow_user_autostop: Some(false),
            failure_ttl: Some("1h".into()),
            time_til_dormant: Some("24h".into()),
            time_til_dormant_auto_delete: Some("48h".into()),
            require_active_version: Some(true),
            deprecation_message: Some("new".into()),
            max_port_share_level: Some("owner".into()),
            ..spec()
        })
        .unwrap();
        let body = metadata_body(&current, &texts(&current), &desired);
        assert_eq!(
            premium_changes(&current, &body),
            [
                ("spec.autostartRequirement", Feature::Scheduling),
                ("spec.allowUserAutostart", Feature::Scheduling),
                ("spec.allowUserAutostop", Feature::Scheduling),
                ("spec.failureTTL", Feature::Scheduling),
                ("spec.timeTilDormant", Feature::Scheduling),
                ("spec.timeTilDormantAutoDelete", Feature::Scheduling),
                ("spec.requireActiveVersion", Feature::AccessControl),
                ("spec.deprecationMessage", Feature::AccessControl),
                ("spec.maxPortShareLevel", Feature::SharedPorts),
            ]
        );
        let clear = parse(&CoderTemplateSettings {
            deprecation_message: Some(String::new()),
            ..spec()
        })
        .unwrap();
        let body = metadata_body(&current, &texts(&current), &clear);
        assert!(changes(&current, &body));
        assert!(premium_changes(&current, &body).is_empty());
    }

    #[test]
    fn a_create_carries_the_settings_and_names_the_premium_ones() {
        let desired = parse(&CoderTemplateSettings {
            default_ttl: Some("8h".into()),
            time_til_dormant: Some("24h".into()),
            max_port_share_level: Some("authenticated".into()),
            ..spec()
        })
        .unwrap();
        let mut request = CreateTemplateRequest::default();
        create_settings(&desired, &mut request);
        assert_eq!(request.default_ttl_ms, Some(28_800_000));
        assert_eq!(request.dormant_ttl_ms, Some(86_400_000));
        assert_eq!(request.max_port_share_level.as_deref(), Some("authenticated"));
        assert_eq!(request.activity_bump_ms, None, "Coder's default");
        assert_eq!(
            premium_on_create(&desired),
            [("spec.timeTilDormant", Feature::Scheduling)]
        );
        assert!(premium_on_create(&parse(&spec()).unwrap()).is_empty());
    }

    #[test]
    fn the_refusal_names_the_feature_and_the_kind_of_coder() {
        let open_source = Licensed::of(None);
        assert!(!open_source.has(Feature::Scheduling));
        assert!(
            open_source
                .refusal(Feature::Scheduling)
                .starts_with("needs Coder's premium feature Advanced Template Scheduling (advanced_template_scheduling), which open-source Coder does not have")
        );
        let unlicensed = Licensed::of(Some(Entitlements::default()));
        assert!(
            unlicensed
                .refusal(Feature::AccessControl)
                .contains("(access_control), which this Coder deployment is not licensed for")
        );
    }
}
