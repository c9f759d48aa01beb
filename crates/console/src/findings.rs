//! `GET /console/findings?state=open|resolved|all`: the reconciler's
//! findings, and their resolution by an operator with a note
//! (`POST /console/findings/{id}/resolve`). Resolving a resolved finding
//! changes nothing (a double click). The same over JSON for scripts:
//! `GET /console/api/findings` and `POST /console/api/findings/{id}/resolve`
//! (`{"note": "..."}`), on the console's session (its cookie is
//! `SameSite=Strict`, and a JSON body cannot be sent cross-site without a
//! CORS preflight, which the console never answers).

use askama::Template;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Form, Json};
use chargeonce_core::findings::{Finding, FindingId, FindingQuery, Resolution};
use serde::Deserialize;
use serde_json::{Value, json};
use time::format_description::well_known::Rfc3339;

use super::{Chrome, ConsoleError, Operator, html, money, when};
use crate::Console;
use chargeonce_server::extract::PathId;
use chargeonce_server::problem::{Problem, ProblemCode};
use chargeonce_server::respond::store_problem;

/// Findings listed at most.
const LIMIT: u32 = 200;

/// Who resolves findings from the console.
const OPERATOR: &str = "operator";

/// Which findings.
#[derive(Debug, Default, Deserialize)]
pub struct FindingsQuery {
    state: Option<String>,
}

fn query_of(state: Option<&str>) -> (FindingQuery, &'static str) {
    let (resolved, name) = match state {
        Some("resolved") => (Some(true), "resolved"),
        Some("all") => (None, "all"),
        _ => (Some(false), "open"),
    };
    (
        FindingQuery {
            resolved,
            limit: LIMIT,
            ..FindingQuery::default()
        },
        name,
    )
}

/// A finding's row.
pub struct FindingRow {
    /// Its id.
    pub id: i64,
    /// Its kind.
    pub kind: &'static str,
    /// Its shop.
    pub shop: String,
    /// The order.
    pub reference: String,
    /// Our payment.
    pub payment: Option<String>,
    /// The charges.
    pub charges: String,
    /// The money involved.
    pub amount: Option<String>,
    /// In words.
    pub detail: String,
    /// First seen.
    pub first_seen: String,
    /// Last seen.
    pub last_seen: String,
    /// How many passes saw it.
    pub seen: u64,
    /// How and when it was resolved.
    pub resolution: Option<String>,
}

fn resolution_words(resolution: &Resolution) -> String {
    match resolution {
        Resolution::Refunded { charge_ids } => {
            format!("refunded by the reconciler: {}", charge_ids.join(", "))
        }
        Resolution::Manual { by, note } => format!("resolved by {by}: {note}"),
    }
}

impl FindingRow {
    fn of(finding: &Finding) -> Self {
        Self {
            id: finding.id.0,
            kind: finding.kind.as_str(),
            shop: crate::shop_shown(&finding.shop_id),
            reference: finding.reference.as_str().to_owned(),
            payment: finding.payment_id.as_ref().map(|p| p.as_str().to_owned()),
            charges: finding.charge_ids.join(", "),
            amount: finding.amount.map(money),
            detail: finding.detail.clone(),
            first_seen: when(finding.first_seen),
            last_seen: when(finding.last_seen),
            seen: finding.seen,
            resolution: finding
                .resolved
                .as_ref()
                .map(|(r, at)| format!("{} ({})", resolution_words(r), when(*at))),
        }
    }
}

/// The page.
#[derive(Template)]
#[template(path = "console/findings.html")]
struct FindingsPage {
    page: Chrome,
    state: &'static str,
    rows: Vec<FindingRow>,
}

/// `GET /console/findings`.
pub async fn page(
    State(state): State<Console>,
    operator: Operator,
    Query(query): Query<FindingsQuery>,
) -> Result<Response, ConsoleError> {
    let (query, name) = query_of(query.state.as_deref());
    let findings = state.store().findings(&query).await?;
    html(&FindingsPage {
        page: Chrome::new(&operator, "Findings", "findings"),
        state: name,
        rows: findings.iter().map(FindingRow::of).collect(),
    })
}

/// The resolve form.
#[derive(Debug, Deserialize)]
pub struct ResolveForm {
    csrf: Option<String>,
    note: Option<String>,
}

