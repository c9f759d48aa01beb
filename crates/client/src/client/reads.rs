//! The reads: a payment, its history, an order's payments, the simulator's ledger,
//! readiness, and the retry loop of a GET.

use std::time::Instant;

use reqwest::{Method, Url};
use serde::de::DeserializeOwned;

use super::Client;
use super::answer::{failure, send, transient};
use crate::{Error, Ledger, Payment, PaymentHistory, PaymentList};

impl Client {
    /// `GET /v1/payments/{id}`: one payment of this shop (`Rejected` with
    /// [`ProblemCode::NotFound`](crate::ProblemCode::NotFound) when there is none).
    pub async fn payment(&self, id: &str) -> Result<Payment, Error> {
        Ok(self.payment_with_attempts(id).await?.0)
    }

    /// [`Client::payment`], and how many attempts the read took.
    pub async fn payment_with_attempts(&self, id: &str) -> Result<(Payment, u32), Error> {
        let mut url = self.url("v1/payments/");
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop_if_empty().push(id);
        }
        self.read(url, true).await
    }

    /// `GET /v1/payments/{id}/history`: one payment's story, oldest entry
    /// first (its claim, take-overs, each acquirer call, the answer stored,
    /// the settlement and who made it, refunds, merchant event deliveries,
    /// findings), and the repeat counts of its keys (replays, 409s, 422s).
    /// `Rejected` with [`ProblemCode::NotFound`](crate::ProblemCode::NotFound)
    /// for a payment that is not this shop's.
    pub async fn payment_history(&self, id: &str) -> Result<PaymentHistory, Error> {
        let mut url = self.url("v1/payments/");
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop_if_empty().push(id).push("history");
        }
        Ok(self.read(url, true).await?.0)
    }

    /// `GET /v1/payments?reference=`: an order's payments, oldest first
    /// (the newest 100: an order has a handful).
    pub async fn payments_for(&self, reference: &str) -> Result<Vec<Payment>, Error> {
        let mut url = self.url("v1/payments");
        url.query_pairs_mut()
            .append_pair("reference", reference)
            .append_pair("limit", "100");
        let (list, _): (PaymentList, _) = self.read(url, true).await?;
        let mut payments = list.data;
        payments.reverse();
        Ok(payments)
    }

    /// `GET /sim/ledger` on the service's operator listener
    /// (`operator_url`, e.g. `http://127.0.0.1:8081`): the embedded acquirer
    /// simulator's ledger (a test tool, not part of the v1 API, never on the
    /// public listener): the ground truth of what was charged.
    pub async fn acquirer_ledger(&self, operator_url: &str) -> Result<Ledger, Error> {
        let with_slash = format!("{}/", operator_url.trim_end_matches('/'));
        let url = Url::parse(&with_slash)
            .and_then(|base| base.join("sim/ledger"))
            .map_err(|e| Error::Config(format!("the operator URL `{operator_url}`: {e}")))?;
        Ok(self.read(url, false).await?.0)
    }

    /// `GET /readyz`, once, without retries: `true` when the service and its
    /// database answer, `false` when it says it cannot reach its database (503).
    pub async fn ready(&self) -> Result<bool, Error> {
        let builder = self
            .http
            .get(self.url("readyz"))
            .timeout(self.policy.attempt_timeout);
        match send(builder).await {
            Ok(answer) if answer.status == 200 => Ok(true),
            Ok(answer) if answer.status == 503 => Ok(false),
            Ok(answer) => Err(Error::Unexpected {
                status: answer.status,
                body: answer.excerpt(),
                attempts: 1,
            }),
            Err(error) => Err(Error::Unavailable {
                last: failure(&error).to_string(),
                attempts: 1,
            }),
        }
    }

    /// A GET with the retry policy: transport errors, `429` and `5xx` are
    /// retried (a read is safe to repeat); other answers are final. Returns
    /// the value and the number of attempts.
    pub(super) async fn read<T: DeserializeOwned>(
        &self,
        url: Url,
        auth: bool,
    ) -> Result<(T, u32), Error> {
        self.call(Method::GET, url, auth).await
    }

    /// A request without a body that is safe to repeat (a GET, or a DELETE
    /// whose repeat changes nothing), with the retry loop of [`Client::read`]:
    /// a `200` is the value; transport errors, `429` and `5xx` are retried;
    /// other answers are final.
    pub(super) async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        url: Url,
        auth: bool,
    ) -> Result<(T, u32), Error> {
        let deadline = Instant::now() + self.policy.budget;
        let mut number = 0_u32;
        loop {
            number += 1;
            let timeout = self
                .policy
                .attempt_timeout
                .min(deadline.saturating_duration_since(Instant::now()));
            let mut builder = self
                .http
                .request(method.clone(), url.clone())
                .timeout(timeout);
            if auth {
                builder = builder.basic_auth(&self.shop, Some(&self.secret));
            }
            let (last, retry_after) = match send(builder).await {
                Ok(answer) if answer.status == 200 => {
                    return serde_json::from_slice::<T>(&answer.body)
                        .map(|value| (value, number))
                        .map_err(|e| Error::Unexpected {
                            status: answer.status,
                            body: format!("{e}: {}", answer.excerpt()),
                            attempts: number,
                        });
                }
                Ok(answer) if transient(answer.status) => {
                    let what = answer.seen(None, answer.problem().as_ref()).to_string();
                    (what, answer.retry_after())
                }
                Ok(answer) => {
                    return Err(match answer.problem() {
                        Some(problem) => Error::Rejected {
                            problem: Box::new(problem),
                            attempts: number,
                        },
                        None => Error::Unexpected {
                            status: answer.status,
                            body: answer.excerpt(),
                            attempts: number,
                        },
                    });
                }
                Err(error) => (failure(&error).to_string(), None),
            };
            let delay = self.policy.delay(number, retry_after);
            if number >= self.policy.max_attempts || Instant::now() + delay >= deadline {
                return Err(Error::Unavailable {
                    last,
                    attempts: number,
                });
            }
            tokio::time::sleep(delay).await;
        }
    }
}
