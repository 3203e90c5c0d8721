//! Template settings as Coder v2.30.0 stores, renders, creates and updates them, license by license.
//!
//! Coder's `PATCH /templates/{id}` writes its whole body over the template: a field that is a pointer in
//! `codersdk.UpdateTemplateMeta` keeps its value when left out, a plain field is written as sent, so as zero
//! when left out. Which settings a write reaches depends on the license: without advanced template scheduling
//! only the default TTL and the activity bump are written (the other schedule settings stay as stored and the
//! server reads its schedule as "autostart any day, no autostop requirement"); without access control
//! `require_active_version` stays as stored (rendered false) and a deprecation can only be cleared; without
//! shared-port control the port-sharing level renders `public` and any other level is refused.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::errors::ApiError;
use crate::state::{App, Template, TemplateSettings};

/// Weekday names in Coder's bitmap order (bit 0 is Monday).
const WEEKDAYS: [&str; 7] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];
/// Every day of the week as a bitmap.
const ALL_DAYS: u8 = 0b0111_1111;
/// The largest autostop requirement in weeks.
const MAX_AUTOSTOP_WEEKS: i64 = 16;
/// The shortest failure or dormancy duration above zero, in milliseconds.
const MIN_TTL_MS: i64 = 60_000;
const POSITIVE: &str = "Must be a positive integer.";
const AT_LEAST_A_MINUTE: &str = "Value must be at least one minute.";
const PORT_SHARING_UNLICENSED: &str =
    "Restricting port sharing level is an enterprise feature that is not enabled.";
const PORT_SHARING_INVALID: &str =
    "invalid max port sharing level, value must be 'authenticated', 'organization', or 'public'.";
const CORS_BEHAVIORS: [&str; 2] = ["simple", "passthru"];

/// Which of the premium features behind template settings are licensed now.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Licensed {
    scheduling: bool,
    access_control: bool,
    port_sharing: bool,
}

impl Licensed {
    pub(crate) fn of(app: &App) -> Self {
        Self {
            scheduling: app.entitlement("advanced_template_scheduling").is_entitled(),
            access_control: app.entitlement("access_control").is_entitled(),
            port_sharing: app.entitlement("control_shared_ports").is_entitled(),
        }
    }
}

/// Coder's schedule as its schedule store reads it: the stored one when licensed, else the open-source view.
struct Schedule {
    autostop_days: u8,
    autostop_weeks: i64,
    autostart_days: u8,
}

fn schedule(settings: &TemplateSettings, licensed: Licensed) -> Schedule {
    if licensed.scheduling {
        Schedule {
            autostop_days: settings.autostop_requirement_days,
            autostop_weeks: settings.autostop_requirement_weeks.max(1),
            autostart_days: !settings.autostart_block_days & ALL_DAYS,
        }
    } else {
        Schedule {
            autostop_days: 0,
            autostop_weeks: 1,
            autostart_days: ALL_DAYS,
        }
    }
}

fn weekdays(bitmap: u8) -> Vec<&'static str> {
    WEEKDAYS
        .iter()
        .enumerate()
        .filter(|(bit, _)| bitmap & (1 << bit) != 0)
        .map(|(_, day)| *day)
        .collect()
}

/// `codersdk.WeekdaysToBitmap`: case-insensitive names, repeats allowed, the first unknown name refused.
fn bitmap(days: &[String]) -> Result<u8, String> {
    days.iter().try_fold(0u8, |bits, day| {
        let lower = day.to_lowercase();
        WEEKDAYS
            .iter()
            .position(|name| *name == lower)
            .map(|bit| bits | (1 << bit))
            .ok_or_else(|| format!("invalid weekday {day:?}"))
    })
}

/// The settings part of `codersdk.Template`, as Coder's `convertTemplate` renders the stored row.
pub(crate) fn render(settings: &TemplateSettings, licensed: Licensed) -> Value {
    json!({
        "deprecated": !settings.deprecated.is_empty(),
        "deprecation_message": settings.deprecated,
        "default_ttl_ms": settings.default_ttl_ms,
        "activity_bump_ms": settings.activity_bump_ms,
        "autostop_requirement": {
            "days_of_week": weekdays(settings.autostop_requirement_days),
            "weeks": settings.autostop_requirement_weeks.max(1),
        },
        "autostart_requirement": { "days_of_week": weekdays(!settings.autostart_block_days & ALL_DAYS) },
        "allow_user_autostart": settings.allow_user_autostart,
        "allow_user_autostop": settings.allow_user_autostop,
        "allow_user_cancel_workspace_jobs": settings.allow_user_cancel_workspace_jobs,
        "failure_ttl_ms": settings.failure_ttl_ms,
        "time_til_dormant_ms": settings.time_til_dormant_ms,
        "time_til_dormant_autodelete_ms": settings.time_til_dormant_autodelete_ms,
        "require_active_version": licensed.access_control && settings.require_active_version,
        "max_port_share_level": shown_port_sharing(&settings.max_port_sharing_level, licensed),
        "cors_behavior": settings.cors_behavior,
        "use_classic_parameter_flow": settings.use_classic_parameter_flow,
    })
}

