//! What the list routes share: their query's paging parameters, read into
//! a store's page request, the 400 problems of bad parameters and cursors,
//! and the answer's envelope.

use axum::Json;
use axum::response::{IntoResponse, Response};
use chargeonce_core::{Cursor, MAX_PAGE_LIMIT, PageLimit, PageRequest, StoreError};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::extract::StrictQuery;
use crate::problem::{Problem, ProblemCode};
use crate::respond::store_problem;

/// `400 invalid_parameter`.
pub fn invalid_parameter(detail: impl Into<String>) -> Problem {
    Problem::new(ProblemCode::InvalidParameter, detail)
}

/// `400 invalid_cursor`.
pub fn invalid_cursor(detail: impl Into<String>) -> Problem {
    Problem::new(ProblemCode::InvalidCursor, detail)
}

/// A list's query, or `400 invalid_parameter` when [`StrictQuery`] refused
/// it (bad percent-encoding, an unknown or repeated parameter, a value of
/// the wrong type).
pub fn list_query<T>(query: Result<StrictQuery<T>, Problem>) -> Result<T, Problem> {
    query
        .map(|StrictQuery(query)| query)
        .map_err(|problem| invalid_parameter(problem.detail().to_owned()))
}

/// The page that `limit`, `starting_after` and `ending_before` ask for; a
/// cursor that `parse` refuses cannot be one of the listed objects.
pub fn page_request<Id>(
    limit: Option<u32>,
    starting_after: Option<String>,
    ending_before: Option<String>,
    parse: impl Fn(&str) -> Option<Id>,
) -> Result<PageRequest<Id>, Problem> {
    let limit = match limit {
        None => PageLimit::default(),
        Some(n) => PageLimit::new(n).ok_or_else(|| {
            invalid_parameter(format!("limit must be 1 to {MAX_PAGE_LIMIT}"))
                .with("parameter", "limit".into())
        })?,
    };
    let cursor_of = |name: &str, id: &str| {
        parse(id).ok_or_else(|| {
            invalid_cursor(format!("{name} `{id}` is not one of the listed objects"))
                .with("parameter", name.into())
        })
    };
    let cursor = match (starting_after, ending_before) {
        (Some(_), Some(_)) => {
            return Err(invalid_parameter(
                "give starting_after or ending_before, not both",
            ));
        }
        (Some(id), None) => Cursor::After(cursor_of("starting_after", &id)?),
        (None, Some(id)) => Cursor::Before(cursor_of("ending_before", &id)?),
        (None, None) => Cursor::Newest,
    };
    Ok(PageRequest { limit, cursor })
}

/// An RFC 3339 time parameter.
pub fn time_parameter(name: &str, value: Option<&str>) -> Result<Option<OffsetDateTime>, Problem> {
    value
        .map(|v| {
            OffsetDateTime::parse(v, &Rfc3339).map_err(|_| {
                invalid_parameter(format!(
                    "{name} must be an RFC 3339 time such as 2026-01-31T12:00:00Z \
                     (an offset's `+` encoded as %2B)"
                ))
                .with("parameter", name.into())
            })
        })
        .transpose()
}

/// The problem of a store's list failure: `400 invalid_cursor` for a cursor
/// that is not one of the shop's listed objects.
pub fn list_problem(error: StoreError) -> Problem {
    match error {
        StoreError::UnknownCursor(id) => invalid_cursor(format!(
            "`{id}` is not one of the listed objects of this shop"
        )),
        other => store_problem(other),
    }
}

/// The answer: one page in the list envelope ([`chargeonce_wire::List`]),
/// its members in declaration order like every answer (a `GET` of a
/// resource and the `POST` that made it answer the same bytes).
pub fn list_response<T: Serialize>(data: Vec<T>, has_more: bool) -> Response {
    Json(chargeonce_wire::List::page(data, has_more)).into_response()
}

/// The query of the lists that take paging and nothing else (the refunds',
/// a payment's captures): the spec's parameters, from these fields.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// How many objects, 1 to 100 (default 10).
    #[param(minimum = 1, maximum = 100, example = 10)]
    pub limit: Option<u32>,
    /// An object id from a previous page: the page after it (older). Not
    /// with `ending_before`.
    #[param(min_length = 1)]
    pub starting_after: Option<String>,
    /// An object id from a previous page: the page before it (newer), still
    /// newest first. Not with `starting_after`.
    #[param(min_length = 1)]
    pub ending_before: Option<String>,
}
