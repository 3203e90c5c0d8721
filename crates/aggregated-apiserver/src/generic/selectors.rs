//! Label and field selectors over JSON objects, with kube-apiserver's syntax and its error wording.
//!
//! Label selectors: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, `k>1`, `k<1`, joined by
//! commas. Field selectors: `metadata.name` and `metadata.namespace` with `=`, `==`, `!=` (the fields
//! kube-apiserver supports for custom resources); any other field is refused.

use std::collections::BTreeSet;

use serde_json::Value;

use super::status::ApiError;

/// A parsed label selector; the empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<LabelRequirement>,
}

impl LabelSelector {
    /// No requirement: the selector selects every object.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct LabelRequirement {
    key: String,
    operator: LabelOperator,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum LabelOperator {
    Equals(String),
    NotEquals(String),
    In(BTreeSet<String>),
    NotIn(BTreeSet<String>),
    Exists,
    DoesNotExist,
    GreaterThan(i64),
    LessThan(i64),
}

impl LabelSelector {
    /// Parses `?labelSelector=`; a syntax error is a 400 BadRequest with kube's wording.
    pub fn parse(selector: &str) -> Result<Self, ApiError> {
        let tokens = lex(selector);
        let mut parser = Parser { tokens, position: 0 };
        let mut requirements = Vec::new();
        while !parser.at_end() {
            requirements.push(parser.requirement().map_err(ApiError::bad_request)?);
            match parser.next() {
                None => break,
                Some(Token::Comma) if parser.at_end() => {
                    return Err(ApiError::bad_request(unexpected(None, "identifier")));
                }
                Some(Token::Comma) => {}
                Some(token) => {
                    return Err(ApiError::bad_request(format!(
                        "found '{}', expected: ',' or 'end of string'",
                        token.text()
                    )));
                }
            }
        }
        Ok(Self { requirements })
    }

    /// Whether `object`'s `metadata.labels` satisfy every requirement.
    pub fn matches(&self, object: &Value) -> bool {
        let labels = &object["metadata"]["labels"];
        self.requirements
            .iter()
            .all(|r| r.matches(labels[&r.key].as_str()))
    }
}

impl LabelRequirement {
    fn matches(&self, value: Option<&str>) -> bool {
        match (&self.operator, value) {
            (LabelOperator::Equals(want), Some(v)) => v == want,
            (LabelOperator::NotEquals(want), v) => v != Some(want.as_str()),
            (LabelOperator::In(set), Some(v)) => set.contains(v),
            (LabelOperator::NotIn(set), v) => v.is_none_or(|v| !set.contains(v)),
            (LabelOperator::Exists, v) => v.is_some(),
            (LabelOperator::DoesNotExist, v) => v.is_none(),
            (LabelOperator::GreaterThan(n), Some(v)) => v.parse::<i64>().is_ok_and(|v| v > *n),
            (LabelOperator::LessThan(n), Some(v)) => v.parse::<i64>().is_ok_and(|v| v < *n),
            _ => false,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Identifier(String),
    Not,
    Equals,
    DoubleEquals,
    NotEquals,
    GreaterThan,
    LessThan,
    OpenParen,
    CloseParen,
    Comma,
}

impl Token {
    fn text(&self) -> &str {
        match self {
            Self::Identifier(s) => s,
            Self::Not => "!",
            Self::Equals => "=",
            Self::DoubleEquals => "==",
            Self::NotEquals => "!=",
            Self::GreaterThan => ">",
            Self::LessThan => "<",
            Self::OpenParen => "(",
            Self::CloseParen => ")",
            Self::Comma => ",",
        }
    }
}

fn is_special(c: char) -> bool {
    matches!(c, '!' | '=' | '>' | '<' | '(' | ')' | ',')
}

/// Splits a label selector into tokens; whitespace separates identifiers and is otherwise ignored.
fn lex(input: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut chars = input.chars().peekable();
    while let Some(c) = chars.next() {
        let token = match c {
            c if c.is_whitespace() => continue,
            '!' if chars.next_if_eq(&'=').is_some() => Token::NotEquals,
            '!' => Token::Not,
            '=' if chars.next_if_eq(&'=').is_some() => Token::DoubleEquals,
            '=' => Token::Equals,
            '>' => Token::GreaterThan,
            '<' => Token::LessThan,
            '(' => Token::OpenParen,
            ')' => Token::CloseParen,
            ',' => Token::Comma,
            c => {
                let mut word = String::from(c);
                while let Some(next) = chars.next_if(|n| !n.is_whitespace() && !is_special(*n)) {
                    word.push(next);
                }
                Token::Identifier(word)
            }
        };
        tokens.push(token);
    }
    tokens
}

struct Parser {
    tokens: Vec<Token>,
    position: usize,
}

impl Parser {
    fn at_end(&self) -> bool {
        self.position >= self.tokens.len()
    }

    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.position)
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.position).cloned();
        self.position += 1;
        token
    }

