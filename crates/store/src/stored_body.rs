//! The stored form of a body the service keeps byte for byte: an answer it
//! replays (`idempotency_keys.response_body`) and a merchant event it
//! delivers (`events.payload`), in both stores.
//!
//! Why: these bodies are the largest part of what a payment writes (issue
//! 38: a fresh payment's answer is 562 bytes of JSON in the key row, its
//! event 298 bytes), and they are JSON the service wrote itself, with the
//! same names and shapes every time. zstd with a dictionary of such bodies
//! (`dictionaries/bodies-v1.json`, built once from real answers and events)
//! stores a payment's answer in about a quarter of its bytes.
//!
//! PostgreSQL stores them compressed ([`compressed`]): there every byte of a
//! row is WAL that PostgreSQL checksums, writes and ships to its replicas,
//! and PostgreSQL's CPU is the payment's bottleneck, not the server's (the
//! zstd call costs the server about 5 us a body). SQLite stores them as they
//! are ([`uncompressed`]): its WAL is whole 4 KiB pages, which a smaller
//! row barely changes (5 % fewer bytes a payment in `bench/ab`), while its
//! one writer thread, whose CPU is the bottleneck, would pay for the calls
//! (`bench/instructions`: 11 % of a fresh payment's instructions). Both read
//! either form.
//!
//! The stored form says how to read it back by its first byte:
//!
//! - [`ZSTD_BODIES_V1`]: a zstd frame compressed with dictionary v1;
//! - [`RAW`]: the body itself follows;
//! - anything else: the whole value is the body, as every store wrote before
//!   this form existed (a JSON text starts with `{` or `[`, never with a
//!   byte below a space; an empty body is stored empty).
//!
//! So rows written before stay readable as they are, a body is compressed
//! only when that saves bytes, and a body that would start with a tag byte
//! is tagged [`RAW`] rather than misread. A dictionary's bytes never change:
//! a new one gets a tag of its own, and the old tag stays readable.

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::LazyLock;

use chargeonce_core::StoreError;
use zstd::bulk::{Compressor, Decompressor};
use zstd::dict::{DecoderDictionary, EncoderDictionary};

/// Tag: the body follows as it is.
const RAW: u8 = 0x00;
/// Tag: a zstd frame, compressed with [`DICTIONARY_V1`], follows.
const ZSTD_BODIES_V1: u8 = 0x01;

/// Dictionary v1: answers and events of payments, refunds and captures,
/// and problem documents, most common last (zstd reaches the end of a
/// dictionary most cheaply). Never edit it: stored bodies depend on it.
const DICTIONARY_V1: &[u8] = include_bytes!("../dictionaries/bodies-v1.json");

/// zstd's level for these bodies: at a few hundred bytes with a
/// dictionary, higher levels save a byte or two for more CPU (level 3 stored
/// a payment's answer in 124 bytes, level 1 in 122).
const LEVEL: i32 = 1;

/// The largest body a stored frame may claim to hold. The service stores
/// bodies it wrote itself (the request limits keep them far below this);
/// a frame that claims more is corrupt, and is not inflated to find out.
const MAX_BODY: usize = 4 << 20;

static ENCODER_V1: LazyLock<EncoderDictionary<'static>> =
    LazyLock::new(|| EncoderDictionary::copy(DICTIONARY_V1, LEVEL));
static DECODER_V1: LazyLock<DecoderDictionary<'static>> =
    LazyLock::new(|| DecoderDictionary::copy(DICTIONARY_V1));

thread_local! {
    // One context per thread, reused: making one allocates its tables.
    static COMPRESSOR: RefCell<Option<Compressor<'static>>> = const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<Decompressor<'static>>> = const { RefCell::new(None) };
}

/// The stored form of `body`: compressed when that is smaller, otherwise
/// [`uncompressed`].
pub(crate) fn compressed(body: &[u8]) -> Cow<'_, [u8]> {
    if let Some(frame) = compress(body)
        && frame.len() + 1 < body.len()
    {
        return Cow::Owned(tagged(ZSTD_BODIES_V1, &frame));
    }
    uncompressed(body)
}

/// The stored form of `body` as it is: the body itself, tagged only when
/// its first byte is a tag.
pub(crate) fn uncompressed(body: &[u8]) -> Cow<'_, [u8]> {
    match body.first() {
        Some(&first) if first <= ZSTD_BODIES_V1 => Cow::Owned(tagged(RAW, body)),
        _ => Cow::Borrowed(body),
    }
}

/// The body a stored value holds (the inverse of [`compressed`] and
/// [`uncompressed`]).
pub(crate) fn decode(stored: Vec<u8>) -> Result<Vec<u8>, StoreError> {
    match stored.first() {
        Some(&RAW) => Ok(stored[1..].to_vec()),
        Some(&ZSTD_BODIES_V1) => decompress(&stored[1..]),
        _ => Ok(stored),
    }
}

fn tagged(tag: u8, bytes: &[u8]) -> Vec<u8> {
    let mut stored = Vec::with_capacity(bytes.len() + 1);
    stored.push(tag);
    stored.extend_from_slice(bytes);
    stored
}

