//! `GET /console/shops`: every shop, its webhook URL (never the signing
//! secret) and when it was registered.

use askama::Template;
use axum::extract::State;
use axum::response::Response;

use super::{Chrome, ConsoleError, Operator, html, when};
use crate::Console;

/// A shop's row.
pub struct ShopRow {
    /// Its id.
    pub id: String,
    /// Its webhook URL, if set.
    pub webhook_url: Option<String>,
    /// When it was registered.
    pub created: String,
}

/// The page.
#[derive(Template)]
#[template(path = "console/shops.html")]
struct ShopsPage {
    page: Chrome,
    shops: Vec<ShopRow>,
}

/// `GET /console/shops`.
pub async fn page(
    State(state): State<Console>,
    operator: Operator,
) -> Result<Response, ConsoleError> {
    let shops = state
        .store()
        .shops()
        .await?
        .into_iter()
        .map(|s| ShopRow {
            id: s.shop_id.as_str().to_owned(),
            webhook_url: s.webhook_url,
            created: when(s.created_at),
        })
        .collect();
    html(&ShopsPage {
        page: Chrome::new(&operator, "Shops", "shops"),
        shops,
    })
}