    fn requirement(&mut self) -> Result<LabelRequirement, String> {
        if self.peek() == Some(&Token::Not) {
            self.position += 1;
            let key = self.key()?;
            return Ok(LabelRequirement {
                key,
                operator: LabelOperator::DoesNotExist,
            });
        }
        let key = self.key()?;
        if matches!(self.peek(), None | Some(Token::Comma)) {
            return Ok(LabelRequirement {
                key,
                operator: LabelOperator::Exists,
            });
        }
        let operator = self.operator(&key)?;
        Ok(LabelRequirement { key, operator })
    }

    fn key(&mut self) -> Result<String, String> {
        match self.next() {
            Some(Token::Identifier(key)) => {
                validate_label_key(&key)?;
                Ok(key)
            }
            other => Err(unexpected(other.as_ref(), "identifier")),
        }
    }

    fn operator(&mut self, key: &str) -> Result<LabelOperator, String> {
        let operator = self.next();
        Ok(match operator {
            Some(Token::Equals | Token::DoubleEquals) => LabelOperator::Equals(self.single_value()?),
            Some(Token::NotEquals) => LabelOperator::NotEquals(self.single_value()?),
            Some(Token::GreaterThan) => LabelOperator::GreaterThan(self.integer_value(key)?),
            Some(Token::LessThan) => LabelOperator::LessThan(self.integer_value(key)?),
            Some(Token::Identifier(word)) if word == "in" => LabelOperator::In(self.value_set()?),
            Some(Token::Identifier(word)) if word == "notin" => LabelOperator::NotIn(self.value_set()?),
            other => {
                return Err(unexpected(other.as_ref(), "[!=, ==, =, >, <, in, notin]"));
            }
        })
    }

    /// The value after `=`, `==` or `!=`; absent means the empty value, as in kube (`k=` selects `k: ""`).
    fn single_value(&mut self) -> Result<String, String> {
        match self.peek() {
            None | Some(Token::Comma) => Ok(String::new()),
            Some(Token::Identifier(_)) => {
                let Some(Token::Identifier(value)) = self.next() else {
                    return Err(unexpected(None, "identifier"));
                };
                validate_label_value(&value)?;
                Ok(value)
            }
            other => Err(unexpected(other, "identifier")),
        }
    }

    fn integer_value(&mut self, key: &str) -> Result<i64, String> {
        match self.next() {
            Some(Token::Identifier(value)) => value.parse().map_err(|_| {
                format!(
                    "unable to parse requirement: values[0][{key}]: Invalid value: {value:?}: for 'Gt', 'Lt' operators, the value must be an integer"
                )
            }),
            other => Err(unexpected(other.as_ref(), "identifier")),
        }
    }

    /// `(a, b, ...)`: the values of `in` and `notin`.
    fn value_set(&mut self) -> Result<BTreeSet<String>, String> {
        let open = self.next();
        if open != Some(Token::OpenParen) {
            return Err(unexpected(open.as_ref(), "'('"));
        }
        let mut values = BTreeSet::new();
        loop {
            match self.next() {
                Some(Token::Identifier(value)) => {
                    validate_label_value(&value)?;
                    values.insert(value);
                }
                Some(Token::Comma) => {
                    values.insert(String::new());
                    continue;
                }
                Some(Token::CloseParen) => return Ok(values),
                other => return Err(unexpected(other.as_ref(), "',', ')' or identifier")),
            }
            match self.next() {
                Some(Token::Comma) => {}
                Some(Token::CloseParen) => return Ok(values),
                other => return Err(unexpected(other.as_ref(), "',' or ')'")),
            }
        }
    }
}

