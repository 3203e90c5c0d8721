//! Pure rules of the workspace settings a `CoderWorkspace` spec carries besides `running`: the time to live
//! (`ttlMillis` or `ttl`), the autostart schedule, automatic updates and rich parameter values. Every value is
//! checked before anything is written to Coder, with kube-apiserver's 422 wording naming the field; then each
//! setting the spec sets is compared with Coder's current value, so only a real change reaches Coder (each through
//! its own endpoint). A setting the spec leaves out is never written.

use std::collections::{BTreeMap, BTreeSet};

use coder_k8s_api::aggregation::{
    CoderWorkspaceParameter, CoderWorkspaceSecretKeyRef, CoderWorkspaceSpec, GROUP,
};
use coder_k8s_coder_client::schedule::{
    TTL_MAXIMUM_MS, TTL_MINIMUM_MS, check_weekly_schedule, stored_ttl_ms,
};
use coder_k8s_coder_client::types::builds::Transition;
use coder_k8s_coder_client::types::parameters::TemplateVersionParameter;
use coder_k8s_coder_client::types::workspaces::{RichParameterValue, Workspace};

use super::field_errors::{self, FieldError};
use super::k8s_names::{is_dns_subdomain, is_secret_data_key};
use crate::generic::ApiError;

/// The field errors of one workspace object, answered together as one 422.
#[derive(Debug, Default)]
pub struct FieldErrors(Vec<FieldError>);

impl FieldErrors {
    pub fn push(&mut self, error: FieldError) {
        self.0.push(error);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `Ok` without errors, else the 422 of workspace `name`.
    pub fn into_result(self, name: &str) -> Result<(), ApiError> {
        field_errors::check("CoderWorkspace", GROUP, name, &self.0)
    }
}

/// What a write does with one setting: leave Coder's value alone, or make it this value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wanted<T> {
    Keep,
    Set(T),
}

impl<T: PartialEq> Wanted<T> {
    /// The value to write: `Some` only when the spec sets one that differs from `current`.
    pub fn change_from(self, current: &T) -> Option<T> {
        match self {
            Self::Set(value) if value != *current => Some(value),
            _ => None,
        }
    }
}

const NANOS_PER_MILLI: i128 = 1_000_000;

/// Go's `time.ParseDuration` (the format of Kubernetes durations), in nanoseconds; the error is Go's text.
pub fn parse_go_duration(text: &str) -> Result<i64, String> {
    let invalid = || format!("time: invalid duration {text:?}");
    let (negative, mut rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..number_end];
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() || number.matches('.').count() > 1 {
            return Err(invalid());
        }
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_end];
        rest = &rest[unit_end..];
        let scale: i128 = match unit {
            "" => return Err(format!("time: missing unit in duration {text:?}")),
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            other => return Err(format!("time: unknown unit {other:?} in duration {text:?}")),
        };
        let whole: i128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| invalid())?
        };
        let mut part = whole.checked_mul(scale).ok_or_else(invalid)?;
        let mut divisor = 1i128;
        for digit in fraction.bytes().take(30) {
            divisor *= 10;
            part += i128::from(digit - b'0') * scale / divisor;
        }
        total = total.checked_add(part).ok_or_else(invalid)?;
        if total > i128::from(i64::MAX) {
            return Err(invalid());
        }
    }
    let total = if negative { -total } else { total };
    i64::try_from(total).map_err(|_| invalid())
}

/// The stored time to live of `millis` (see [`stored_ttl_ms`]), or the reason it is out of Coder's bounds.
fn stored_or_reason(millis: i64) -> Result<Option<i64>, String> {
    stored_ttl_ms(Some(millis)).map_err(|_| {
        format!(
            "must be 0 (autostop off) or between {} and {} minutes; Coder keeps whole minutes",
            TTL_MINIMUM_MS / 60_000,
            TTL_MAXIMUM_MS / 60_000
        )
    })
}

