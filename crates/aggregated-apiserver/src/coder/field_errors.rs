//! Field errors worded as kube-apiserver's validation does (`spec.defaultTTL: Invalid value: "2x": ...`), collected
//! for one object and answered as one 422 `Invalid`.

use std::fmt;

use crate::generic::ApiError;
use crate::generic::status::StatusCause;

/// What is wrong with a field (kube-apiserver's `field.ErrorType`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `Invalid value: <value>: <detail>`.
    Invalid(String),
    /// `Unsupported value: <value>: supported values: ...`.
    Unsupported(String, &'static [&'static str]),
    /// `Duplicate value: <value>`.
    Duplicate(String),
    /// `Required value: <detail>`.
    Required,
    /// `Forbidden: <detail>`.
    Forbidden,
    /// `Not found: <value>`.
    NotFound(String),
}

/// One field error: the path (`spec.acl.users[0].name`), the kind and a detail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    pub path: String,
    pub kind: Kind,
    pub detail: String,
}

impl FieldError {
    pub fn invalid(path: impl Into<String>, value: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            kind: Kind::Invalid(value.into()),
            detail: detail.into(),
        }
    }

    pub fn unsupported(
        path: impl Into<String>,
        value: impl Into<String>,
        supported: &'static [&'static str],
    ) -> Self {
        Self {
            path: path.into(),
            kind: Kind::Unsupported(value.into(), supported),
            detail: String::new(),
        }
    }

    pub fn duplicate(path: impl Into<String>, value: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            kind: Kind::Duplicate(value.into()),
            detail: String::new(),
        }
    }

    pub fn required(path: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            kind: Kind::Required,
            detail: detail.into(),
        }
    }

    pub fn forbidden(path: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            kind: Kind::Forbidden,
            detail: detail.into(),
        }
    }

    pub fn not_found(path: impl Into<String>, value: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            kind: Kind::NotFound(value.into()),
            detail: detail.into(),
        }
    }
}

fn with_detail(f: &mut fmt::Formatter<'_>, detail: &str) -> fmt::Result {
    if detail.is_empty() {
        Ok(())
    } else {
        write!(f, ": {detail}")
    }
}

impl FieldError {
    /// kube-apiserver's cause type.
    fn reason(&self) -> &'static str {
        match self.kind {
            Kind::Invalid(_) => "FieldValueInvalid",
            Kind::Unsupported(..) => "FieldValueNotSupported",
            Kind::Duplicate(_) => "FieldValueDuplicate",
            Kind::Required => "FieldValueRequired",
            Kind::Forbidden => "FieldValueForbidden",
            Kind::NotFound(_) => "FieldValueNotFound",
        }
    }

    /// The `details.causes` entry: the error without its field.
    fn cause(&self) -> StatusCause {
        let text = self.to_string();
        StatusCause {
            reason: self.reason(),
            message: text
                .strip_prefix(&format!("{}: ", self.path))
                .unwrap_or(&text)
                .to_owned(),
            field: self.path.clone(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.path)?;
        match &self.kind {
            Kind::Invalid(value) => {
                write!(f, "Invalid value: {value:?}")?;
                with_detail(f, &self.detail)
            }
            Kind::Unsupported(value, supported) => {
                let quoted: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
                write!(
                    f,
                    "Unsupported value: {value:?}: supported values: {}",
                    quoted.join(", ")
                )
            }
            Kind::Duplicate(value) => write!(f, "Duplicate value: {value:?}"),
            Kind::Required => {
                f.write_str("Required value")?;
                with_detail(f, &self.detail)
            }
            Kind::Forbidden => {
                f.write_str("Forbidden")?;
                with_detail(f, &self.detail)
            }
            Kind::NotFound(value) => {
                write!(f, "Not found: {value:?}")?;
                with_detail(f, &self.detail)
            }
        }
    }
}

/// The 422 of `errors` about object `name` of `kind` in `group`: `<kind>.<group> "<name>" is invalid: <error>`, or
/// `... is invalid: [<error>, <error>]` for several, as kube-apiserver words it, each error also a `details.causes`
/// entry (what kubectl prints). `None` when there are none.
pub fn invalid(kind: &str, group: &str, name: &str, errors: &[FieldError]) -> Option<ApiError> {
    let listed = match errors {
        [] => return None,
        [one] => one.to_string(),
        several => format!(
            "[{}]",
            several
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    Some(
        ApiError::invalid(format!("{kind}.{group} {name:?} is invalid: {listed}"))
            .with_details(name, group, kind)
            .with_causes(errors.iter().map(FieldError::cause).collect()),
    )
}

/// `Err` with the 422 of `errors`, `Ok` when there are none.
pub fn check(kind: &str, group: &str, name: &str, errors: &[FieldError]) -> Result<(), ApiError> {
    invalid(kind, group, name, errors).map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_read_as_kube_apiserver_words_them() {
        let one = [FieldError::invalid("spec.defaultTTL", "2x", "must be a duration")];
        let error = invalid("CoderTemplate", "aggregation.coder.com", "acme.docker", &one).unwrap();
        assert_eq!((error.code, error.reason), (422, "Invalid"));
        assert_eq!(
            error.message,
            "CoderTemplate.aggregation.coder.com \"acme.docker\" is invalid: spec.defaultTTL: Invalid value: \"2x\": must be a duration"
        );
        let several = [
            FieldError::unsupported("spec.acl.users[0].role", "owner", &["use", "admin"]),
            FieldError::duplicate("spec.acl.users[1].name", "alice"),
            FieldError::required("spec.variables[0].name", ""),
            FieldError::forbidden("spec.failureTTL", "needs a licence"),
            FieldError::not_found("spec.acl.groups[0].name", "ops", "no such group"),
        ];
        let error = invalid("CoderTemplate", "aggregation.coder.com", "a.b", &several).unwrap();
        assert_eq!(
            error.message,
            "CoderTemplate.aggregation.coder.com \"a.b\" is invalid: [spec.acl.users[0].role: Unsupported value: \"owner\": supported values: \"use\", \"admin\", spec.acl.users[1].name: Duplicate value: \"alice\", spec.variables[0].name: Required value, spec.failureTTL: Forbidden: needs a licence, spec.acl.groups[0].name: Not found: \"ops\": no such group]"
        );
        assert!(check("K", "g", "n", &[]).is_ok());
        let causes = &error.to_status()["details"]["causes"];
        assert_eq!(
            causes[0],
            serde_json::json!({
                "reason": "FieldValueNotSupported",
                "message": "Unsupported value: \"owner\": supported values: \"use\", \"admin\"",
                "field": "spec.acl.users[0].role",
            })
        );
        assert_eq!(causes[3]["reason"], "FieldValueForbidden");
        assert_eq!(causes[3]["message"], "Forbidden: needs a licence");
    }
}
