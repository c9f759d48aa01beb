//! What a request asks of its API key ([`Access`]), judged from its method
//! and its route's template: the extractor of a shop's credentials refuses
//! a key whose scope does not allow it (403 `insufficient_scope`), before
//! anything is read or stored.

use axum::http::Method;
use chargeonce_core::api_key::Access;

/// The reads of one object by its id: what a `payments` key may read back
/// of what it made. Only unguessable ids (UUIDv7): not an idempotency key's
/// introspection, whose keys a shop may choose as guessably as
/// `order-123-pay` and which names the payment a key made.
const READ_OWN: [&str; 3] = ["/v1/payments/{id}", "/v1/refunds/{id}", "/v1/captures/{id}"];

/// The writes that change the shop's setup rather than move money.
const MANAGE: [&str; 1] = ["/v1/events/{id}/resend"];

/// What a request of `method` to the route `template` asks; a request
/// without a known route is judged as the most it could ask.
pub fn access(method: &Method, template: Option<&str>) -> Access {
    let reads = *method == Method::GET || *method == Method::HEAD;
    match template {
        // A shop's keys are its setup, reads included: a support tool's
        // read_only key sees no key list.
        Some(path) if path.starts_with("/v1/api-keys") => Access::Manage,
        // Endpoints carry the shop's URLs: setup too, reads included.
        Some(path) if path.starts_with("/v1/webhook-endpoints") => Access::Manage,
        Some(path) if reads && READ_OWN.contains(&path) => Access::ReadOwn,
        _ if reads => Access::Read,
        Some(path) if MANAGE.contains(&path) => Access::Manage,
        Some(path) if path.starts_with("/v1/payments") || path == "/bench/ceiling" => Access::Move,
        _ => Access::Manage,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_moves_reads_and_setup_are_told_apart() {
        let post = Method::POST;
        for path in [
            "/v1/payments",
            "/v1/payments/{id}/refunds",
            "/v1/payments/{id}/captures",
            "/v1/payments/{id}/void",
            "/v1/payments/{id}/cancel",
        ] {
            assert_eq!(access(&post, Some(path)), Access::Move, "{path}");
        }
        assert_eq!(
            access(&post, Some("/v1/events/{id}/resend")),
            Access::Manage
        );
        assert_eq!(access(&post, None), Access::Manage, "unknown: the most");
        assert_eq!(
            access(&Method::GET, Some("/v1/payments/{id}")),
            Access::ReadOwn
        );
        assert_eq!(access(&Method::GET, Some("/v1/payments")), Access::Read);
        assert_eq!(
            access(&Method::GET, Some("/v1/payments/{id}/history")),
            Access::Read
        );
        assert_eq!(access(&Method::GET, Some("/v1/events")), Access::Read);
        assert_eq!(access(&Method::GET, Some("/v1/api-keys")), Access::Manage);
        assert_eq!(
            access(&post, Some("/v1/api-keys/{id}/revoke")),
            Access::Manage
        );
        assert_eq!(access(&Method::DELETE, Some("/v1/payments")), Access::Move);
    }
}
