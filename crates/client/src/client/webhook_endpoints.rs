//! `/v1/webhook-endpoints`: the shop makes, lists, changes and deletes its
//! webhook endpoints and rolls their signing secrets (with a `full` key).
//!
//! A make or a secret roll is once per idempotency key: every attempt sends
//! the same key and body, and a repeat is answered with the endpoint as it
//! is, without its secret ([`WebhookEndpoint::replayed`]). An update sets
//! values (the key is required, not stored); a delete takes no key.

use std::time::Duration;

use chargeonce_core::IdempotencyKey;
use reqwest::{Method, Url};
use serde_json::Value;

use super::answer::Answer;
use super::api_keys::unavailable;
use super::judge::{Step, not_definite};
use super::{Client, IDEMPOTENT_REPLAYED};
use crate::model::{
    WebhookEndpointList, create_webhook_endpoint_json, roll_webhook_endpoint_secret_json,
    update_webhook_endpoint_json,
};
use crate::outcome::AttemptAnswer;
use crate::{Error, ProblemCode, WebhookEndpoint, WebhookEndpointUpdate};

impl Client {
    /// `POST /v1/webhook-endpoints` under `key`: registers `url` for the
    /// event types `enabled_events` (`["*"]`: every type, those added later
    /// too), retried like [`Client::pay`] (connection errors, timeouts, lost
    /// answers, `429`, `5xx`) with the same key and body until a definite
    /// answer or the end of the budget.
    ///
    /// The answer carries the endpoint's signing
    /// [`secret`](WebhookEndpoint::secret) once: store it now. A repeat
    /// under the same key makes nothing and answers the same endpoint with
    /// `secret: None` and [`WebhookEndpoint::replayed`]; when an attempt's
    /// answer was lost and a retry got the replay, roll the secret
    /// ([`Client::roll_webhook_endpoint_secret`]).
    ///
    /// Errors: [`Error::Rejected`] (`403 insufficient_scope` for a key that
    /// is not `full`, `409 webhook_endpoint_limit_reached` at 16 endpoints,
    /// `422 invalid_request` for a URL the service will not deliver to or an
    /// unknown event type), [`Error::KeyReused`] (the key made an endpoint
    /// with another request), [`Error::Unavailable`] when the budget ran out
    /// (retry later with the same key).
    pub async fn create_webhook_endpoint(
        &self,
        url: &str,
        enabled_events: &[&str],
        description: Option<&str>,
        key: &IdempotencyKey,
    ) -> Result<WebhookEndpoint, Error> {
        let body = create_webhook_endpoint_json(url, enabled_events, description)
            .map_err(|e| Error::Config(format!("the webhook endpoint request: {e}")))?;
        self.post_endpoint(self.url("v1/webhook-endpoints"), key, &body)
            .await
    }

    /// `GET /v1/webhook-endpoints`: every endpoint of the shop, oldest first
    /// (never their secrets).
    pub async fn list_webhook_endpoints(&self) -> Result<Vec<WebhookEndpoint>, Error> {
        let (list, _): (WebhookEndpointList, _) =
            self.read(self.url("v1/webhook-endpoints"), true).await?;
        Ok(list.data)
    }

    /// `GET /v1/webhook-endpoints/{id}`: one endpoint of the shop, without
    /// its secret (`Rejected` with [`ProblemCode::NotFound`] when there is
    /// none, or it was deleted).
    pub async fn webhook_endpoint(&self, id: &str) -> Result<WebhookEndpoint, Error> {
        Ok(self.read(self.endpoint_url(id, None), true).await?.0)
    }

    /// `POST /v1/webhook-endpoints/{id}` under `key`: sets the fields of
    /// `update` that are `Some` (`enabled: Some(false)` pauses deliveries,
    /// `description: Some("")` clears it). Setting values is idempotent, so
    /// retries (of transport failures, `429`, `5xx`) are safe; the service
    /// requires the idempotency key but does not store it.
    pub async fn update_webhook_endpoint(
        &self,
        id: &str,
        update: &WebhookEndpointUpdate,
        key: &IdempotencyKey,
    ) -> Result<WebhookEndpoint, Error> {
        let body = update_webhook_endpoint_json(update)
            .map_err(|e| Error::Config(format!("the update request: {e}")))?;
        self.post_endpoint(self.endpoint_url(id, None), key, &body)
            .await
    }

