//! Request bodies: checked media type, bounded size, and strict JSON (no
//! member name twice in an object), parsed before anything runs.

use std::fmt;

use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, Request};
use axum::http::HeaderMap;
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Number, Value};

use crate::AppState;
use crate::problem::{Problem, ProblemCode};

/// The largest request body accepted: 64 KiB.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// A request body that is `application/json`, at most [`MAX_BODY_BYTES`], and
/// strict JSON ([`parse_strict_json`]): a member name repeated in any object
/// is `400 malformed_json`, never "the last one wins".
#[derive(Debug, Clone)]
pub struct JsonBody(pub Value);

fn too_large(limit: usize) -> Problem {
    Problem::new(
        ProblemCode::PayloadTooLarge,
        format!("the body may be at most {limit} bytes"),
    )
}

fn is_json(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or_default().trim();
    essence.eq_ignore_ascii_case("application/json")
        || essence.to_ascii_lowercase().ends_with("+json")
}

/// `413 payload_too_large` when the declared `Content-Length` is over `limit`:
/// refused before a byte of the body is read.
pub fn check_declared_length(headers: &HeaderMap, limit: usize) -> Result<(), Problem> {
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > limit as u64) {
        return Err(too_large(limit));
    }
    Ok(())
}

/// Reads a body of at most `limit` bytes: `413 payload_too_large` past it
/// (however it is framed: a declared length is checked first, a chunked body
/// is cut at the limit), `400 bad_request` when it breaks off (a truncated
/// body, broken chunked framing).
pub async fn read_body(body: Body, headers: &HeaderMap, limit: usize) -> Result<Bytes, Problem> {
    check_declared_length(headers, limit)?;
    axum::body::to_bytes(body, limit).await.map_err(|error| {
        let over_limit = std::error::Error::source(&error)
            .is_some_and(|source| source.is::<http_body_util::LengthLimitError>());
        if over_limit {
            too_large(limit)
        } else {
            Problem::new(
                ProblemCode::BadRequest,
                "the body could not be read: it broke off before its end",
            )
        }
    })
}

impl FromRequest<AppState> for JsonBody {
    type Rejection = Problem;

    async fn from_request(request: Request, _: &AppState) -> Result<Self, Problem> {
        let content_type = request
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if !is_json(content_type) {
            return Err(Problem::new(
                ProblemCode::UnsupportedMediaType,
                "send the body as application/json",
            ));
        }
        let (parts, body) = request.into_parts();
        let bytes = read_body(body, &parts.headers, MAX_BODY_BYTES).await?;
        parse_strict_json(&bytes).map(Self)
    }
}

/// A JSON body that may be left out: an empty body is `None` (whatever its
/// content type); any other is read as [`JsonBody`] reads one.
#[derive(Debug, Clone)]
pub struct OptionalJsonBody(pub Option<Value>);

impl FromRequest<AppState> for OptionalJsonBody {
    type Rejection = Problem;

    async fn from_request(request: Request, _: &AppState) -> Result<Self, Problem> {
        let (parts, body) = request.into_parts();
        let bytes = read_body(body, &parts.headers, MAX_BODY_BYTES).await?;
        if bytes.is_empty() {
            return Ok(Self(None));
        }
        let content_type = parts
            .headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if !is_json(content_type) {
            return Err(Problem::new(
                ProblemCode::UnsupportedMediaType,
                "send the body as application/json",
            ));
        }
        parse_strict_json(&bytes).map(|value| Self(Some(value)))
    }
}

/// Parses strict JSON (RFC 8259 restricted as I-JSON, RFC 7493, says): an
/// object that names a member twice, at any depth, is `400 malformed_json`
/// whose detail names the member by its path (`amount.value`), instead of
/// serde_json's "the last one wins" (a body with two `amount`s must not pay
/// the second one). Everything else is as [`serde_json::from_slice`]: one
/// pass over the bytes, the same [`Value`], the same nesting limit.
pub fn parse_strict_json(bytes: &[u8]) -> Result<Value, Problem> {
    let malformed = |e: serde_json::Error| Problem::new(ProblemCode::MalformedJson, e.to_string());
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = Strict { at: None }
        .deserialize(&mut deserializer)
        .map_err(malformed)?;
    deserializer.end().map_err(malformed)?;
    Ok(value)
}

/// Where in the document a value is: a linked list of the members and
/// indices above it, on the stack, so that only an error builds a string.
struct Segment<'p> {
    parent: Option<&'p Segment<'p>>,
    name: Name<'p>,
}

