//! `/v1/api-keys`: the shop makes, lists, rolls and revokes its own keys
//! (with a `full` key).
//!
//! A make or a roll is once per idempotency key: every attempt sends the
//! same key and body, and a repeat is answered with the key the first
//! request made, without its secret ([`ApiKey::replayed`]).

use std::time::Duration;

use chargeonce_core::IdempotencyKey;
use reqwest::Url;
use serde_json::Value;
use time::OffsetDateTime;

use super::answer::Answer;
use super::judge::{Step, not_definite};
use super::{Client, IDEMPOTENT_REPLAYED};
use crate::model::{ApiKeyList, create_api_key_json, roll_api_key_json};
use crate::outcome::{Attempt, AttemptAnswer};
use crate::{ApiKey, ApiKeyScope, Error, ProblemCode};

impl Client {
    /// `POST /v1/api-keys` under `key`: makes a live key with `scope`
    /// (optionally a description and an expiry), retried like
    /// [`Client::pay`] (connection errors, timeouts, lost answers, `429`,
    /// `5xx`) with the same key and body until a definite answer or the end
    /// of the budget.
    ///
    /// The answer carries the key's [`secret`](ApiKey::secret) once: store
    /// it now. A repeat under the same key makes nothing and answers the
    /// same key with `secret: None` and [`ApiKey::replayed`]. So when an
    /// attempt's answer was lost and a retry got the replay, the secret is
    /// gone: revoke that key and make another under a new idempotency key.
    ///
    /// Errors: [`Error::Rejected`] (`403 insufficient_scope` for a key that
    /// is not `full`, `409 api_key_limit_reached`, `422 invalid_request`),
    /// [`Error::KeyReused`] (the key made a key with another request),
    /// [`Error::Unavailable`] when the budget ran out (retry later with the
    /// same key).
    pub async fn create_api_key(
        &self,
        scope: ApiKeyScope,
        description: Option<&str>,
        expires_at: Option<OffsetDateTime>,
        key: &IdempotencyKey,
    ) -> Result<ApiKey, Error> {
        let body = create_api_key_json(scope, description, expires_at)
            .map_err(|e| Error::Config(format!("the API key request: {e}")))?;
        self.post_api_key(self.url("v1/api-keys"), key, &body).await
    }

    /// `GET /v1/api-keys`: every key of the shop, revoked and expired ones
    /// too, newest first (never their secrets).
    pub async fn list_api_keys(&self) -> Result<Vec<ApiKey>, Error> {
        let (list, _): (ApiKeyList, _) = self.read(self.url("v1/api-keys"), true).await?;
        Ok(list.data)
    }

    /// `GET /v1/api-keys/{id}`: one key of the shop, without its secret
    /// (`Rejected` with [`ProblemCode::NotFound`] when there is none).
    pub async fn api_key(&self, id: &str) -> Result<ApiKey, Error> {
        Ok(self.read(self.api_key_url(id, None), true).await?.0)
    }

    /// `POST /v1/api-keys/{id}/roll` under `key`: makes the successor of
    /// key `id` (same scope and description; its secret answered once) and
    /// has the old key expire after `expire_old_in` (whole seconds, at most
    /// 7 days; `Duration::ZERO` at once; `None` the service's default,
    /// 24 h). Retried and replayed like [`Client::create_api_key`].
    ///
    /// `409 api_key_inactive` (the key is revoked or expired) is
    /// [`Error::Rejected`].
    pub async fn roll_api_key(
        &self,
        id: &str,
        expire_old_in: Option<Duration>,
        key: &IdempotencyKey,
    ) -> Result<ApiKey, Error> {
        let body = roll_api_key_json(expire_old_in)
            .map_err(|e| Error::Config(format!("the roll request: {e}")))?;
        self.post_api_key(self.api_key_url(id, Some("roll")), key, &body)
            .await
    }

    /// `POST /v1/api-keys/{id}/revoke` under `key`: the key stops working
    /// at once (on every instance within the service's auth cache TTL).
    /// Revoking a revoked key changes nothing and answers it as it is, so
    /// retries (of transport failures, `429`, `5xx`) are safe; the service
    /// requires the idempotency key but does not store it.
    pub async fn revoke_api_key(&self, id: &str, key: &IdempotencyKey) -> Result<ApiKey, Error> {
        let body = Value::Object(serde_json::Map::new());
        self.post_api_key(self.api_key_url(id, Some("revoke")), key, &body)
            .await
    }

    /// `/v1/api-keys/{id}[/{what}]`, the id escaped as one segment.
    fn api_key_url(&self, id: &str, what: Option<&str>) -> Url {
        let mut url = self.url("v1/api-keys/");
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop_if_empty().push(id);
            if let Some(what) = what {
                segments.push(what);
            }
        }
        url
    }

    /// A keyed POST of `/v1/api-keys` through the retry loop of every keyed
    /// POST; no definite answer within the budget is [`Error::Unavailable`].
    async fn post_api_key(
        &self,
        url: Url,
        key: &IdempotencyKey,
        body: &Value,
    ) -> Result<ApiKey, Error> {
        let body = serde_json::to_vec(body)
            .map_err(|e| Error::Config(format!("serialising the request: {e}")))?;
        let (made, attempts) = self
            .post_idempotent(url, key, body, false, judge_api_key, |_| None)
            .await?;
        made.ok_or_else(|| unavailable(&attempts))
    }
}

/// The budget ran out without a definite answer.
pub(super) fn unavailable(attempts: &[Attempt]) -> Error {
    Error::Unavailable {
        last: attempts
            .last()
            .map(|attempt| attempt.answer.to_string())
            .unwrap_or_default(),
        attempts: u32::try_from(attempts.len()).unwrap_or(u32::MAX),
    }
}

/// Decides what an answer of a key's make, roll or revoke means: a `200` or
/// `201` with the key ends it (`Idempotent-Replayed` says whether it is a
/// repeat); `409 api_key_limit_reached` and `api_key_inactive` are refusals
/// (waiting changes nothing); other answers as for every keyed POST.
fn judge_api_key(
    answer: &Answer,
    attempts: u32,
    key_id: &mut Option<String>,
) -> (AttemptAnswer, Step<Option<ApiKey>>) {
    let status = answer.status;
    if matches!(status, 200 | 201) {
        let key: Option<ApiKey> = serde_json::from_slice(&answer.body).ok();
        let seen = answer.seen(None, None);
        let step = match key {
            Some(mut key) => {
                *key_id = Some(key.id.clone());
                key.replayed = answer.header(IDEMPOTENT_REPLAYED) == Some("true");
                Step::Done(Some(key))
            }
            // A success status without a readable key: something in
            // between mangled it. Ask again (a repeat makes nothing).
            None => Step::Retry(answer.retry_after()),
        };
        return (seen, step);
    }
    let problem = answer.problem();
    let seen = answer.seen(None, problem.as_ref());
    let step = match (status, problem) {
        (409, Some(problem))
            if problem.code == ProblemCode::ApiKeyLimitReached
                || problem.code == ProblemCode::ApiKeyInactive =>
        {
            Step::Fail(Error::Rejected {
                problem: Box::new(problem),
                attempts,
            })
        }
        (_, problem) => not_definite(answer, problem, attempts),
    };
    (seen, step)
}
