//! Why a call failed. A payment whose outcome is unknown is never an error:
//! it is [`Outcome::Uncertain`](crate::Outcome::Uncertain).

use crate::Problem;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `422 idempotency_key_reused`: this key was first used for another
    /// request (another amount, order or token). A bug in the caller: one key
    /// names one operation. Nothing was executed; the first request is
    /// untouched. Never retried, and never "fixed" with a fresh key: find out
    /// why the same operation was sent with other parameters.
    #[error(
        "the idempotency key was first used for a different request (a client bug; nothing was executed): {problem}"
    )]
    KeyReused {
        /// The server's problem document.
        problem: Box<crate::Problem>,
        /// Attempts made.
        attempts: u32,
    },
    /// The order already has a payment (succeeded, or pending) for another
    /// amount or currency: the server's `409 order_already_paid`, or an
    /// answer (or, for [`Client::pay_order`](crate::Client::pay_order), a
    /// look-up) whose payment is not the one asked for. Nothing was charged
    /// for this request. Never "paid": the cart and the payment disagree,
    /// and a person must look (refund the other payment, or charge the
    /// difference under a new order). Never retried.
    #[error(
        "order {} already has a {} payment {} of {} {}: not the one asked for",
        payment.reference,
        payment.status.as_str(),
        payment.id,
        payment.amount.to_decimal_string(),
        payment.amount.currency().code()
    )]
    OrderAlreadyPaid {
        /// The order's payment.
        payment: Box<crate::Payment>,
        /// The server's problem document, when the server said so.
        problem: Option<Box<Problem>>,
        /// Attempts made (`0`: found by `pay_order`'s look-up).
        attempts: u32,
    },
    /// The request was refused before anything executed (400, 401, 404, 405,
    /// 413, 415, 422): fix it; retrying the same bytes would get the same answer.
    ///
    /// A refusal describes the attempt that got it. If an earlier attempt of
    /// the same call lost its answer (see the key's payment, or
    /// `GET /v1/payments?reference=`), that attempt may still have executed:
    /// fix the cause and retry under the same key.
    #[error("the request was refused: {problem}")]
    Rejected {
        /// The server's problem document.
        problem: Box<Problem>,
        /// Attempts made.
        attempts: u32,
    },
    /// An answer that is neither the API's resource nor its problem document
    /// (a proxy's error page, an unexpected status).
    #[error("unexpected answer {status}: {body}")]
    Unexpected {
        /// The status code.
        status: u16,
        /// The start of the body.
        body: String,
        /// Attempts made.
        attempts: u32,
    },
    /// A read (not a payment) got no usable answer within the budget.
    #[error("no answer within the retry budget after {attempts} attempts: {last}")]
    Unavailable {
        /// The last attempt's failure.
        last: String,
        /// Attempts made.
        attempts: u32,
    },
    /// The client could not be built (a bad base URL, credentials that cannot
    /// be sent in a header, a TLS stack that fails to start).
    #[error("client configuration: {0}")]
    Config(String),
}

impl Error {
    /// The problem document, for errors that carry one.
    pub fn problem(&self) -> Option<&Problem> {
        match self {
            Self::KeyReused { problem, .. } | Self::Rejected { problem, .. } => Some(problem),
            Self::OrderAlreadyPaid { problem, .. } => problem.as_deref(),
            _ => None,
        }
    }

    /// The error's stable code: its problem's, or `order_already_paid` for
    /// [`Error::OrderAlreadyPaid`] however it was found.
    pub fn code(&self) -> Option<crate::problem::Code> {
        match self {
            Self::OrderAlreadyPaid { .. } => Some(crate::problem::Code::Known(
                crate::ProblemCode::OrderAlreadyPaid,
            )),
            _ => self.problem().map(|p| p.code.clone()),
        }
    }

    /// How many attempts the call made before it failed.
    pub fn attempts(&self) -> u32 {
        match self {
            Self::KeyReused { attempts, .. }
            | Self::OrderAlreadyPaid { attempts, .. }
            | Self::Rejected { attempts, .. }
            | Self::Unexpected { attempts, .. }
            | Self::Unavailable { attempts, .. } => *attempts,
            Self::Config(_) => 0,
        }
    }
}