/// The time to live a spec asks for (`Set(None)`: autostop off), as Coder would store it. `current` is Coder's
/// value on an update (`None` on create): when `ttlMillis` and `ttl` disagree, the one equal to it is the copy a
/// read put there and the other is the change; otherwise they conflict.
pub fn wanted_ttl(
    spec: &CoderWorkspaceSpec,
    current: Option<Option<i64>>,
    errors: &mut FieldErrors,
) -> Wanted<Option<i64>> {
    let from_millis = spec.ttl_millis.map(|ms| {
        stored_or_reason(ms)
            .map_err(|reason| errors.push(FieldError::invalid("spec.ttlMillis", ms.to_string(), reason)))
            .ok()
    });
    let from_duration = spec.ttl.as_deref().map(|text| {
        let millis = parse_go_duration(text)
            .map(|nanos| i64::try_from(i128::from(nanos) / NANOS_PER_MILLI).unwrap_or(i64::MAX));
        millis
            .and_then(stored_or_reason)
            .map_err(|reason| errors.push(FieldError::invalid("spec.ttl", text, reason)))
            .ok()
    });
    match (from_millis, from_duration) {
        (None, None) => Wanted::Keep,
        (Some(Some(value)), None) | (None, Some(Some(value))) => Wanted::Set(value),
        (Some(Some(millis)), Some(Some(duration))) if millis == duration => Wanted::Set(millis),
        (Some(Some(millis)), Some(Some(duration))) => match current {
            Some(current) if current == millis => Wanted::Set(duration),
            Some(current) if current == duration => Wanted::Set(millis),
            _ => {
                errors.push(FieldError::invalid(
                    "spec.ttl",
                    spec.ttl.as_deref().unwrap_or_default(),
                    format!(
                        "conflicts with spec.ttlMillis {}; set one of them",
                        spec.ttl_millis.unwrap_or_default()
                    ),
                ));
                Wanted::Keep
            }
        },
        // An invalid value has its error already.
        _ => Wanted::Keep,
    }
}

/// The autostart schedule a spec asks for (`Set(None)`: off, from an empty string), checked as Coder checks it. The
/// zone name is left to Coder, which carries the IANA database: its refusal comes before any other write.
pub fn wanted_autostart(spec: &CoderWorkspaceSpec, errors: &mut FieldErrors) -> Wanted<Option<String>> {
    let Some(schedule) = spec.autostart_schedule.as_deref() else {
        return Wanted::Keep;
    };
    if schedule.is_empty() {
        return Wanted::Set(None);
    }
    match check_weekly_schedule(schedule, |_| true) {
        Ok(()) => Wanted::Set(Some(schedule.to_owned())),
        Err(reason) => {
            errors.push(FieldError::invalid("spec.autostartSchedule", schedule, reason.0));
            Wanted::Keep
        }
    }
}

/// Coder's automatic-update settings.
pub const AUTOMATIC_UPDATES: [&str; 2] = ["always", "never"];

/// The automatic-update setting a spec asks for.
pub fn wanted_automatic_updates(spec: &CoderWorkspaceSpec, errors: &mut FieldErrors) -> Wanted<String> {
    match spec.automatic_updates.as_deref() {
        None => Wanted::Keep,
        Some(value) if AUTOMATIC_UPDATES.contains(&value) => Wanted::Set(value.to_owned()),
        Some(value) => {
            errors.push(FieldError::unsupported(
                "spec.automaticUpdates",
                value,
                &AUTOMATIC_UPDATES,
            ));
            Wanted::Keep
        }
    }
}

/// The field path of parameter `index`.
pub fn parameter_field(index: usize) -> String {
    format!("spec.parameters[{index}]")
}

/// The shape of `spec.parameters`: a name on each entry, no name twice, exactly one of `value` and `valueFrom`, and
/// a Secret name and key in every reference.
pub fn check_parameters(spec: &CoderWorkspaceSpec, errors: &mut FieldErrors) {
    let mut seen = BTreeSet::new();
    for (index, parameter) in spec.parameters.iter().flatten().enumerate() {
        let field = parameter_field(index);
        if parameter.name.is_empty() {
            errors.push(FieldError::required(format!("{field}.name"), ""));
        } else if !seen.insert(parameter.name.as_str()) {
            errors.push(FieldError::duplicate(format!("{field}.name"), &parameter.name));
        }
        match (&parameter.value, &parameter.value_from) {
            (Some(_), Some(_)) => errors.push(FieldError::forbidden(
                format!("{field}.valueFrom"),
                "may not be set together with value",
            )),
            (None, None) => errors.push(FieldError::required(
                format!("{field}.value"),
                "set value or valueFrom",
            )),
            (None, Some(source)) => {
                let reference = &source.secret_key_ref;
                let at = format!("{field}.valueFrom.secretKeyRef");
                check_secret_key_ref(reference, &at, errors);
            }
            (Some(_), None) => {}
        }
    }
}