fn unexpected(found: Option<&Token>, expected: &str) -> String {
    let found = found.map_or("EOS", Token::text);
    format!("unable to parse requirement: found '{found}', expected: {expected}")
}

/// A label key: an optional DNS-subdomain prefix and `/`, then a name of at most 63 characters.
fn validate_label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|label| {
                !label.is_empty()
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            })
    });
    if prefix_ok && !name.is_empty() && is_label_value(name) {
        return Ok(());
    }
    Err(format!(
        "unable to parse requirement: invalid label key {key:?}: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character, with an optional DNS subdomain prefix and '/'"
    ))
}

fn validate_label_value(value: &str) -> Result<(), String> {
    if is_label_value(value) {
        return Ok(());
    }
    Err(format!(
        "unable to parse requirement: invalid label value: {value:?}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
    ))
}

/// At most 63 characters of `[A-Za-z0-9_.-]`, starting and ending alphanumeric (or empty).
fn is_label_value(value: &str) -> bool {
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    value.is_empty()
        || (value.len() <= 63
            && value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && alnum(value.chars().next())
            && alnum(value.chars().last()))
}

/// A parsed field selector over `metadata.name` and `metadata.namespace`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// No requirement: the selector selects every object.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct FieldRequirement {
    field: KnownField,
    value: String,
    equal: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum KnownField {
    Name,
    Namespace,
}

impl FieldSelector {
    /// Parses `?fieldSelector=`: syntax errors and unknown fields are 400 BadRequest.
    pub fn parse(selector: &str) -> Result<Self, ApiError> {
        let mut requirements = Vec::new();
        for term in split_unescaped(selector, ',') {
            if term.is_empty() {
                continue;
            }
            requirements.push(parse_field_term(selector, &term)?);
        }
        Ok(Self { requirements })
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.requirements.iter().all(|r| {
            let key = match r.field {
                KnownField::Name => "name",
                KnownField::Namespace => "namespace",
            };
            let actual = object["metadata"][key].as_str().unwrap_or_default();
            (actual == r.value) == r.equal
        })
    }

    /// The name an equality requirement on `metadata.name` pins, if any.
    pub fn name(&self) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| r.field == KnownField::Name && r.equal)
            .map(|r| r.value.as_str())
    }
}

fn parse_field_term(selector: &str, term: &str) -> Result<FieldRequirement, ApiError> {
    let (field, value, equal) = ["!=", "==", "="]
        .iter()
        .find_map(|op| find_unescaped(term, op).map(|at| (&term[..at], &term[at + op.len()..], *op == "!=")))
        .map(|(f, v, not)| (f, v, !not))
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "invalid selector: '{selector}'; can't understand '{term}'"
            ))
        })?;
    let field = match unescape(field).as_str() {
        "metadata.name" => KnownField::Name,
        "metadata.namespace" => KnownField::Namespace,
        other => {
            return Err(ApiError::bad_request(format!(
                "{other:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
            )));
        }
    };
    Ok(FieldRequirement {
        field,
        value: unescape(value),
        equal,
    })
}

/// Splits at `separator` not preceded by a backslash escape.
fn split_unescaped(input: &str, separator: char) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut escaped = false;
    for c in input.chars() {
        if !escaped && c == separator {
            parts.push(String::new());
            continue;
        }
        escaped = !escaped && c == '\\';
        if let Some(last) = parts.last_mut() {
            last.push(c);
        }
    }
    parts
}

/// Byte offset of the first `needle` not inside a backslash escape.
fn find_unescaped(input: &str, needle: &str) -> Option<usize> {
    let mut escaped = false;
    for (at, c) in input.char_indices() {
        if !escaped && input[at..].starts_with(needle) {
            return Some(at);
        }
        escaped = !escaped && c == '\\';
    }
    None
}