fn shown_port_sharing(stored: &str, licensed: Licensed) -> &str {
    if licensed.port_sharing { stored } else { "public" }
}

fn valid_max_port_sharing(level: &str) -> bool {
    matches!(level, "owner" | "authenticated" | "organization" | "public")
}

#[derive(Deserialize)]
struct Autostop {
    #[serde(default)]
    days_of_week: Vec<String>,
    #[serde(default)]
    weeks: i64,
}

#[derive(Deserialize)]
struct Autostart {
    #[serde(default)]
    days_of_week: Vec<String>,
}

/// The settings of `codersdk.CreateTemplateRequest` (pointers there are `Option`s here).
#[derive(Deserialize)]
pub(crate) struct CreateSettings {
    default_ttl_ms: Option<i64>,
    activity_bump_ms: Option<i64>,
    autostop_requirement: Option<Autostop>,
    autostart_requirement: Option<Autostart>,
    allow_user_cancel_workspace_jobs: Option<bool>,
    allow_user_autostart: Option<bool>,
    allow_user_autostop: Option<bool>,
    failure_ttl_ms: Option<i64>,
    dormant_ttl_ms: Option<i64>,
    delete_ttl_ms: Option<i64>,
    #[serde(default)]
    pub(crate) disable_everyone_group_access: bool,
    #[serde(default)]
    require_active_version: bool,
    max_port_share_level: Option<String>,
    template_use_classic_parameter_flow: Option<bool>,
    cors_behavior: Option<String>,
}

/// The settings a new template gets, or Coder's 400 `Invalid create template request.` (checked after the name
/// and the version, as Coder does).
pub(crate) fn create(request: &CreateSettings, licensed: Licensed) -> Result<TemplateSettings, ApiError> {
    let ttl = request.default_ttl_ms.unwrap_or(0);
    let bump = request.activity_bump_ms.unwrap_or(3_600_000);
    let (stop_days, weeks) = request
        .autostop_requirement
        .as_ref()
        .map_or((&[][..], 0), |a| (&a.days_of_week[..], a.weeks));
    let all_days = weekdays(ALL_DAYS)
        .into_iter()
        .map(str::to_owned)
        .collect::<Vec<_>>();
    let start_days = request
        .autostart_requirement
        .as_ref()
        .map_or(&all_days[..], |a| &a.days_of_week[..]);
    let failure = request.failure_ttl_ms.unwrap_or(0);
    let dormant = request.dormant_ttl_ms.unwrap_or(0);
    let autodelete = request.delete_ttl_ms.unwrap_or(0);
    let mut invalid = Vec::new();
    check(&mut invalid, ttl >= 0, "default_ttl_ms", POSITIVE);
    check(&mut invalid, bump >= 0, "activity_bump_ms", POSITIVE);
    let stop_bits = parse_days(&mut invalid, stop_days, "autostop_requirement.days_of_week");
    let start_bits = parse_days(&mut invalid, start_days, "autostart_requirement.days_of_week");
    let mut port_sharing = "owner".to_owned();
    if let Some(level) = &request.max_port_share_level {
        match port_sharing_refusal(level, licensed) {
            Some(reason) => invalid.push(("max_port_share_level".to_owned(), reason.to_owned())),
            None => port_sharing = level.clone(),
        }
    }
    let cors = request
        .cors_behavior
        .clone()
        .unwrap_or_else(|| "simple".to_owned());
    check(
        &mut invalid,
        valid_cors(&cors),
        "cors_behavior",
        &cors_refusal(&cors),
    );
    check(&mut invalid, weeks >= 0, "autostop_requirement.weeks", POSITIVE);
    check(
        &mut invalid,
        weeks <= MAX_AUTOSTOP_WEEKS,
        "autostop_requirement.weeks",
        &too_many_weeks(),
    );
    check(&mut invalid, failure >= 0, "failure_ttl_ms", POSITIVE);
    // Coder names both dormancy fields so in this message.
    check(
        &mut invalid,
        dormant >= 0,
        "time_til_dormant_autodeletion_ms",
        POSITIVE,
    );
    check(
        &mut invalid,
        autodelete >= 0,
        "time_til_dormant_autodeletion_ms",
        POSITIVE,
    );
    refuse(invalid, "Invalid create template request.")?;
    let mut stored = TemplateSettings {
        allow_user_cancel_workspace_jobs: request.allow_user_cancel_workspace_jobs.unwrap_or(false),
        max_port_sharing_level: port_sharing,
        use_classic_parameter_flow: request.template_use_classic_parameter_flow.unwrap_or(false),
        cors_behavior: cors,
        ..TemplateSettings::default()
    };
    if request.require_active_version && licensed.access_control {
        stored.require_active_version = true;
    }
    let wanted = Wanted {
        default_ttl_ms: ttl,
        activity_bump_ms: bump,
        autostop_days: stop_bits,
        autostop_weeks: weeks,
        autostart_days: start_bits,
        allow_user_autostart: request.allow_user_autostart.unwrap_or(true),
        allow_user_autostop: request.allow_user_autostop.unwrap_or(true),
        failure_ttl_ms: failure,
        time_til_dormant_ms: dormant,
        time_til_dormant_autodelete_ms: autodelete,
    };
    set_schedule(&mut stored, &wanted, licensed);
    Ok(stored)
}