/// A reference's Secret name and key as Kubernetes allows them: the name goes into the path of the read, so one
/// such as `a/b` or `a?b` would be authorized under one name and read another object.
fn check_secret_key_ref(reference: &CoderWorkspaceSecretKeyRef, at: &str, errors: &mut FieldErrors) {
    let name = format!("{at}.name");
    if reference.name.is_empty() {
        errors.push(FieldError::required(name, ""));
    } else if !is_dns_subdomain(&reference.name) {
        errors.push(FieldError::invalid(
            name,
            &reference.name,
            "a Secret name must be a lowercase RFC 1123 subdomain of at most 253 characters",
        ));
    }
    let key = format!("{at}.key");
    if reference.key.is_empty() {
        errors.push(FieldError::required(key, ""));
    } else if !is_secret_data_key(&reference.key) {
        errors.push(FieldError::invalid(
            key,
            &reference.key,
            "a Secret key consists of alphanumeric characters, '-', '_' or '.', at most 253, and is not '.' or starts with '..'",
        ));
    }
}

/// The Secret references of a spec's parameters, by parameter name.
pub fn references(spec: &CoderWorkspaceSpec) -> BTreeMap<String, CoderWorkspaceSecretKeyRef> {
    spec.parameters
        .iter()
        .flatten()
        .filter_map(|p| Some((p.name.clone(), p.value_from.as_ref()?.secret_key_ref.clone())))
        .collect()
}

/// A parameter value a write asks for: its place in the spec, and whether it came from a Secret.
#[derive(Clone, PartialEq, Eq)]
pub struct WantedValue {
    pub index: usize,
    pub name: String,
    pub value: String,
    pub sensitive: bool,
}

impl std::fmt::Debug for WantedValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let value = if self.sensitive { "<redacted>" } else { &self.value };
        f.debug_struct("WantedValue")
            .field("index", &self.index)
            .field("name", &self.name)
            .field("value", &value)
            .finish()
    }
}

/// The spec's parameter values with every reference replaced by its Secret value (`secret_values` by parameter
/// name, already read and allowed).
pub fn wanted_values(
    spec: &CoderWorkspaceSpec,
    secret_values: &BTreeMap<String, String>,
) -> Vec<WantedValue> {
    spec.parameters
        .iter()
        .flatten()
        .enumerate()
        .filter_map(|(index, parameter)| {
            let (value, sensitive) = match (&parameter.value, &parameter.value_from) {
                (Some(value), _) => (value.clone(), false),
                (None, Some(_)) => (secret_values.get(&parameter.name)?.clone(), true),
                (None, None) => return None,
            };
            Some(WantedValue {
                index,
                name: parameter.name.clone(),
                value,
                sensitive,
            })
        })
        .collect()
}

/// The wanted values that differ from the latest build's (`current`, `None` before the first build).
pub fn changed_values(wanted: &[WantedValue], current: Option<&[RichParameterValue]>) -> Vec<WantedValue> {
    wanted
        .iter()
        .filter(|w| {
            current
                .unwrap_or_default()
                .iter()
                .find(|c| c.name == w.name)
                .is_none_or(|c| c.value != w.value)
        })
        .cloned()
        .collect()
}

/// The changed values checked against the parameters of the version the build uses: every name must be one of
/// them, and after the first build (`current` is `Some`) an immutable parameter keeps its value, as Coder refuses.
pub fn check_against_version(
    changed: &[WantedValue],
    version: &[TemplateVersionParameter],
    current: Option<&[RichParameterValue]>,
    errors: &mut FieldErrors,
) {
    for wanted in changed {
        let field = parameter_field(wanted.index);
        let Some(parameter) = version.iter().find(|p| p.name == wanted.name) else {
            let known: Vec<&str> = version.iter().map(|p| p.name.as_str()).collect();
            let reason = if known.is_empty() {
                "the template version has no parameters".to_owned()
            } else {
                format!(
                    "the template version has no such parameter (it has {})",
                    known.join(", ")
                )
            };
            errors.push(FieldError::invalid(format!("{field}.name"), &wanted.name, reason));
            continue;
        };
        let had_value = current.unwrap_or_default().iter().any(|c| c.name == wanted.name);
        if !parameter.mutable && had_value {
            errors.push(FieldError::forbidden(
                field,
                format!(
                    "Parameter {:?} is not mutable, so it can't be updated after creating a workspace.",
                    wanted.name
                ),
            ));
        }
    }
}