    /// `DELETE /v1/webhook-endpoints/{id}`: no delivery is made to it any
    /// more (its open deliveries are given up); answers the endpoint as it
    /// was deleted. Retried on transport failures, `429` and `5xx`; a
    /// second delete is `Rejected` with [`ProblemCode::NotFound`], so a
    /// `404` after [`Error::Unavailable`] or a lost answer means it is gone.
    pub async fn delete_webhook_endpoint(&self, id: &str) -> Result<WebhookEndpoint, Error> {
        Ok(self
            .call(Method::DELETE, self.endpoint_url(id, None), true)
            .await?
            .0)
    }

    /// `POST /v1/webhook-endpoints/{id}/roll-secret` under `key`: a new
    /// signing secret (answered once) signs from now on, and the old one
    /// keeps signing beside it for `expire_old_in` (whole seconds, at most 7
    /// days; `Duration::ZERO` stops it at once; `None` the service's
    /// default, 24 h): each delivery meanwhile carries a `v1=` signature
    /// per secret. Retried and replayed like
    /// [`Client::create_webhook_endpoint`].
    pub async fn roll_webhook_endpoint_secret(
        &self,
        id: &str,
        expire_old_in: Option<Duration>,
        key: &IdempotencyKey,
    ) -> Result<WebhookEndpoint, Error> {
        let body = roll_webhook_endpoint_secret_json(expire_old_in)
            .map_err(|e| Error::Config(format!("the roll request: {e}")))?;
        self.post_endpoint(self.endpoint_url(id, Some("roll-secret")), key, &body)
            .await
    }

    /// `/v1/webhook-endpoints/{id}[/{what}]`, the id escaped as one segment.
    fn endpoint_url(&self, id: &str, what: Option<&str>) -> Url {
        let mut url = self.url("v1/webhook-endpoints/");
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop_if_empty().push(id);
            if let Some(what) = what {
                segments.push(what);
            }
        }
        url
    }

    /// A keyed POST of `/v1/webhook-endpoints` through the retry loop of
    /// every keyed POST; no definite answer within the budget is
    /// [`Error::Unavailable`].
    async fn post_endpoint(
        &self,
        url: Url,
        key: &IdempotencyKey,
        body: &Value,
    ) -> Result<WebhookEndpoint, Error> {
        let body = serde_json::to_vec(body)
            .map_err(|e| Error::Config(format!("serialising the request: {e}")))?;
        let (made, attempts) = self
            .post_idempotent(url, key, body, false, judge_endpoint, |_| None)
            .await?;
        made.ok_or_else(|| unavailable(&attempts))
    }
}

/// Decides what an answer of an endpoint's make, update or secret roll
/// means: a `200` or `201` with the endpoint ends it (`Idempotent-Replayed`
/// says whether it is a repeat); `409 webhook_endpoint_limit_reached` is a
/// refusal (waiting changes nothing); other answers as for every keyed POST.
fn judge_endpoint(
    answer: &Answer,
    attempts: u32,
    endpoint_id: &mut Option<String>,
) -> (AttemptAnswer, Step<Option<WebhookEndpoint>>) {
    let status = answer.status;
    if matches!(status, 200 | 201) {
        let endpoint: Option<WebhookEndpoint> = serde_json::from_slice(&answer.body).ok();
        let seen = answer.seen(None, None);
        let step = match endpoint {
            Some(mut endpoint) => {
                *endpoint_id = Some(endpoint.id.clone());
                endpoint.replayed = answer.header(IDEMPOTENT_REPLAYED) == Some("true");
                Step::Done(Some(endpoint))
            }
            // A success status without a readable endpoint: something in
            // between mangled it. Ask again (a repeat makes nothing).
            None => Step::Retry(answer.retry_after()),
        };
        return (seen, step);
    }
    let problem = answer.problem();
    let seen = answer.seen(None, problem.as_ref());
    let step = match (status, problem) {
        (409, Some(problem)) if problem.code == ProblemCode::WebhookEndpointLimitReached => {
            Step::Fail(Error::Rejected {
                problem: Box::new(problem),
                attempts,
            })
        }
        (_, problem) => not_definite(answer, problem, attempts),
    };
    (seen, step)
}