/// The body of `PATCH /templates/{id}` (`codersdk.UpdateTemplateMeta`): pointers are `Option`s, plain fields
/// default to zero when left out.
#[derive(Deserialize)]
pub(crate) struct Patch {
    #[serde(default)]
    pub(crate) name: String,
    pub(crate) display_name: Option<String>,
    pub(crate) description: Option<String>,
    pub(crate) icon: Option<String>,
    #[serde(default)]
    default_ttl_ms: i64,
    #[serde(default)]
    activity_bump_ms: i64,
    autostop_requirement: Option<Autostop>,
    autostart_requirement: Option<Autostart>,
    #[serde(default)]
    allow_user_autostart: bool,
    #[serde(default)]
    allow_user_autostop: bool,
    #[serde(default)]
    allow_user_cancel_workspace_jobs: bool,
    #[serde(default)]
    failure_ttl_ms: i64,
    #[serde(default)]
    time_til_dormant_ms: i64,
    #[serde(default)]
    time_til_dormant_autodelete_ms: i64,
    #[serde(default)]
    require_active_version: bool,
    deprecation_message: Option<String>,
    #[serde(default)]
    pub(crate) disable_everyone_group_access: bool,
    max_port_share_level: Option<String>,
    cors_behavior: Option<String>,
    use_classic_parameter_flow: Option<bool>,
}

/// What a write asks of the schedule store, as Coder's `TemplateScheduleOptions`.
struct Wanted {
    default_ttl_ms: i64,
    activity_bump_ms: i64,
    autostop_days: u8,
    autostop_weeks: i64,
    autostart_days: u8,
    allow_user_autostart: bool,
    allow_user_autostop: bool,
    failure_ttl_ms: i64,
    time_til_dormant_ms: i64,
    time_til_dormant_autodelete_ms: i64,
}

/// The outcome of a metadata patch on the settings: unchanged (Coder's 304 when the name matches too), or the
/// settings to store.
pub(crate) enum Patched {
    Unchanged,
    Changed(TemplateSettings),
}

