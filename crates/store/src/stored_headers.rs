//! The stored form of a replayed answer's headers
//! (`idempotency_keys.response_headers`, a TEXT column, in both stores).
//!
//! Why: the headers are the same few every time, and as the JSON array of
//! `[name, value]` pairs every store wrote before (issue 38) a payment's
//! are 103 bytes: `[["content-type","application/json"],["location",
//! "/v1/payments/pay_…"]]`. On PostgreSQL every byte of the key row is WAL
//! (the row is written whole when its answer is stored). The compact form
//! of the same headers is 48 bytes.
//!
//! The stored form says how to read it back by its first character:
//!
//! - `[`: the JSON array of pairs (what every store wrote before, and what
//!   this writes for headers the compact form cannot say);
//! - anything else (the empty text too): the compact form, one header per
//!   line (`\n` between them), each line a tag and what follows it:
//!   - `j`: `content-type: application/json`;
//!   - `q`: `content-type: application/problem+json`;
//!   - `L` and the rest of the line: `location: /v1/` and the rest of the
//!     line (a link to one of the API's resources).
//!
//! A header the compact form cannot say (another name or value, a value
//! with a line break in it) makes the whole answer's headers stored as
//! JSON, so every set of headers is stored exactly and read back in its
//! order.

use chargeonce_core::StoreError;

const JSON: &str = "application/json";
const PROBLEM_JSON: &str = "application/problem+json";
const API_PREFIX: &str = "/v1/";

/// The stored form of `headers`: the compact form when it can say them,
/// JSON otherwise.
pub(crate) fn encode(headers: &[(String, String)]) -> Result<String, StoreError> {
    match compact(headers) {
        Some(stored) => Ok(stored),
        None => serde_json::to_string(headers).map_err(StoreError::other),
    }
}

/// Reads a stored form back (either form; `None`, no headers stored, is
/// no headers).
pub(crate) fn decode(stored: Option<&str>) -> Result<Vec<(String, String)>, StoreError> {
    match stored {
        None => Ok(Vec::new()),
        Some(json) if json.starts_with('[') => {
            serde_json::from_str(json).map_err(StoreError::corrupt_by)
        }
        Some("") => Ok(Vec::new()),
        Some(lines) => lines.split('\n').map(header).collect(),
    }
}

/// The compact form, if it can say every header.
fn compact(headers: &[(String, String)]) -> Option<String> {
    let mut stored = String::new();
    for (i, (name, value)) in headers.iter().enumerate() {
        if i > 0 {
            stored.push('\n');
        }
        match (name.as_str(), value.as_str()) {
            ("content-type", JSON) => stored.push('j'),
            ("content-type", PROBLEM_JSON) => stored.push('q'),
            ("location", link) => {
                let rest = link.strip_prefix(API_PREFIX)?;
                if rest.contains('\n') {
                    return None;
                }
                stored.push('L');
                stored.push_str(rest);
            }
            _ => return None,
        }
    }
    Some(stored)
}

/// One line of the compact form.
fn header(line: &str) -> Result<(String, String), StoreError> {
    let mut chars = line.chars();
    let tag = chars.next();
    let rest = chars.as_str();
    match (tag, rest) {
        (Some('j'), "") => Ok(("content-type".into(), JSON.into())),
        (Some('q'), "") => Ok(("content-type".into(), PROBLEM_JSON.into())),
        (Some('L'), rest) => Ok(("location".into(), format!("{API_PREFIX}{rest}"))),
        _ => Err(StoreError::corrupt(format!(
            "stored response header line `{line}`"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_payments_headers_are_stored_compact_and_read_back_in_order() {
        let headers = pairs(&[
            ("content-type", "application/json"),
            (
                "location",
                "/v1/payments/pay_01a24ff762997694a45cc2f59191ef27",
            ),
        ]);
        let stored = encode(&headers).unwrap();
        assert_eq!(stored, "j\nLpayments/pay_01a24ff762997694a45cc2f59191ef27");
        assert_eq!(stored.len(), 48);
        assert_eq!(decode(Some(&stored)).unwrap(), headers);
        let problem = pairs(&[
            ("location", "/v1/refunds/re_1"),
            ("content-type", "application/problem+json"),
        ]);
        let stored = encode(&problem).unwrap();
        assert_eq!(stored, "Lrefunds/re_1\nq");
        assert_eq!(decode(Some(&stored)).unwrap(), problem);
    }

    #[test]
    fn headers_the_compact_form_cannot_say_are_stored_as_json() {
        for headers in [
            pairs(&[("content-type", "text/plain")]),
            pairs(&[("content-type", "application/json"), ("retry-after", "1")]),
            pairs(&[("location", "https://elsewhere.example/v1/payments/x")]),
            pairs(&[("location", "/v1/payments/a\nb")]),
        ] {
            let stored = encode(&headers).unwrap();
            assert!(stored.starts_with('['), "{stored}");
            assert_eq!(decode(Some(&stored)).unwrap(), headers);
        }
    }

    #[test]
    fn what_stores_wrote_before_and_no_headers_read_back() {
        let old = r#"[["content-type","application/json"],["location","/v1/payments/pay_1"]]"#;
        assert_eq!(
            decode(Some(old)).unwrap(),
            pairs(&[
                ("content-type", "application/json"),
                ("location", "/v1/payments/pay_1"),
            ])
        );
        assert_eq!(decode(Some("[]")).unwrap(), Vec::new());
        assert_eq!(encode(&[]).unwrap(), "");
        assert_eq!(decode(Some("")).unwrap(), Vec::new());
        assert_eq!(decode(None).unwrap(), Vec::new());
    }

    #[test]
    fn a_line_of_no_known_tag_is_corrupt() {
        for stored in ["x", "jx", "j\n\nq", "q\n"] {
            assert!(decode(Some(stored)).is_err(), "{stored:?}");
        }
    }
}