/// Resolves a finding once: `Ok(None)` when there is none, `(finding,
/// true)` when this call resolved it, `(finding, false)` when it was
/// resolved already.
async fn resolve_once(
    state: &Console,
    id: i64,
    note: &str,
) -> Result<Option<(Finding, bool)>, chargeonce_core::StoreError> {
    let id = FindingId(id);
    let Some(before) = state.store().finding(id).await? else {
        return Ok(None);
    };
    if before.resolved.is_some() {
        return Ok(Some((before, false)));
    }
    let resolution = Resolution::Manual {
        by: OPERATOR.to_owned(),
        note: note.to_owned(),
    };
    let store = state.store().clone();
    let after = state
        .detached(async move { store.resolve_finding(id, &resolution).await })
        .await?;
    Ok(after.map(|f| (f, true)))
}

fn finding_id(id: &str) -> Option<i64> {
    id.parse::<i64>().ok().filter(|id| *id > 0)
}

/// `POST /console/findings/{id}/resolve`.
pub async fn resolve(
    State(state): State<Console>,
    operator: Operator,
    PathId(id): PathId,
    Form(form): Form<ResolveForm>,
) -> Result<Response, ConsoleError> {
    operator.check_csrf(form.csrf.as_deref())?;
    let not_found = || ConsoleError::NotFound("no such finding".to_owned());
    let id = finding_id(&id).ok_or_else(not_found)?;
    let note = form.note.unwrap_or_default().trim().to_owned();
    let message = match resolve_once(&state, id, &note)
        .await?
        .ok_or_else(not_found)?
    {
        (_, true) => {
            tracing::info!(finding = id, "console resolved a finding");
            format!("finding #{id} resolved")
        }
        (_, false) => format!("finding #{id} was already resolved: nothing changed"),
    };
    state.console.sessions.flash(&operator.session, message);
    Ok(Redirect::to("/console/findings").into_response())
}

/// A finding as the console's JSON shows it.
pub fn finding_json(finding: &Finding) -> Value {
    let time = |t: time::OffsetDateTime| t.format(&Rfc3339).unwrap_or_default();
    json!({
        "id": finding.id.0,
        "kind": finding.kind.as_str(),
        "shop_id": finding.shop_id.as_str(),
        "reference": finding.reference.as_str(),
        "payment_id": finding.payment_id.as_ref().map(|p| p.as_str()),
        "charge_ids": finding.charge_ids,
        "amount": finding.amount.map(chargeonce_server::render::amount),
        "detail": finding.detail,
        "first_seen": time(finding.first_seen),
        "last_seen": time(finding.last_seen),
        "seen": finding.seen,
        "resolved": finding.resolved.as_ref().map(|(r, at)| json!({
            "how": r.as_str(),
            "by": match r { Resolution::Manual { by, .. } => Some(by.as_str()), Resolution::Refunded { .. } => None },
            "note": match r { Resolution::Manual { note, .. } => Some(note.as_str()), Resolution::Refunded { .. } => None },
            "charge_ids": match r { Resolution::Refunded { charge_ids } => Some(charge_ids), Resolution::Manual { .. } => None },
            "at": time(*at),
        })),
    })
}

/// `GET /console/api/findings?state=`.
pub async fn json(
    State(state): State<Console>,
    _operator: Operator,
    Query(query): Query<FindingsQuery>,
) -> Result<Response, Problem> {
    let (query, _) = query_of(query.state.as_deref());
    let findings = state
        .store()
        .findings(&query)
        .await
        .map_err(store_problem)?;
    let data: Vec<Value> = findings.iter().map(finding_json).collect();
    Ok(Json(json!({"data": data})).into_response())
}

/// The JSON resolve body.
#[derive(Debug, Deserialize)]
pub struct ResolveBody {
    #[serde(default)]
    note: String,
}

/// `POST /console/api/findings/{id}/resolve`: 200 with the finding
/// (`"changed": false` when it was resolved already).
pub async fn resolve_json(
    State(state): State<Console>,
    _operator: Operator,
    PathId(id): PathId,
    body: Result<Json<ResolveBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, Problem> {
    let not_found = || Problem::new(ProblemCode::NotFound, "no such finding");
    let Json(body) = body.map_err(|e| Problem::new(ProblemCode::InvalidRequest, e.body_text()))?;
    let id = finding_id(&id).ok_or_else(not_found)?;
    let (finding, changed) = resolve_once(&state, id, body.note.trim())
        .await
        .map_err(store_problem)?
        .ok_or_else(not_found)?;
    let mut value = finding_json(&finding);
    value["changed"] = json!(changed);
    Ok((StatusCode::OK, Json(value)).into_response())
}