/// The values to send with a build, in the spec's order.
pub fn rich_values(changed: &[WantedValue]) -> Vec<RichParameterValue> {
    changed
        .iter()
        .map(|w| RichParameterValue {
            name: w.name.clone(),
            value: w.value.clone(),
        })
        .collect()
}

/// The values Coder's error texts must never repeat.
pub fn sensitive_values(wanted: &[WantedValue]) -> Vec<&str> {
    wanted
        .iter()
        .filter(|w| w.sensitive)
        .map(|w| w.value.as_str())
        .collect()
}

/// The build an update queues: a change of `running`, or changed parameter values, which a start applies at once
/// when the workspace should run and a stop build records for the next start otherwise.
pub fn build_for(have_running: bool, want_running: bool, parameters_changed: bool) -> Option<Transition> {
    match (have_running, want_running) {
        (false, true) => Some(Transition::Start),
        (true, false) => Some(Transition::Stop),
        (true, true) if parameters_changed => Some(Transition::Start),
        (false, false) if parameters_changed => Some(Transition::Stop),
        _ => None,
    }
}

/// The settings changes of an update against the workspace Coder has.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SettingsChanges {
    pub autostart: Option<Option<String>>,
    pub ttl_ms: Option<Option<i64>>,
    pub automatic_updates: Option<String>,
}

impl SettingsChanges {
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// `workspace` as Coder has it once these changes are written (Coder keeps the TTL as stored).
    pub fn apply_to(&self, workspace: &mut Workspace) {
        if let Some(schedule) = &self.autostart {
            workspace.autostart_schedule.clone_from(schedule);
        }
        if let Some(ttl) = self.ttl_ms {
            workspace.ttl_ms = ttl;
        }
        if let Some(updates) = &self.automatic_updates {
            workspace.automatic_updates.clone_from(updates);
        }
    }
}

/// Every setting check of a spec, with what differs from `current` (`None` on create: then every set value counts
/// as a change).
pub fn settings_changes(
    spec: &CoderWorkspaceSpec,
    current: Option<&Workspace>,
    errors: &mut FieldErrors,
) -> SettingsChanges {
    let ttl = wanted_ttl(spec, current.map(|w| w.ttl_ms), errors);
    let autostart = wanted_autostart(spec, errors);
    let automatic_updates = wanted_automatic_updates(spec, errors);
    check_parameters(spec, errors);
    let Some(current) = current else {
        return SettingsChanges {
            autostart: set_value(autostart),
            ttl_ms: set_value(ttl),
            automatic_updates: set_value(automatic_updates),
        };
    };
    SettingsChanges {
        autostart: autostart.change_from(&current.autostart_schedule),
        ttl_ms: ttl.change_from(&current.ttl_ms),
        automatic_updates: automatic_updates.change_from(&current.automatic_updates),
    }
}

fn set_value<T>(wanted: Wanted<T>) -> Option<T> {
    match wanted {
        Wanted::Keep => None,
        Wanted::Set(value) => Some(value),
    }
}

/// The parameters shown on read: Coder's values sorted by name, a parameter recorded as set from a Secret as that
/// reference instead of its value.
pub fn shown_parameters(
    values: &[RichParameterValue],
    references: &BTreeMap<String, CoderWorkspaceSecretKeyRef>,
) -> Vec<CoderWorkspaceParameter> {
    let mut shown: Vec<CoderWorkspaceParameter> = values
        .iter()
        .map(|value| match references.get(&value.name) {
            Some(reference) => CoderWorkspaceParameter {
                name: value.name.clone(),
                value: None,
                value_from: Some(coder_k8s_api::aggregation::CoderWorkspaceParameterSource {
                    secret_key_ref: reference.clone(),
                }),
            },
            None => CoderWorkspaceParameter {
                name: value.name.clone(),
                value: Some(value.value.clone()),
                value_from: None,
            },
        })
        .collect();
    shown.sort_by(|a, b| a.name.cmp(&b.name));
    shown
}

