//! The OpenAPI 3.1 document of the API, generated from the code.
//!
//! Each handler carries its own `#[utoipa::path]` (its path, parameters,
//! body, and the statuses with the problem `code`s it can answer); the
//! router is built from those same handlers ([`crate::api_routes`], with
//! utoipa-axum's `routes!`), so a route cannot be served without being in
//! the document. This module assembles the rest: the info, the tags, the
//! security schemes, the wire schemas, and what every operation shares
//! ([`finish`]): the optional `Request-Id` request header, the `Request-Id`
//! answer header, `application/problem+json` on every error status, and the
//! statuses any authenticated request can meet (401, 429, 500, 503).
//!
//! It is served at [`SPEC_PATH`] and rendered at [`DOCS_PATH`] (Swagger UI,
//! its assets inside the binary); `docs/openapi.json` is the committed copy
//! (`chargeonce openapi > docs/openapi.json`).

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use utoipa::OpenApi as _;
use utoipa::openapi::path::{Operation, Parameter, ParameterBuilder, ParameterIn};
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{
    ContentBuilder, HeaderBuilder, ObjectBuilder, OpenApi, Ref, RefOr, Required, Response,
    ResponseBuilder, Type,
};

use crate::problem::PROBLEM_JSON;

/// Where the document is served.
pub const SPEC_PATH: &str = "/v1/openapi.json";

/// Where the API reference page (Swagger UI) is served.
pub const DOCS_PATH: &str = "/docs";

/// The name of the HTTP Basic scheme (shop id : secret key).
pub const SHOP_BASIC: &str = "shop_basic";

/// The name of the acquirer webhook's signature scheme.
pub const ACQUIRER_SIGNATURE: &str = "acquirer_signature";

/// The syntax of a client's `Request-Id` that is kept (else it is replaced).
pub const REQUEST_ID_PATTERN: &str = "^[A-Za-z0-9._:-]{1,128}$";

/// The syntax of an `Idempotency-Key`: 1 to 255 visible ASCII characters
/// not starting with `"`, or the RFC 8941 string form `"..."` of such a key
/// (`\"` and `\\` escaped; at most 512 characters quoted). The path macros
/// repeat it as a literal; a test checks they agree.
pub const IDEMPOTENCY_KEY_PATTERN: &str =
    r#"^(?:[!#-~][!-~]{0,254}|"(?:[!#-\[\]-~]|\\["\\]){1,255}")$"#;

/// What the path macros say of the `Idempotency-Key` header.
pub const IDEMPOTENCY_KEY_DESCRIPTION: &str = "The key of the business operation (for example \
     `order-123-pay`): 1 to 255 visible ASCII characters, once; the structured-field string \
     form `\"order-123-pay\"` is the same key. A repeat with the same key gets the first \
     answer, replayed byte for byte (`Idempotent-Replayed: true`).";

/// The document's fixed parts; the paths come from the handlers.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "chargeonce",
        description = "An idempotent payment API: every state-changing POST carries an \
            `Idempotency-Key`, and a repeat of it is answered as the first request was, byte \
            for byte, without charging again. Errors are RFC 9457 problems \
            (`application/problem+json`) with a stable `code`; every answer carries a \
            `Request-Id`.",
        license(name = "MIT OR Apache-2.0", identifier = "MIT OR Apache-2.0"),
    ),
    servers((url = "/", description = "this server")),
    tags(
        (name = "payments", description = "Charge a payment method once per key, or authorize it (`capture_method` `manual`) and void what is left; read payments."),
        (name = "captures", description = "Capture (part of) an authorization once per key, in one or several parts; read captures."),
        (name = "refunds", description = "Refund (part of) a payment once per key; read refunds."),
        (name = "idempotency-keys", description = "What the service knows of a key: state, first request, repeats, lease holder."),
        (name = "events", description = "The shop's merchant events and their delivery log."),
        (name = "webhooks", description = "Events from the acquirer, signed (`Chargeonce-Signature`)."),
        (name = "operations", description = "Health and readiness, for load balancers and operators; no authentication. (Metrics and the console are on the operator listener, not in this document.)"),
    ),
    components(schemas(
        chargeonce_wire::Problem,
        chargeonce_wire::ProblemCode,
        chargeonce_wire::Payment,
        chargeonce_wire::PaymentObject,
        chargeonce_wire::PaymentStatus,
        chargeonce_wire::PaymentRefundStatus,
        chargeonce_wire::Refund,
        chargeonce_wire::RefundObject,
        chargeonce_wire::RefundStatus,
        chargeonce_wire::Event,
        chargeonce_wire::EventObject,
        chargeonce_wire::EventType,
        chargeonce_wire::EventDelivery,
        chargeonce_wire::DeliveryState,
        chargeonce_wire::Amount,
        chargeonce_wire::ListObject,
        chargeonce_wire::CreatePayment,
        chargeonce_wire::CreateRefund,
        chargeonce_wire::PaymentMethod,
        chargeonce_wire::IdempotencyKeyInfo,
        chargeonce_wire::IdempotencyKeyObject,
        chargeonce_wire::KeyState,
        chargeonce_wire::KeyRecoveryPoint,
        chargeonce_wire::KeyRequest,
        chargeonce_wire::KeyLease,
        chargeonce_wire::PaymentHistory,
        chargeonce_wire::PaymentHistoryObject,
        chargeonce_wire::HistoryEntry,
        chargeonce_wire::HistoryEvent,
        chargeonce_wire::HistoryKey,
        chargeonce_wire::HistoryTally,
        chargeonce_wire::HistoryAcquirerCall,
        chargeonce_wire::HistoryCallOutcome,
        chargeonce_wire::HistorySettledBy,
    )),
    modifiers(&Security),
)]
pub struct ApiDoc;

