//! `GET /console/payments`: every shop's payments (or one shop's) of one
//! mode (live by default, test data marked), newest first, filtered by
//! status, order reference and creation time, a page at a time, as [`Operator::all_payments`](chargeonce_core::store::Operator::all_payments)
//! pages them.

use askama::Template;
use axum::extract::{Query, State};
use axum::response::Response;
use chargeonce_core::api_key::Mode;
use chargeonce_core::{
    Cursor, PageLimit, PageRequest, Payment, PaymentFilter, PaymentId, Reference, ShopId,
    ShownStatus,
};
use serde::Deserialize;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::{Chrome, ConsoleError, Operator, encode, given, html, money, when};
use crate::Console;

/// Payments per page.
const PER_PAGE: u32 = 25;

/// The filters, as the form sends them (empty fields are no filter).
#[derive(Debug, Default, Deserialize)]
pub struct PaymentsQuery {
    shop: Option<String>,
    mode: Option<String>,
    status: Option<String>,
    reference: Option<String>,
    created_gte: Option<String>,
    created_lt: Option<String>,
    starting_after: Option<String>,
    ending_before: Option<String>,
}

/// One row.
pub struct Row {
    /// The payment's id.
    pub id: String,
    /// Its shop (its own id, whatever the mode).
    pub shop: String,
    /// Whether it is test mode's (marked as such).
    pub test: bool,
    /// Its status.
    pub status: &'static str,
    /// Its amount.
    pub amount: String,
    /// Refunded so far.
    pub refunded: String,
    /// The order reference.
    pub reference: String,
    /// When it was created.
    pub created: String,
}

impl Row {
    fn of(payment: &Payment) -> Self {
        let refunded =
            chargeonce_server::render::amount_minor(payment.refunded_minor, payment.amount);
        Self {
            id: payment.id.as_str().to_owned(),
            shop: payment.shop_id.shop().as_str().to_owned(),
            test: !payment.shop_id.is_live(),
            status: ShownStatus::of(payment).as_str(),
            amount: money(payment.amount),
            refunded: format!("{} {}", refunded.value, refunded.currency),
            reference: payment.reference.as_str().to_owned(),
            created: when(payment.created_at),
        }
    }
}

/// The page.
#[derive(Template)]
#[template(path = "console/payments.html")]
struct PaymentsPage {
    page: Chrome,
    shop: String,
    /// `live` or `test`: the mode shown (one at a time).
    mode: &'static str,
    status: String,
    reference: String,
    created_gte: String,
    created_lt: String,
    errors: Vec<String>,
    rows: Vec<Row>,
    next: Option<String>,
    prev: Option<String>,
}

fn time_filter(
    name: &str,
    value: Option<&str>,
    errors: &mut Vec<String>,
) -> Option<OffsetDateTime> {
    let value = value?;
    match OffsetDateTime::parse(value, &Rfc3339) {
        Ok(at) => Some(at),
        Err(_) => {
            errors.push(format!(
                "{name}: not an RFC 3339 time (2026-12-01T00:00:00Z)"
            ));
            None
        }
    }
}

/// `GET /console/payments`.
pub async fn page(
    State(state): State<Console>,
    operator: Operator,
    Query(query): Query<PaymentsQuery>,
) -> Result<Response, ConsoleError> {
    let mut errors = Vec::new();
    let shop = given(&query.shop).and_then(|s| match ShopId::new(s) {
        Ok(shop) => Some(shop),
        Err(e) => {
            errors.push(format!("shop: {e}"));
            None
        }
    });
    let mode = match given(&query.mode).map(Mode::parse) {
        None => Mode::Live,
        Some(Some(mode)) => mode,
        Some(None) => {
            errors.push("mode: live or test".to_owned());
            Mode::Live
        }
    };
    let status = given(&query.status).and_then(|s| match ShownStatus::parse(s) {
        Some(status) => Some(status),
        None => {
            let names: Vec<_> = ShownStatus::ALL.iter().map(ShownStatus::as_str).collect();
            errors.push(format!("status: one of {}", names.join(", ")));
            None
        }
    });
    let reference = given(&query.reference).and_then(|r| match Reference::new(r) {
        Ok(reference) => Some(reference),
        Err(e) => {
            errors.push(format!("reference: {e}"));
            None
        }
    });
    let filter = PaymentFilter {
        status,
        reference,
        created_gte: time_filter("created_gte", given(&query.created_gte), &mut errors),
        created_lt: time_filter("created_lt", given(&query.created_lt), &mut errors),
    };
    let cursor = match (
        given(&query.starting_after).and_then(|id| PaymentId::parse(id).ok()),
        given(&query.ending_before).and_then(|id| PaymentId::parse(id).ok()),
    ) {
        (Some(after), _) => Cursor::After(after),
        (None, Some(before)) => Cursor::Before(before),
        (None, None) => Cursor::Newest,
    };
    let backwards = matches!(cursor, Cursor::Before(_));
    let paged = matches!(cursor, Cursor::After(_) | Cursor::Before(_));
    let request = PageRequest {
        limit: PageLimit::new(PER_PAGE).unwrap_or_default(),
        cursor,
    };
    let listed = state
        .store()
        .all_payments(shop.as_ref(), mode, &filter, &request)
        .await?;
    let rows: Vec<Row> = listed.items.iter().map(Row::of).collect();

    // The filters again, for the paging links.
    let mut filters = String::new();
    for (name, value) in [
        ("shop", &query.shop),
        ("mode", &query.mode),
        ("status", &query.status),
        ("reference", &query.reference),
        ("created_gte", &query.created_gte),
        ("created_lt", &query.created_lt),
    ] {
        if let Some(value) = given(value) {
            filters.push_str(&format!("&{name}={}", encode(value)));
        }
    }
    // Older pages lie after the last row when this page says there are more
    // (reading forwards) or when it was reached backwards; newer ones before
    // the first row when reached by paging.
    let older = if backwards { true } else { listed.has_more };
    let newer = if backwards { listed.has_more } else { paged };
    let next = match (older, rows.last()) {
        (true, Some(last)) => Some(format!(
            "/console/payments?starting_after={}{filters}",
            last.id
        )),
        _ => None,
    };
    let prev = match (newer, rows.first()) {
        (true, Some(first)) => Some(format!(
            "/console/payments?ending_before={}{filters}",
            first.id
        )),
        _ => None,
    };
    let value = |v: &Option<String>| given(v).unwrap_or_default().to_owned();
    html(&PaymentsPage {
        page: Chrome::new(&operator, "Payments", "payments"),
        shop: value(&query.shop),
        mode: mode.as_str(),
        status: value(&query.status),
        reference: value(&query.reference),
        created_gte: value(&query.created_gte),
        created_lt: value(&query.created_lt),
        errors,
        rows,
        next,
        prev,
    })
}
