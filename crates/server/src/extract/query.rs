//! A strictly read query string.

use axum::extract::{FromRequestParts, Query};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::problem::{Problem, ProblemCode};

/// A query string deserialized into `T`, refused as `422 invalid_request`
/// (never axum's `400 text/plain`) when it is not one: a `%` not followed by
/// two hex digits, a parameter that does not decode to UTF-8 (`%ff`: no
/// silent U+FFFD), or what `T` refuses (an unknown parameter where `T` denies
/// them, a repeated one, a value of the wrong type).
#[derive(Debug, Clone)]
pub struct StrictQuery<T>(pub T);

fn invalid(detail: impl Into<String>) -> Problem {
    Problem::new(ProblemCode::InvalidRequest, detail)
}

/// Checks that every name and value of a query decodes to UTF-8 through
/// well-formed percent escapes (`+` is a space, as in forms).
pub fn check_query(query: &str) -> Result<(), Problem> {
    for pair in query.split('&') {
        let bytes = pair.as_bytes();
        let mut decoded = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'%' => {
                    let hex = bytes
                        .get(i + 1..i + 3)
                        .and_then(|h| std::str::from_utf8(h).ok())
                        .and_then(|h| u8::from_str_radix(h, 16).ok())
                        .ok_or_else(|| {
                            invalid("the query has a `%` that is not followed by two hex digits")
                        })?;
                    decoded.push(hex);
                    i += 3;
                }
                b'+' => {
                    decoded.push(b' ');
                    i += 1;
                }
                byte => {
                    decoded.push(byte);
                    i += 1;
                }
            }
        }
        if std::str::from_utf8(&decoded).is_err() {
            return Err(invalid(
                "the query has a parameter that is not percent-encoded UTF-8",
            ));
        }
    }
    Ok(())
}

impl<T, S> FromRequestParts<S> for StrictQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Problem> {
        check_query(parts.uri.query().unwrap_or_default())?;
        Query::<T>::try_from_uri(&parts.uri)
            .map(|Query(query)| Self(query))
            .map_err(|rejection| invalid(rejection.body_text()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_formed_utf8_only() {
        for good in [
            "",
            "reference=order-1",
            "reference=%C3%A9t%C3%A9",
            "a=b+c&d=",
            "x",
        ] {
            assert!(check_query(good).is_ok(), "{good}");
        }
        for bad in [
            "reference=%ff",
            "reference=%C0%AE",
            "reference=%ED%A0%80",
            "reference=%zz",
            "reference=%4",
            "reference=%",
            "%ff=1",
            "a=1&b=%80",
        ] {
            let problem = check_query(bad).err();
            assert_eq!(
                problem.map(|p| p.code()),
                Some(ProblemCode::InvalidRequest),
                "{bad}"
            );
        }
    }
}