/// Adds the two security schemes.
struct Security;

impl utoipa::Modify for Security {
    fn modify(&self, openapi: &mut OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            SHOP_BASIC,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Basic)
                    .description(Some(
                        "HTTP Basic: the shop id as the user name, its secret key as the \
                         password (`chargeonce shops add`).",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            ACQUIRER_SIGNATURE,
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                chargeonce_core::webhook::SIGNATURE_HEADER,
                "`t=<unix seconds>,v1=<hex HMAC-SHA256 of \"t.body\">` with the webhook \
                 secret (`serve --webhook-secret`); at most 8 `v1=` parts, within 5 minutes \
                 of now.",
            ))),
        );
    }
}

/// The document without the handlers' paths (they are added by
/// [`crate::api_routes`]).
pub fn base() -> OpenApi {
    ApiDoc::openapi()
}

/// The whole document, as served: the handlers' paths and [`finish`].
pub fn document() -> OpenApi {
    let mut api = crate::api_routes().into_openapi();
    finish(&mut api);
    api
}

/// The document as served and committed: pretty-printed JSON with a final
/// newline (its member order is the code's: utoipa's `preserve_order`).
pub fn to_json(api: &OpenApi) -> String {
    let mut json = api
        .to_pretty_json()
        .unwrap_or_else(|error| format!("{{\"error\": \"{error}\"}}"));
    json.push('\n');
    json
}

/// [`document`] as [`to_json`].
pub fn document_json() -> String {
    to_json(&document())
}

fn string_schema() -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::String)
}

fn problem_content() -> utoipa::openapi::Content {
    ContentBuilder::new()
        .schema(Some(Ref::from_schema_name("Problem")))
        .build()
}

fn problem_response(description: &str) -> Response {
    ResponseBuilder::new()
        .description(description)
        .content(PROBLEM_JSON, problem_content())
        .build()
}

/// The optional `Request-Id` request header every operation takes.
fn request_id_parameter() -> Parameter {
    ParameterBuilder::new()
        .name("Request-Id")
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .description(Some(format!(
            "Your id of this request, echoed in the answer's `Request-Id` and the problem's \
             `request_id`, and logged. Kept when it is exactly one header of 1 to 128 \
             characters of `A-Z a-z 0-9 . _ : -` (`{REQUEST_ID_PATTERN}`); any other value \
             (or several) is replaced by a generated UUID v7, never refused."
        )))
        .schema(Some(string_schema().examples(["client-42"])))
        .build()
}

fn request_id_header() -> utoipa::openapi::Header {
    HeaderBuilder::new()
        .schema(Some(
            string_schema().examples(["0193a1f2-7c1e-7d2a-9b3f-5a4e3c2b1a09"]),
        ))
        .description(Some(
            "The request's id: the client's `Request-Id` when well formed, else a generated \
             UUID v7.",
        ))
        .build()
}

fn retry_after_header() -> utoipa::openapi::Header {
    HeaderBuilder::new()
        .schema(Some(
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(1)),
        ))
        .description(Some(
            "Whole seconds to wait before retrying (with the same key).",
        ))
        .build()
}

