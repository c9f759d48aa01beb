//! Webhook endpoints: where a shop's merchant events go.
//!
//! A shop has up to [`MAX_ENDPOINTS`] endpoints, each a URL with the event
//! types it wants ([`EventFilter`]), an on/off switch and its own signing
//! secret. Every event is written with one delivery per enabled endpoint
//! whose filter matches it, in the transaction of its transition, and each
//! delivery is retried and given up on its own. An endpoint made by the
//! operator (`shops set-webhook`) is [`Origin::Operator`]: the shop's one URL
//! of before became such an endpoint.
//!
//! ```
//! use chargeonce_core::endpoint::{EndpointId, EventFilter};
//! use chargeonce_core::events::EventType;
//!
//! let id = EndpointId::generate();
//! assert!(id.as_str().starts_with("we_"));
//! let filter = EventFilter::parse(["refund.failed", "payment.succeeded"]).unwrap();
//! assert_eq!(filter.as_stored(), "payment.succeeded,refund.failed");
//! assert!(filter.matches(EventType::RefundFailed));
//! assert!(!filter.matches(EventType::PaymentDeclined));
//! assert!(EventFilter::All.matches(EventType::PaymentDeclined));
//! ```

use std::collections::BTreeSet;

use crate::ShopId;
use crate::api_key::MakingRequest;
use crate::events::EventType;
use crate::webhook::WebhookSecret;

/// The most endpoints a shop may have (deleted ones not counted).
pub const MAX_ENDPOINTS: usize = 16;

/// The longest description an endpoint may carry, in characters.
pub const MAX_DESCRIPTION: usize = 200;

/// `last_error` of a delivery given up because its endpoint was deleted.
pub const DELETED: &str = "the endpoint was deleted";

/// The longest URL an endpoint may have, in bytes.
pub const MAX_URL: usize = 2048;

crate::id::prefixed_id!(
    /// The id of a webhook endpoint: `we_` followed by a UUIDv7
    /// (time-ordered).
    EndpointId,
    "we_"
);

/// Which event types an endpoint receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventFilter {
    /// Every type, those added later too (`*`).
    All,
    /// These types only (never empty).
    Only(BTreeSet<EventTypeName>),
}

/// An event type by its name, ordered by it (so a filter's stored form is
/// sorted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventTypeName(&'static str);

/// A filter that is neither `*` nor a list of known event types.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidFilter {
    /// No type at all.
    #[error("enabled_events must name at least one event type, or be [\"*\"]")]
    Empty,
    /// A name that is no event type.
    #[error("unknown event type {0:?}")]
    Unknown(String),
    /// `*` beside types.
    #[error("\"*\" stands alone in enabled_events")]
    StarWithTypes,
}

impl EventFilter {
    /// A filter from the names a shop sent: `["*"]`, or event types
    /// (repeats collapse).
    pub fn parse<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Self, InvalidFilter> {
        let mut star = false;
        let mut types = BTreeSet::new();
        for name in names {
            if name == "*" {
                star = true;
                continue;
            }
            let event_type =
                EventType::parse(name).ok_or_else(|| InvalidFilter::Unknown(name.to_owned()))?;
            types.insert(EventTypeName(event_type.as_str()));
        }
        match (star, types.is_empty()) {
            (true, true) => Ok(Self::All),
            (true, false) => Err(InvalidFilter::StarWithTypes),
            (false, true) => Err(InvalidFilter::Empty),
            (false, false) => Ok(Self::Only(types)),
        }
    }

    /// As stored: `*`, or the types sorted and joined by commas (no type
    /// holds a comma, so a store matches with a comma-bounded search).
    pub fn as_stored(&self) -> String {
        match self {
            Self::All => "*".to_owned(),
            Self::Only(types) => types.iter().map(|t| t.0).collect::<Vec<_>>().join(","),
        }
    }

    /// Reads a stored filter back.
    pub fn from_stored(stored: &str) -> Result<Self, InvalidFilter> {
        Self::parse(stored.split(','))
    }

    /// The names as the API lists them: `["*"]` or the types, sorted.
    pub fn names(&self) -> Vec<&'static str> {
        match self {
            Self::All => vec!["*"],
            Self::Only(types) => types.iter().map(|t| t.0).collect(),
        }
    }

    /// Whether an event of `event_type` goes to an endpoint with this filter.
    pub fn matches(&self, event_type: EventType) -> bool {
        match self {
            Self::All => true,
            Self::Only(types) => types.contains(&EventTypeName(event_type.as_str())),
        }
    }
}

/// Who manages an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The operator, with `shops set-webhook` (one per shop at most).
    Operator,
    /// The shop, through `/v1/webhook-endpoints`.
    Api,
}

impl Origin {
    /// As stored.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Operator => "operator",
            Self::Api => "api",
        }
    }

    /// Reads a stored origin back.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "operator" => Some(Self::Operator),
            "api" => Some(Self::Api),
            _ => None,
        }
    }
}

/// A webhook endpoint as stored, without its secrets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Its id.
    pub id: EndpointId,
    /// Its shop.
    pub shop_id: ShopId,
    /// Who manages it.
    pub origin: Origin,
    /// Where events are POSTed.
    pub url: String,
    /// Which events it receives.
    pub filter: EventFilter,
    /// What it is for, in the shop's words.
    pub description: Option<String>,
    /// Whether events are written for it and delivered to it now.
    pub enabled: bool,
    /// When it was made (unix ms).
    pub created_at_ms: i64,
    /// Until when (unix ms) a rolled-over secret still signs, if one does.
    pub previous_secret_until_ms: Option<i64>,
}