/// Coder's `patchTemplateMeta` on the settings of `template`: Coder's 400 `Invalid request to update template
/// metadata!`, or what to store. The caller applies the name, display name, description and icon, and (only when
/// something changed, as Coder) `disable_everyone_group_access`.
pub(crate) fn patch(template: &Template, request: &Patch, licensed: Licensed) -> Result<Patched, ApiError> {
    let current = &template.settings;
    let read = schedule(current, licensed);
    let mut invalid = Vec::new();
    check(
        &mut invalid,
        request.default_ttl_ms >= 0,
        "default_ttl_ms",
        POSITIVE,
    );
    check(
        &mut invalid,
        request.activity_bump_ms >= 0,
        "activity_bump_ms",
        POSITIVE,
    );
    let read_stop_days = weekdays(read.autostop_days)
        .into_iter()
        .map(str::to_owned)
        .collect::<Vec<_>>();
    let (stop_days, weeks) = request
        .autostop_requirement
        .as_ref()
        .map_or((&read_stop_days[..], read.autostop_weeks), |a| {
            (&a.days_of_week[..], a.weeks)
        });
    let stop_bits = parse_days(&mut invalid, stop_days, "autostop_requirement.days_of_week");
    let read_start_days = weekdays(read.autostart_days)
        .into_iter()
        .map(str::to_owned)
        .collect::<Vec<_>>();
    let start_days = request
        .autostart_requirement
        .as_ref()
        .map_or(&read_start_days[..], |a| &a.days_of_week[..]);
    let start_bits = parse_days(&mut invalid, start_days, "autostart_requirement.days_of_week");
    check(&mut invalid, weeks >= 0, "autostop_requirement.weeks", POSITIVE);
    let weeks = if weeks == 0 { 1 } else { weeks };
    check(
        &mut invalid,
        weeks <= MAX_AUTOSTOP_WEEKS,
        "autostop_requirement.weeks",
        &too_many_weeks(),
    );
    let deprecated = request
        .deprecation_message
        .clone()
        .unwrap_or_else(|| current.deprecated.clone());
    for (value, field) in [
        (request.failure_ttl_ms, "failure_ttl_ms"),
        (request.time_til_dormant_ms, "time_til_dormant_ms"),
        (
            request.time_til_dormant_autodelete_ms,
            "time_til_dormant_autodelete_ms",
        ),
    ] {
        check(
            &mut invalid,
            value == 0 || value >= MIN_TTL_MS,
            field,
            AT_LEAST_A_MINUTE,
        );
    }
    let mut port_sharing = current.max_port_sharing_level.clone();
    if let Some(level) = request
        .max_port_share_level
        .as_ref()
        .filter(|l| l.as_str() != shown_port_sharing(&current.max_port_sharing_level, licensed))
    {
        // Coder names the field differently here than in the request.
        match port_sharing_refusal(level, licensed) {
            Some(reason) => invalid.push(("max_port_sharing_level".to_owned(), reason.to_owned())),
            None => port_sharing = level.clone(),
        }
    }
    let mut cors = current.cors_behavior.clone();
    if let Some(wanted) = request.cors_behavior.as_ref().filter(|c| !c.is_empty()) {
        check(
            &mut invalid,
            valid_cors(wanted),
            "cors_behavior",
            &cors_refusal(wanted),
        );
        cors.clone_from(wanted);
    }
    refuse(invalid, "Invalid request to update template metadata!")?;
    let classic = request
        .use_classic_parameter_flow
        .unwrap_or(current.use_classic_parameter_flow);
    let wanted = Wanted {
        default_ttl_ms: request.default_ttl_ms,
        activity_bump_ms: request.activity_bump_ms,
        autostop_days: stop_bits,
        autostop_weeks: weeks,
        autostart_days: start_bits,
        allow_user_autostart: request.allow_user_autostart,
        allow_user_autostop: request.allow_user_autostop,
        failure_ttl_ms: request.failure_ttl_ms,
        time_til_dormant_ms: request.time_til_dormant_ms,
        time_til_dormant_autodelete_ms: request.time_til_dormant_autodelete_ms,
    };
    let schedule_same = same_schedule(current, &read, &wanted);
    let unchanged = request.name == template.name
        && request
            .display_name
            .as_ref()
            .is_none_or(|v| *v == template.display_name)
        && request
            .description
            .as_ref()
            .is_none_or(|v| *v == template.description)
        && request.icon.as_ref().is_none_or(|v| *v == template.icon)
        && schedule_same
        && request.allow_user_cancel_workspace_jobs == current.allow_user_cancel_workspace_jobs
        && request.require_active_version == current.require_active_version
        && deprecated == current.deprecated
        && classic == current.use_classic_parameter_flow
        && port_sharing == current.max_port_sharing_level
        && cors == current.cors_behavior;
    if unchanged {
        return Ok(Patched::Unchanged);
    }
    let mut stored = TemplateSettings {
        allow_user_cancel_workspace_jobs: request.allow_user_cancel_workspace_jobs,
        max_port_sharing_level: port_sharing,
        use_classic_parameter_flow: classic,
        cors_behavior: cors,
        ..current.clone()
    };
    set_access_control(&mut stored, request.require_active_version, deprecated, licensed);
    if !schedule_same {
        set_schedule(&mut stored, &wanted, licensed);
    }
    Ok(Patched::Changed(stored))
}