/// The references to record after a write: the recorded ones, minus parameters the spec now sets as plain values,
/// plus the spec's references.
pub fn recorded_after(
    recorded: &BTreeMap<String, CoderWorkspaceSecretKeyRef>,
    spec: &CoderWorkspaceSpec,
) -> BTreeMap<String, CoderWorkspaceSecretKeyRef> {
    let mut after = recorded.clone();
    for parameter in spec.parameters.iter().flatten() {
        if parameter.value.is_some() {
            after.remove(&parameter.name);
        }
    }
    after.extend(references(spec));
    after
}

/// Whether Coder certainly did not take a write that failed with `error`: only a refusal (a 4xx) says so; after a
/// timeout or a 5xx the write may have happened.
pub fn certainly_refused(error: &ApiError) -> bool {
    (400..500).contains(&error.code)
}

/// The references to keep after a write that would have changed them from `previous` to `written` failed. When
/// Coder may hold the values the write carried (`values_may_be_in_coder`), both are kept, a parameter in both
/// with its new reference: a read then shows a reference where Coder may have either value, never a Secret's
/// value. Otherwise `previous` is put back.
pub fn record_after_failure(
    previous: &BTreeMap<String, CoderWorkspaceSecretKeyRef>,
    written: &BTreeMap<String, CoderWorkspaceSecretKeyRef>,
    values_may_be_in_coder: bool,
) -> BTreeMap<String, CoderWorkspaceSecretKeyRef> {
    let mut kept = previous.clone();
    if values_may_be_in_coder {
        kept.extend(written.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(value: serde_json::Value) -> CoderWorkspaceSpec {
        serde_json::from_value(value).unwrap()
    }

    fn message(errors: FieldErrors) -> String {
        errors.into_result("acme.alice.dev").unwrap_err().message
    }

    #[test]
    fn go_durations_parse_as_kubernetes_writes_them() {
        let hour = 3_600_000_000_000;
        for (text, nanos) in [
            ("8h", 8 * hour),
            ("1h30m", hour + 1_800_000_000_000),
            ("1.5h", hour + 1_800_000_000_000),
            ("90m", 5_400_000_000_000),
            ("0", 0),
            ("0s", 0),
            ("-1h", -hour),
            ("+2m", 120_000_000_000),
            ("1.s", 1_000_000_000),
            ("300ms", 300_000_000),
            ("2\u{b5}s", 2_000),
        ] {
            assert_eq!(parse_go_duration(text), Ok(nanos), "{text}");
        }
        for (text, error) in [
            ("", "time: invalid duration \"\""),
            ("8", "time: missing unit in duration \"8\""),
            ("1d", "time: unknown unit \"d\" in duration \"1d\""),
            (".h", "time: invalid duration \".h\""),
            ("1..5h", "time: invalid duration \"1..5h\""),
            ("9999999999h", "time: invalid duration \"9999999999h\""),
        ] {
            assert_eq!(parse_go_duration(text), Err(error.to_owned()), "{text}");
        }
    }

    #[test]
    fn ttl_and_ttl_millis_are_one_setting() {
        let mut errors = FieldErrors::default();
        let wanted = |value, current| wanted_ttl(&spec(value), current, &mut FieldErrors::default());
        assert_eq!(wanted(json!({}), None), Wanted::Keep);
        assert_eq!(wanted(json!({"ttl": "8h"}), None), Wanted::Set(Some(28_800_000)));
        assert_eq!(
            wanted(json!({"ttlMillis": 90_500}), None),
            Wanted::Set(Some(60_000))
        );
        assert_eq!(wanted(json!({"ttl": "0s"}), None), Wanted::Set(None));
        assert_eq!(wanted(json!({"ttlMillis": 0}), None), Wanted::Set(None));
        assert_eq!(
            wanted(json!({"ttl": "1h", "ttlMillis": 3_600_000}), None),
            Wanted::Set(Some(3_600_000))
        );
        // The copy a read left in ttlMillis does not stand against a new ttl, nor the other way round.
        let stale = json!({"ttl": "9h", "ttlMillis": 28_800_000});
        assert_eq!(
            wanted(stale.clone(), Some(Some(28_800_000))),
            Wanted::Set(Some(32_400_000))
        );
        let edited = json!({"ttl": "8h", "ttlMillis": 32_400_000});
        assert_eq!(
            wanted(edited, Some(Some(28_800_000))),
            Wanted::Set(Some(32_400_000))
        );
        assert_eq!(wanted_ttl(&spec(stale), None, &mut errors), Wanted::Keep);
        assert_eq!(
            message(errors),
            r#"CoderWorkspace.aggregation.coder.com "acme.alice.dev" is invalid: spec.ttl: Invalid value: "9h": conflicts with spec.ttlMillis 28800000; set one of them"#
        );
        let mut errors = FieldErrors::default();
        for value in [
            json!({"ttl": "30s"}),
            json!({"ttlMillis": 2_592_060_000_i64}),
            json!({"ttl": "1d"}),
        ] {
            assert_eq!(wanted_ttl(&spec(value), None, &mut errors), Wanted::Keep);
        }
        assert_eq!(
            message(errors),
            r#"CoderWorkspace.aggregation.coder.com "acme.alice.dev" is invalid: [spec.ttl: Invalid value: "30s": must be 0 (autostop off) or between 1 and 43200 minutes; Coder keeps whole minutes, spec.ttlMillis: Invalid value: "2592060000": must be 0 (autostop off) or between 1 and 43200 minutes; Coder keeps whole minutes, spec.ttl: Invalid value: "1d": time: unknown unit "d" in duration "1d"]"#
        );
    }

    #[test]
    fn autostart_and_automatic_updates_are_checked_like_coder() {
        let mut errors = FieldErrors::default();
        let schedule = |value| wanted_autostart(&spec(value), &mut FieldErrors::default());
        assert_eq!(schedule(json!({})), Wanted::Keep);
        assert_eq!(schedule(json!({"autostartSchedule": ""})), Wanted::Set(None));
        assert_eq!(
            schedule(json!({"autostartSchedule": "CRON_TZ=Europe/Berlin 30 8 * * 1-5"})),
            Wanted::Set(Some("CRON_TZ=Europe/Berlin 30 8 * * 1-5".to_owned()))
        );
        let bad = spec(json!({"autostartSchedule": "61 8 * * 1", "automaticUpdates": "sometimes"}));
        assert_eq!(wanted_autostart(&bad, &mut errors), Wanted::Keep);
        assert_eq!(wanted_automatic_updates(&bad, &mut errors), Wanted::Keep);
        assert_eq!(
            message(errors),
            r#"CoderWorkspace.aggregation.coder.com "acme.alice.dev" is invalid: [spec.autostartSchedule: Invalid value: "61 8 * * 1": parse schedule: end of range (61) above maximum (59): 61, spec.automaticUpdates: Unsupported value: "sometimes": supported values: "always", "never"]"#
        );
        let always = spec(json!({"automaticUpdates": "always"}));
        assert_eq!(
            wanted_automatic_updates(&always, &mut FieldErrors::default()),
            Wanted::Set("always".to_owned())
        );
    }

    #[test]
    fn only_settings_that_differ_from_coder_are_written() {
        let current = Workspace {
            ttl_ms: Some(28_800_000),
            autostart_schedule: Some("0 9 * * 1".into()),
            automatic_updates: "never".into(),
            ..Workspace::default()
        };
        let mut errors = FieldErrors::default();
        let same = spec(json!({"ttl": "8h", "autostartSchedule": "0 9 * * 1", "automaticUpdates": "never"}));
        assert!(settings_changes(&same, Some(&current), &mut errors).is_empty());
        let left_out = spec(json!({"running": true}));
        assert!(settings_changes(&left_out, Some(&current), &mut errors).is_empty());
        let changed = spec(json!({"ttlMillis": 0, "autostartSchedule": "", "automaticUpdates": "always"}));
        assert_eq!(
            settings_changes(&changed, Some(&current), &mut errors),
            SettingsChanges {
                autostart: Some(None),
                ttl_ms: Some(None),
                automatic_updates: Some("always".into()),
            }
        );
        assert!(errors.is_empty());
        // On create every set value counts, also one equal to a default.
        let created = settings_changes(&same, None, &mut errors);
        assert_eq!(created.automatic_updates.as_deref(), Some("never"));
        assert_eq!(created.ttl_ms, Some(Some(28_800_000)));
        let mut copy = current.clone();
        settings_changes(&changed, Some(&current), &mut errors).apply_to(&mut copy);
        assert_eq!(
            (
                copy.ttl_ms,
                copy.autostart_schedule,
                copy.automatic_updates.as_str()
            ),
            (None, None, "always")
        );
    }

    fn from_secret(name: &str) -> serde_json::Value {
        json!({"name": name, "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}})
    }

    #[test]
    fn parameters_need_a_unique_name_and_one_source() {
        let mut errors = FieldErrors::default();
        check_parameters(
            &spec(json!({"parameters": [
                {"name": "a", "value": "1"},
                {"name": "a", "value": "2"},
                {"value": "3"},
                {"name": "b"},
                {"name": "c", "value": "x", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}},
                {"name": "d", "valueFrom": {"secretKeyRef": {}}},
            ]})),
            &mut errors,
        );
        assert_eq!(
            message(errors),
            r#"CoderWorkspace.aggregation.coder.com "acme.alice.dev" is invalid: [spec.parameters[1].name: Duplicate value: "a", spec.parameters[2].name: Required value, spec.parameters[3].value: Required value: set value or valueFrom, spec.parameters[4].valueFrom: Forbidden: may not be set together with value, spec.parameters[5].valueFrom.secretKeyRef.name: Required value, spec.parameters[5].valueFrom.secretKeyRef.key: Required value]"#
        );
    }

    #[test]
    fn secret_references_need_a_secret_name_and_data_key_kubernetes_accepts() {
        let reference = |name: &str, key: &str| json!({"name": "p", "valueFrom": {"secretKeyRef": {"name": name, "key": key}}});
        let long = "a".repeat(254);
        for (name, key, bad_name, bad_key) in [
            ("api?x", "key", true, false),
            ("a/b", "key", true, false),
            ("Api", "key", true, false),
            ("-api", "key", true, false),
            ("api..x", "key", true, false),
            (long.as_str(), "key", true, false),
            ("api", "a/b", false, true),
            ("api", "..k", false, true),
            ("api", ".", false, true),
            ("api", long.as_str(), false, true),
            ("a.b-c.d", "K_e-y.1", false, false),
        ] {
            let mut errors = FieldErrors::default();
            check_parameters(
                &spec(json!({"parameters": [{"name": "q", "value": "1"}, reference(name, key)]})),
                &mut errors,
            );
            let name_error = format!(
                "spec.parameters[1].valueFrom.secretKeyRef.name: Invalid value: {name:?}: a Secret name must be"
            );
            let key_error = format!(
                "spec.parameters[1].valueFrom.secretKeyRef.key: Invalid value: {key:?}: a Secret key"
            );
            if !bad_name && !bad_key {
                assert!(errors.into_result("acme.alice.dev").is_ok(), "{name} {key}");
                continue;
            }
            let text = message(errors);
            assert_eq!(text.contains(&name_error), bad_name, "{name}: {text}");
            assert_eq!(text.contains(&key_error), bad_key, "{key}: {text}");
        }
    }

    fn value(name: &str, value: &str) -> RichParameterValue {
        RichParameterValue {
            name: name.into(),
            value: value.into(),
        }
    }

    #[test]
    fn changed_values_are_checked_against_the_version() {
        let wanted_spec = spec(json!({"parameters": [
            {"name": "region", "value": "eu"},
            {"name": "disk", "value": "large"},
            from_secret("api_key"),
            {"name": "nope", "value": "1"},
        ]}));
        let secrets = BTreeMap::from([("api_key".to_owned(), "hunter2".to_owned())]);
        let wanted = wanted_values(&wanted_spec, &secrets);
        assert_eq!(wanted.len(), 4);
        assert!(wanted[2].sensitive && !wanted[0].sensitive);
        assert!(!format!("{:?}", wanted[2]).contains("hunter2"));
        let current = [
            value("region", "eu"),
            value("disk", "small"),
            value("api_key", "old"),
        ];
        let changed = changed_values(&wanted, Some(&current));
        let names: Vec<&str> = changed.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(names, ["disk", "api_key", "nope"]);
        assert_eq!(sensitive_values(&changed), ["hunter2"]);
        let version = [
            TemplateVersionParameter {
                name: "region".into(),
                mutable: true,
                ..TemplateVersionParameter::default()
            },
            TemplateVersionParameter {
                name: "disk".into(),
                mutable: false,
                ..TemplateVersionParameter::default()
            },
            TemplateVersionParameter {
                name: "api_key".into(),
                mutable: true,
                ..TemplateVersionParameter::default()
            },
        ];
        let mut errors = FieldErrors::default();
        check_against_version(&changed, &version, Some(&current), &mut errors);
        let text = message(errors);
        assert_eq!(
            text,
            r#"CoderWorkspace.aggregation.coder.com "acme.alice.dev" is invalid: [spec.parameters[1]: Forbidden: Parameter "disk" is not mutable, so it can't be updated after creating a workspace., spec.parameters[3].name: Invalid value: "nope": the template version has no such parameter (it has region, disk, api_key)]"#
        );
        assert!(!text.contains("hunter2"));
        // Before the first build an immutable parameter may be set.
        let mut errors = FieldErrors::default();
        check_against_version(&changed[..2], &version, None, &mut errors);
        assert!(errors.is_empty());
        assert_eq!(
            serde_json::to_value(rich_values(&changed[..2])).unwrap(),
            json!([{"name": "disk", "value": "large"}, {"name": "api_key", "value": "hunter2"}])
        );
    }

    #[test]
    fn changed_values_start_a_running_workspace_and_are_recorded_by_a_stop_otherwise() {
        use Transition::{Start, Stop};
        assert_eq!(build_for(false, true, false), Some(Start));
        assert_eq!(build_for(true, false, true), Some(Stop));
        assert_eq!(build_for(true, true, true), Some(Start));
        assert_eq!(build_for(false, false, true), Some(Stop));
        assert_eq!(build_for(true, true, false), None);
        assert_eq!(build_for(false, false, false), None);
    }

    #[test]
    fn reads_show_recorded_parameters_as_their_reference() {
        let reference = CoderWorkspaceSecretKeyRef {
            name: "db".into(),
            key: "pw".into(),
        };
        let references = BTreeMap::from([("api_key".to_owned(), reference.clone())]);
        let shown = shown_parameters(&[value("region", "eu"), value("api_key", "hunter2")], &references);
        assert_eq!(
            serde_json::to_value(&shown).unwrap(),
            json!([
                {"name": "api_key", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}},
                {"name": "region", "value": "eu"},
            ])
        );
        let plain_now =
            spec(json!({"parameters": [{"name": "api_key", "value": "x"}, from_secret("token")]}));
        let after = recorded_after(&references, &plain_now);
        assert_eq!(after.keys().collect::<Vec<_>>(), ["token"]);
        let kept = recorded_after(&references, &spec(json!({})));
        assert_eq!(kept, references);
    }

    fn secret_ref(name: &str) -> CoderWorkspaceSecretKeyRef {
        CoderWorkspaceSecretKeyRef {
            name: name.into(),
            key: "k".into(),
        }
    }

    #[test]
    fn a_failed_write_keeps_every_reference_when_coder_may_hold_its_values() {
        let previous = BTreeMap::from([
            ("token".to_owned(), secret_ref("old")),
            ("region".to_owned(), secret_ref("regions")),
        ]);
        let written = BTreeMap::from([
            ("token".to_owned(), secret_ref("new")),
            ("api_key".to_owned(), secret_ref("api")),
        ]);
        assert_eq!(record_after_failure(&previous, &written, false), previous);
        let kept = record_after_failure(&previous, &written, true);
        assert_eq!(
            kept,
            BTreeMap::from([
                ("token".to_owned(), secret_ref("new")),
                ("region".to_owned(), secret_ref("regions")),
                ("api_key".to_owned(), secret_ref("api")),
            ])
        );
        // A create that may have happened keeps its references (there were none before).
        assert_eq!(record_after_failure(&BTreeMap::new(), &written, true), written);
    }

    #[test]
    fn only_a_refusal_says_coder_did_not_take_a_write() {
        for refused in [
            ApiError::bad_request("Validation failed."),
            ApiError::new(422, "Invalid", "ttl"),
            ApiError::conflict("A build is active."),
            ApiError::forbidden("Forbidden."),
        ] {
            assert!(certainly_refused(&refused), "{}", refused.code);
        }
        for unknown in [
            ApiError::internal("Coder is unavailable (server error, status 502)"),
            ApiError::timeout("the Coder API did not answer in time"),
        ] {
            assert!(!certainly_refused(&unknown), "{}", unknown.code);
        }
    }
}