fn unescape(input: &str) -> String {
    let mut out = String::with_capacity(input.len());
    let mut chars = input.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            out.extend(chars.next());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(labels: Value) -> Value {
        json!({"metadata": {"name": "a.b", "namespace": "team-a", "labels": labels}})
    }

    fn selects(selector: &str, labels: Value) -> bool {
        LabelSelector::parse(selector)
            .unwrap_or_else(|e| panic!("{selector}: {e}"))
            .matches(&object(labels))
    }

    #[test]
    fn equality_operators() {
        assert!(selects("app=web", json!({"app": "web"})));
        assert!(selects("app==web", json!({"app": "web"})));
        assert!(!selects("app=web", json!({"app": "db"})));
        assert!(!selects("app=web", json!({})));
        assert!(selects("app!=web", json!({"app": "db"})));
        assert!(selects("app!=web", json!({})));
        assert!(!selects("app!=web", json!({"app": "web"})));
    }

    #[test]
    fn set_operators() {
        assert!(selects("env in (prod, staging)", json!({"env": "prod"})));
        assert!(!selects("env in (prod,staging)", json!({"env": "dev"})));
        assert!(!selects("env in (prod)", json!({})));
        assert!(selects("env notin (prod)", json!({"env": "dev"})));
        assert!(selects("env notin (prod)", json!({})));
        assert!(!selects("env notin (prod)", json!({"env": "prod"})));
    }

    #[test]
    fn existence_and_numeric_operators() {
        assert!(selects("app", json!({"app": ""})));
        assert!(!selects("app", json!({})));
        assert!(selects("!app", json!({})));
        assert!(!selects("!app", json!({"app": "x"})));
        assert!(selects("n>3", json!({"n": "4"})));
        assert!(!selects("n>3", json!({"n": "3"})));
        assert!(selects("n<3", json!({"n": "2"})));
    }

    #[test]
    fn requirements_are_anded() {
        let labels = json!({"app": "web", "example.com/tier": "front"});
        assert!(selects("app=web,example.com/tier=front", labels.clone()));
        assert!(!selects("app=web,example.com/tier=back", labels));
        assert!(selects("", json!({})));
    }

    #[test]
    fn syntax_errors_are_bad_requests_with_kube_wording() {
        for (selector, needle) in [
            ("app in prod", "found 'prod', expected: '('"),
            ("app in (prod", "found 'EOS', expected: ',' or ')'"),
            ("=web", "found '=', expected: identifier"),
            ("app=web,", "found 'EOS', expected: identifier"),
            ("app=web=x", "found '=', expected: ',' or 'end of string'"),
            ("app>x", "the value must be an integer"),
            (
                "bad key!=x",
                "found 'key', expected: [!=, ==, =, >, <, in, notin]",
            ),
            ("-app=x", "invalid label key \"-app\""),
            ("app=a*b", "invalid label value: \"a*b\""),
        ] {
            let err = LabelSelector::parse(selector).expect_err(selector);
            assert_eq!((err.code, err.reason), (400, "BadRequest"), "{selector}");
            assert!(err.message.contains(needle), "{selector}: {}", err.message);
        }
    }

    #[test]
    fn field_selectors_on_name_and_namespace() {
        let obj = object(json!({}));
        let by_name = FieldSelector::parse("metadata.name=a.b").expect("parse");
        assert!(by_name.matches(&obj));
        assert_eq!(by_name.name(), Some("a.b"));
        assert!(
            !FieldSelector::parse("metadata.name==x")
                .expect("parse")
                .matches(&obj)
        );
        assert!(
            FieldSelector::parse("metadata.namespace!=other")
                .expect("parse")
                .matches(&obj)
        );
        let both = FieldSelector::parse("metadata.name=a.b,metadata.namespace=team-b").expect("parse");
        assert!(!both.matches(&obj));
        assert_eq!(
            FieldSelector::parse("metadata.name!=x").expect("parse").name(),
            None
        );
    }

    #[test]
    fn escaped_field_values() {
        let obj = json!({"metadata": {"name": "a,b"}});
        assert!(
            FieldSelector::parse("metadata.name=a\\,b")
                .expect("parse")
                .matches(&obj)
        );
    }

    #[test]
    fn unknown_fields_and_syntax_are_refused() {
        let err = FieldSelector::parse("spec.x=1").expect_err("unknown field");
        assert_eq!(err.code, 400);
        assert_eq!(
            err.message,
            "\"spec.x\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        );
        let err = FieldSelector::parse("metadata.name").expect_err("no operator");
        assert_eq!(
            err.message,
            "invalid selector: 'metadata.name'; can't understand 'metadata.name'"
        );
    }
}
