//! `GET /console/keys?shop=&key=`: what the service knows of one shop's
//! key (what `GET /v1/idempotency-keys/{key}` shows the shop: state,
//! first request, lease holder, never the lease's token nor the stored
//! answer), plus its repeats by answer.

use askama::Template;
use axum::extract::{Query, State};
use axum::response::Response;
use chargeonce_core::{IdempotencyKey, ShopId};
use serde::Deserialize;

use super::payment::TallyView;
use super::{Chrome, ConsoleError, Operator, given, html};
use crate::Console;

/// The look-up.
#[derive(Debug, Default, Deserialize)]
pub struct KeysQuery {
    shop: Option<String>,
    key: Option<String>,
}

/// What was found.
pub struct KeyFound {
    /// The introspection view, as `name: value` lines.
    pub fields: Vec<(String, String)>,
    /// The payment it belongs to.
    pub payment: Option<String>,
    /// Replays.
    pub replays: TallyView,
    /// 409s.
    pub conflicts: TallyView,
    /// 422s.
    pub mismatches: TallyView,
}

/// The page.
#[derive(Template)]
#[template(path = "console/keys.html")]
struct KeysPage {
    page: Chrome,
    shop: String,
    key: String,
    shops: Vec<String>,
    found: Option<KeyFound>,
    error: Option<String>,
}

/// A JSON object as `name: value` lines, nested members as `outer.inner`.
fn flatten(prefix: &str, value: &serde_json::Value, out: &mut Vec<(String, String)>) {
    match value {
        serde_json::Value::Object(members) => {
            for (name, member) in members {
                let name = if prefix.is_empty() {
                    name.clone()
                } else {
                    format!("{prefix}.{name}")
                };
                flatten(&name, member, out);
            }
        }
        serde_json::Value::String(text) => out.push((prefix.to_owned(), text.clone())),
        other => out.push((prefix.to_owned(), other.to_string())),
    }
}

/// `GET /console/keys`.
pub async fn page(
    State(state): State<Console>,
    operator: Operator,
    Query(query): Query<KeysQuery>,
) -> Result<Response, ConsoleError> {
    let shops = state
        .store()
        .shops()
        .await?
        .into_iter()
        // Each shop in both modes: a test key's record is under `{shop}.test`.
        .flat_map(|s| {
            let test = s.shop_id.in_mode(chargeonce_core::api_key::Mode::Test);
            [s.shop_id.as_str().to_owned(), test.as_str().to_owned()]
        })
        .collect();
    let (mut found, mut error) = (None, None);
    if let (Some(shop), Some(key)) = (given(&query.shop), given(&query.key)) {
        match (ShopId::new(shop), IdempotencyKey::new(key)) {
            (Ok(shop), Ok(key)) => match state.store().key_info(&shop, &key).await? {
                Some(info) => {
                    let view = serde_json::to_value(chargeonce_server::render::key(&info))
                        .unwrap_or_default();
                    let mut fields = Vec::new();
                    flatten("", &view, &mut fields);
                    found = Some(KeyFound {
                        fields,
                        payment: info.payment_id.as_ref().map(|p| p.as_str().to_owned()),
                        replays: TallyView::of(&info.repeats_by.replays),
                        conflicts: TallyView::of(&info.repeats_by.conflicts),
                        mismatches: TallyView::of(&info.repeats_by.mismatches),
                    });
                }
                None => error = Some("no such key for this shop (or it expired)".to_owned()),
            },
            (Err(e), _) => error = Some(format!("shop: {e}")),
            (_, Err(e)) => error = Some(format!("key: {e}")),
        }
    }
    html(&KeysPage {
        page: Chrome::new(&operator, "Keys", "keys"),
        shop: given(&query.shop).unwrap_or_default().to_owned(),
        key: given(&query.key).unwrap_or_default().to_owned(),
        shops,
        found,
        error,
    })
}