/// The body as a zstd frame with dictionary v1, or `None` when zstd
/// failed (the body is then stored as it is: storing an answer never
/// fails for want of compressing it).
fn compress(body: &[u8]) -> Option<Vec<u8>> {
    if body.is_empty() {
        return None;
    }
    COMPRESSOR.with_borrow_mut(|slot| {
        if slot.is_none() {
            *slot = Compressor::with_prepared_dictionary(&ENCODER_V1).ok();
        }
        slot.as_mut()?.compress(body).ok()
    })
}

fn decompress(frame: &[u8]) -> Result<Vec<u8>, StoreError> {
    let size = match zstd::zstd_safe::get_frame_content_size(frame) {
        Ok(Some(size)) => usize::try_from(size).unwrap_or(usize::MAX),
        _ => return Err(StoreError::corrupt("stored body: not a whole zstd frame")),
    };
    if size > MAX_BODY {
        return Err(StoreError::corrupt(format!(
            "stored body: its frame claims {size} bytes"
        )));
    }
    DECOMPRESSOR.with_borrow_mut(|slot| {
        if slot.is_none() {
            *slot = Some(
                Decompressor::with_prepared_dictionary(&DECODER_V1)
                    .map_err(|e| StoreError::other(format!("zstd: {e}")))?,
            );
        }
        let Some(decompressor) = slot.as_mut() else {
            return Err(StoreError::other("zstd: no decompressor"));
        };
        let body = decompressor
            .decompress(frame, size)
            .map_err(|e| StoreError::corrupt(format!("stored body: {e}")))?;
        if body.len() == size {
            Ok(body)
        } else {
            Err(StoreError::corrupt(
                "stored body: shorter than its frame says",
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAYMENT: &[u8] = br#"{"id":"pay_01a24cc0f6a87a3b8e0f9d1e2c3b4a59","object":"payment","livemode":true,"shop_id":"bench","status":"succeeded","amount":{"value":"42.17","currency":"RUB"},"reference":"order-7781","provider_payment_id":"ch_01a24cc0f6b17c2d9e8f7a6b5c4d3e21","decline_code":null,"created_at":"2026-12-06T19:12:01.004Z","amount_refunded":{"value":"0.00","currency":"RUB"},"refund_status":"none","metadata":{},"capture_method":"automatic","amount_capturable":{"value":"0.00","currency":"RUB"},"amount_captured":{"value":"42.17","currency":"RUB"},"authorization_expires_at":null}"#;

    fn round_trip(body: &[u8]) -> Vec<u8> {
        let stored = compressed(body).into_owned();
        let back = decode(stored.clone()).expect("decodes");
        assert_eq!(back, body, "stored as {stored:?}");
        let plain = uncompressed(body).into_owned();
        assert_eq!(decode(plain).expect("decodes"), body);
        stored
    }

    #[test]
    fn a_payment_answer_is_stored_in_a_fraction_of_its_bytes() {
        let stored = round_trip(PAYMENT);
        eprintln!("{} bytes stored for {}", stored.len(), PAYMENT.len());
        assert_eq!(stored[0], ZSTD_BODIES_V1);
        assert!(
            stored.len() * 4 < PAYMENT.len(),
            "{} bytes stored for {}",
            stored.len(),
            PAYMENT.len()
        );
    }

    #[test]
    fn bodies_that_do_not_shrink_are_stored_as_they_are() {
        assert_eq!(round_trip(b""), b"");
        assert_eq!(round_trip(b"{}"), b"{}");
        // A body starting with a tag byte is tagged raw, not misread.
        assert_eq!(round_trip(&[RAW, b'x']), vec![RAW, RAW, b'x']);
        assert_eq!(round_trip(&[ZSTD_BODIES_V1]), vec![RAW, ZSTD_BODIES_V1]);
    }

    #[test]
    fn rows_written_before_the_tags_read_as_they_are() {
        assert_eq!(decode(PAYMENT.to_vec()).expect("decodes"), PAYMENT);
        // A JSON body is stored uncompressed as it is: the form of old rows.
        assert!(matches!(uncompressed(PAYMENT), Cow::Borrowed(b) if b == PAYMENT));
    }

    #[test]
    fn a_damaged_frame_is_corrupt_not_a_body() {
        let mut stored = compressed(PAYMENT).into_owned();
        stored.truncate(stored.len() - 4);
        assert!(matches!(decode(stored), Err(StoreError::Corrupt { .. })));
        assert!(matches!(
            decode(vec![ZSTD_BODIES_V1, 1, 2, 3]),
            Err(StoreError::Corrupt { .. })
        ));
    }

    #[test]
    fn the_dictionary_is_the_one_stored_bodies_were_written_with() {
        // Stored bodies depend on these exact bytes (see DICTIONARY_V1).
        assert_eq!(DICTIONARY_V1.len(), 3736);
        let sum = DICTIONARY_V1.iter().fold(0u64, |sum, &b| {
            sum.wrapping_mul(31).wrapping_add(u64::from(b))
        });
        assert_eq!(sum, EXPECTED_SUM);
    }

    const EXPECTED_SUM: u64 = 11_467_694_487_164_307_706;
}