enum Name<'p> {
    Member(&'p str),
    Index(usize),
}

/// The path of a member (`amount.value`, `items[2].id`).
struct MemberPath<'p> {
    at: Option<&'p Segment<'p>>,
    member: &'p str,
}

impl fmt::Display for MemberPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn up(segment: Option<&Segment<'_>>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            let Some(segment) = segment else {
                return Ok(());
            };
            up(segment.parent, f)?;
            match segment.name {
                Name::Member(name) if segment.parent.is_none() => f.write_str(name),
                Name::Member(name) => write!(f, ".{name}"),
                Name::Index(index) => write!(f, "[{index}]"),
            }
        }
        up(self.at, f)?;
        if self.at.is_some() {
            f.write_str(".")?;
        }
        f.write_str(self.member)
    }
}

/// A [`Value`] builder that refuses a repeated member name.
struct Strict<'p> {
    at: Option<&'p Segment<'p>>,
}

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        loop {
            let segment = Segment {
                parent: self.at,
                name: Name::Index(items.len()),
            };
            match seq.next_element_seed(Strict { at: Some(&segment) })? {
                Some(item) => items.push(item),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            match map.entry(key) {
                Entry::Occupied(entry) => {
                    return Err(de::Error::custom(format_args!(
                        "duplicate member name \"{}\": a JSON object may name a member \
                         only once (I-JSON, RFC 7493)",
                        MemberPath {
                            at: self.at,
                            member: entry.key(),
                        }
                    )));
                }
                Entry::Vacant(entry) => {
                    let value = {
                        let segment = Segment {
                            parent: self.at,
                            name: Name::Member(entry.key()),
                        };
                        access.next_value_seed(Strict { at: Some(&segment) })?
                    };
                    entry.insert(value);
                }
            }
        }
        Ok(Value::Object(map))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn detail(json: &str) -> String {
        let problem = parse_strict_json(json.as_bytes()).unwrap_err();
        assert_eq!(problem.code(), ProblemCode::MalformedJson, "{json}");
        problem.detail().to_owned()
    }

    #[test]
    fn the_same_value_as_serde_json() {
        for json in [
            r#"{"amount":{"value":"1500.00","currency":"RUB"},"reference":"order-123","payment_method":{"token":"tok_ok"}}"#,
            r#"{}"#,
            r#"[]"#,
            r#"[1,-2,3.5,1e300,18446744073709551615,-9223372036854775808,true,false,null,"\u00e9\n"]"#,
            r#" {"a" : [ {"b": {}} , [[]] ], "c": null, "": 0} "#,
            r#""just a string""#,
            r#"{"a":{"a":{"a":1}},"b":[{"a":1},{"a":2}]}"#,
        ] {
            let strict = parse_strict_json(json.as_bytes()).unwrap();
            let plain: Value = serde_json::from_str(json).unwrap();
            assert_eq!(strict, plain, "{json}");
        }
    }

    #[test]
    fn a_repeated_member_is_refused_and_named_by_its_path() {
        let cases = [
            (
                r#"{"amount":{"value":"1500.00","currency":"RUB"},"amount":{"value":"1.00","currency":"RUB"}}"#,
                "\"amount\"",
            ),
            (r#"{"reference":"a","reference":"b"}"#, "\"reference\""),
            (
                r#"{"amount":{"value":"1500.00","value":"1.00","currency":"RUB"}}"#,
                "\"amount.value\"",
            ),
            (
                r#"{"payment_method":{"token":"tok_ok","token":"tok_declined"}}"#,
                "\"payment_method.token\"",
            ),
            (r#"[{"a":1},{"b":1,"b":2}]"#, "\"[1].b\""),
            (r#"{"x":[[{"y":{"z":1,"z":1}}]]}"#, "\"x[0][0].y.z\""),
            (r#"{"a":1,"a":1}"#, "\"a\""),
            (r#"{"":1,"":2}"#, "\"\""),
            // The same name after escapes is the same name.
            (r#"{"a":1,"\u0061":2}"#, "\"a\""),
        ];
        for (json, named) in cases {
            let detail = detail(json);
            assert!(
                detail.starts_with(&format!("duplicate member name {named}")),
                "{json}: {detail}"
            );
        }
    }

    #[test]
    fn not_json_is_still_malformed() {
        for json in [
            "",
            "{",
            "{\"a\":}",
            "{} {}",
            "[1,]",
            "{\"a\":\"\\ud800\"}",
            "nul",
        ] {
            detail(json);
        }
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(detail(&deep).contains("recursion limit"));
    }
}