/// The statuses every authenticated operation can answer, with their codes.
const AUTHENTICATED: &[(&str, &str)] = &[
    (
        "401",
        "`unauthorized`: no valid HTTP Basic credentials of a shop (`WWW-Authenticate: Basic`). \
         Nothing was executed.",
    ),
    (
        "429",
        "`rate_limited`: the shop is over its rate limit; retry after `Retry-After`.",
    ),
];

/// The statuses every operation can answer.
const EVERY: &[(&str, &str)] = &[
    (
        "500",
        "`internal_error`: a bug on the server; nothing about it is shown. Retry with the same key.",
    ),
    (
        "503",
        "`store_unavailable`, `store_overloaded`: the database cannot be reached or is too busy; \
         `request_timeout`: no answer within the server's limit (an operation it started goes \
         on). Retry with the same key after `Retry-After`.",
    ),
];

fn is_authenticated(operation: &Operation) -> bool {
    operation.security.as_ref().is_some_and(|requirements| {
        requirements.iter().any(|requirement| {
            serde_json::to_value(requirement)
                .ok()
                .and_then(|value| value.as_object().map(|o| o.contains_key(SHOP_BASIC)))
                .unwrap_or(false)
        })
    })
}

/// Adds to every operation what they all share (see the module's doc).
pub fn finish(api: &mut OpenApi) {
    for item in api.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.options,
            &mut item.head,
            &mut item.patch,
            &mut item.trace,
        ];
        for operation in operations.into_iter().flatten() {
            finish_operation(operation);
        }
    }
}

fn finish_operation(operation: &mut Operation) {
    operation
        .parameters
        .get_or_insert_with(Vec::new)
        .push(RefOr::T(request_id_parameter()));
    let mut common: Vec<(&str, &str)> = Vec::new();
    if is_authenticated(operation) {
        common.extend_from_slice(AUTHENTICATED);
    }
    common.extend_from_slice(EVERY);
    let responses = &mut operation.responses.responses;
    for (status, description) in common {
        responses
            .entry(status.to_owned())
            .or_insert_with(|| RefOr::T(problem_response(description)));
    }
    for (status, response) in responses.iter_mut() {
        let RefOr::T(response) = response else {
            continue;
        };
        let error = status.starts_with('4') || status.starts_with('5');
        if error && response.content.is_empty() {
            response
                .content
                .insert(PROBLEM_JSON.to_owned(), RefOr::T(problem_content()));
        }
        if matches!(status.as_str(), "409" | "429" | "503")
            && !response.headers.contains_key("Retry-After")
        {
            response
                .headers
                .insert("Retry-After".to_owned(), RefOr::T(retry_after_header()));
        }
        response
            .headers
            .insert("Request-Id".to_owned(), RefOr::T(request_id_header()));
    }
}

/// `GET /v1/openapi.json`: the document, as [`to_json`].
pub fn spec_router<S: Clone + Send + Sync + 'static>(json: String) -> Router<S> {
    let json: std::sync::Arc<str> = json.into();
    Router::new().route(
        SPEC_PATH,
        axum::routing::get(move || {
            let json = json.clone();
            async move {
                (
                    [(header::CONTENT_TYPE, "application/json")],
                    json.to_string(),
                )
                    .into_response()
            }
        }),
    )
}

/// `/docs`: Swagger UI on [`SPEC_PATH`], every asset from inside the
/// binary (utoipa-swagger-ui's `vendored` feature), the online validator
/// badge off (it would call out).
pub fn docs_router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    let config = utoipa_swagger_ui::Config::from(SPEC_PATH)
        .validator_url("none")
        .try_it_out_enabled(true)
        .persist_authorization(false);
    Router::from(utoipa_swagger_ui::SwaggerUi::new(DOCS_PATH).config(config))
        .layer(axum::middleware::map_response(docs_headers))
}

/// The Content-Security-Policy of `/docs`: Swagger UI's own scripts and
/// styles from this origin (its React sets inline `style` attributes, and
/// its icons are `data:` images), requests only to this origin (the
/// document and "try it out"), no frames.
pub const DOCS_CSP: &str = "default-src 'none'; script-src 'self';      style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self';      connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// `/docs` answers cannot be framed, and run only the page's own scripts.
async fn docs_headers(mut response: axum::response::Response) -> axum::response::Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        axum::http::HeaderValue::from_static(DOCS_CSP),
    );
    headers.insert(
        header::X_FRAME_OPTIONS,
        axum::http::HeaderValue::from_static("DENY"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        axum::http::HeaderValue::from_static("nosniff"),
    );
    response
}