/// An endpoint to store, with the secret it signs with and the request
/// that makes it.
#[derive(Debug, Clone)]
pub struct NewEndpoint {
    /// Its id.
    pub id: EndpointId,
    /// Its shop.
    pub shop_id: ShopId,
    /// Who manages it.
    pub origin: Origin,
    /// Where events are POSTed.
    pub url: String,
    /// Which events it receives.
    pub filter: EventFilter,
    /// What it is for.
    pub description: Option<String>,
    /// The signing secret (`Debug` never shows it).
    pub secret: WebhookSecret,
    /// The request that makes it, when made through the API.
    pub request: Option<MakingRequest>,
}

impl NewEndpoint {
    /// The operator's endpoint of a shop (`shops set-webhook`): every event
    /// type, made by no request.
    pub fn operator(shop_id: &ShopId, endpoint: &crate::events::WebhookEndpoint) -> Self {
        Self {
            id: EndpointId::generate(),
            shop_id: shop_id.clone(),
            origin: Origin::Operator,
            url: endpoint.url.clone(),
            filter: EventFilter::All,
            description: Some("set by the operator".to_owned()),
            secret: endpoint.secret.clone(),
            request: None,
        }
    }
}

/// A change to an endpoint: each field that is `Some` is set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointUpdate {
    /// New filter.
    pub filter: Option<EventFilter>,
    /// Enable (open deliveries due again now) or disable (open deliveries
    /// wait, no new ones are written).
    pub enabled: Option<bool>,
    /// New description (`Some(None)` clears it).
    pub description: Option<Option<String>>,
}

/// An endpoint written by a create or a secret roll, or found as the answer
/// to an earlier request with the same idempotency key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEndpoint {
    /// The endpoint.
    pub endpoint: Endpoint,
    /// `true` when an earlier request with the same idempotency key made it
    /// (nothing was written now; its secret was shown to that request).
    pub replayed: bool,
}

/// Why an endpoint was not made, changed or rolled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointRefusal {
    /// No such shop.
    #[error("no shop {0}")]
    NoShop(String),
    /// No such endpoint of this shop (or it was deleted).
    #[error("no webhook endpoint {0} in this shop")]
    NoEndpoint(String),
    /// The shop has [`MAX_ENDPOINTS`] endpoints.
    #[error("the shop has {MAX_ENDPOINTS} webhook endpoints; delete one first")]
    TooMany,
    /// The idempotency key made something else, or with another request.
    #[error("this idempotency key was used with a different request")]
    RequestReused,
}

/// An open delivery the relay claimed for one attempt: the event, the
/// endpoint it goes to and the secrets that sign it.
#[derive(Debug, Clone)]
pub struct Destination {
    /// The endpoint.
    pub endpoint_id: EndpointId,
    /// Its URL.
    pub url: String,
    /// Its signing secret.
    pub secret: WebhookSecret,
    /// The secret a roll replaced, while its overlap lasts: each delivery
    /// then carries a second signature made with it.
    pub previous_secret: Option<WebhookSecret>,
}

/// The judge of a URL a shop registers (where the service will connect):
/// the workers' egress guard in service. Its refusal is a sentence the shop
/// may read (it names no address the URL resolved to).
#[async_trait::async_trait]
pub trait UrlCheck: Send + Sync + 'static {
    /// `Ok` when events may be sent to `url`; why not otherwise.
    async fn check(&self, url: &str) -> Result<(), String>;
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn filters_parse_and_store() {
        assert_eq!(EventFilter::parse(["*"]).unwrap(), EventFilter::All);
        assert_eq!(EventFilter::parse(["*", "*"]).unwrap(), EventFilter::All);
        assert_eq!(
            EventFilter::parse(Vec::<&str>::new()),
            Err(InvalidFilter::Empty)
        );
        assert_eq!(
            EventFilter::parse(["*", "refund.failed"]),
            Err(InvalidFilter::StarWithTypes)
        );
        assert!(matches!(
            EventFilter::parse(["payment.pending"]),
            Err(InvalidFilter::Unknown(_))
        ));
        let f = EventFilter::parse(["refund.failed", "payment.voided", "refund.failed"]).unwrap();
        assert_eq!(f.as_stored(), "payment.voided,refund.failed");
        assert_eq!(EventFilter::from_stored(&f.as_stored()).unwrap(), f);
        assert_eq!(EventFilter::from_stored("*").unwrap(), EventFilter::All);
        assert_eq!(f.names(), vec!["payment.voided", "refund.failed"]);
    }

    #[test]
    fn ids_parse_only_their_own_shape() {
        assert!(EndpointId::parse("we_").is_err());
        assert!(EndpointId::parse("evt_0123456789abcdef0123456789abcdef").is_err());
        assert!(EndpointId::parse("we_0123456789abcdef0123456789abcdef").is_ok());
        let id = EndpointId::generate();
        assert_eq!(EndpointId::parse(id.as_str()).unwrap(), id);
    }
}