/// Whether `wanted` is the schedule already in place (Coder compares the days and weeks with what its schedule
/// store reads, everything else with the stored row).
fn same_schedule(current: &TemplateSettings, read: &Schedule, wanted: &Wanted) -> bool {
    wanted.default_ttl_ms == current.default_ttl_ms
        && wanted.activity_bump_ms == current.activity_bump_ms
        && wanted.autostop_days == read.autostop_days
        && wanted.autostart_days == read.autostart_days
        && wanted.autostop_weeks == read.autostop_weeks
        && wanted.failure_ttl_ms == current.failure_ttl_ms
        && wanted.time_til_dormant_ms == current.time_til_dormant_ms
        && wanted.time_til_dormant_autodelete_ms == current.time_til_dormant_autodelete_ms
        && wanted.allow_user_autostart == current.allow_user_autostart
        && wanted.allow_user_autostop == current.allow_user_autostop
}

/// Coder's schedule store `Set`: licensed, every schedule setting; else only the default TTL and the activity bump.
fn set_schedule(stored: &mut TemplateSettings, wanted: &Wanted, licensed: Licensed) {
    stored.default_ttl_ms = wanted.default_ttl_ms;
    stored.activity_bump_ms = wanted.activity_bump_ms;
    if !licensed.scheduling {
        return;
    }
    stored.autostop_requirement_days = wanted.autostop_days;
    stored.autostop_requirement_weeks = wanted.autostop_weeks.max(1);
    stored.autostart_block_days = !wanted.autostart_days & ALL_DAYS;
    stored.allow_user_autostart = wanted.allow_user_autostart;
    stored.allow_user_autostop = wanted.allow_user_autostop;
    stored.failure_ttl_ms = wanted.failure_ttl_ms;
    stored.time_til_dormant_ms = wanted.time_til_dormant_ms;
    stored.time_til_dormant_autodelete_ms = wanted.time_til_dormant_autodelete_ms;
}

/// Coder's access-control store: licensed, both settings; else only clearing a deprecation.
fn set_access_control(
    stored: &mut TemplateSettings,
    require_active: bool,
    deprecated: String,
    licensed: Licensed,
) {
    if licensed.access_control {
        stored.require_active_version = require_active;
        stored.deprecated = deprecated;
    } else if deprecated.is_empty() {
        stored.deprecated.clear();
    }
}

fn check(invalid: &mut Vec<(String, String)>, ok: bool, field: &str, detail: &str) {
    if !ok {
        invalid.push((field.to_owned(), detail.to_owned()));
    }
}

/// The bitmap of `days` (0 for none), or a validation for `field`.
fn parse_days(invalid: &mut Vec<(String, String)>, days: &[String], field: &str) -> u8 {
    bitmap(days).unwrap_or_else(|reason| {
        invalid.push((field.to_owned(), reason));
        0
    })
}

fn port_sharing_refusal(level: &str, licensed: Licensed) -> Option<&'static str> {
    if !licensed.port_sharing {
        Some(PORT_SHARING_UNLICENSED)
    } else if !valid_max_port_sharing(level) {
        Some(PORT_SHARING_INVALID)
    } else {
        None
    }
}

fn valid_cors(value: &str) -> bool {
    CORS_BEHAVIORS.contains(&value)
}

fn cors_refusal(value: &str) -> String {
    format!(
        "Invalid CORS behavior {value:?}. Must be one of [{}]",
        CORS_BEHAVIORS.join(", ")
    )
}

fn too_many_weeks() -> String {
    format!("Must be less than {MAX_AUTOSTOP_WEEKS}.")
}

fn refuse(invalid: Vec<(String, String)>, message: &str) -> Result<(), ApiError> {
    if invalid.is_empty() {
        return Ok(());
    }
    Err(invalid
        .into_iter()
        .fold(ApiError::bad_request(message), |error, (field, detail)| {
            error.validation(&field, detail)
        }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::{ALL_DAYS, bitmap, weekdays};

    #[test]
    fn weekday_bitmaps_follow_coders_order_and_spelling() {
        assert_eq!(weekdays(0b0100_0001), ["monday", "sunday"]);
        assert_eq!(weekdays(ALL_DAYS).len(), 7);
        assert_eq!(
            bitmap(&["Sunday".to_owned(), "monday".to_owned(), "monday".to_owned()]),
            Ok(0b0100_0001)
        );
        assert_eq!(bitmap(&[]), Ok(0));
        assert_eq!(
            bitmap(&["monday".to_owned(), "someday".to_owned()]),
            Err("invalid weekday \"someday\"".to_owned())
        );
    }
}
