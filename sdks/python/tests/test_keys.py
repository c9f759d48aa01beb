"""The same vectors as crates/core/src/key.rs."""
import pytest

from chargeonce import IdempotencyKey, InvalidKey


def test_keys_come_from_the_operation() -> None:
    pay = IdempotencyKey.for_operation("order-123", "pay")
    assert pay.value == "order-123-pay"
    assert IdempotencyKey.for_operation("order-123", "refund-1").value == "order-123-refund-1"
    assert pay == IdempotencyKey.for_operation("order-123", "pay")
    assert pay != IdempotencyKey.for_operation("order-124", "pay")


def test_operation_keys_encode_what_a_key_cannot_hold() -> None:
    key = IdempotencyKey.for_operation("order 7", "pay")
    assert key.value == "order%207-pay"
    literal = IdempotencyKey.for_operation("order%207", "pay")
    assert literal.value == "order%25207-pay"
    assert key != literal
    assert IdempotencyKey.for_operation("заказ", "pay").value == "%D0%B7%D0%B0%D0%BA%D0%B0%D0%B7-pay"
    assert IdempotencyKey.for_operation("заказ 7", "pay").value == "%D0%B7%D0%B0%D0%BA%D0%B0%D0%B7%207-pay"
    with pytest.raises(InvalidKey) as empty:
        IdempotencyKey.for_operation("", "pay")
    assert empty.value.reason == "empty"
    with pytest.raises(InvalidKey):
        IdempotencyKey.for_operation("order-1", "")
    with pytest.raises(InvalidKey) as long:
        IdempotencyKey.for_operation("x" * 252, "pay")
    assert long.value.reason == "too_long" and "256" in str(long.value)
    assert len(IdempotencyKey.for_operation("x" * 251, "pay").value) == 255


def test_random_keys_are_valid_and_distinct() -> None:
    a = IdempotencyKey.random_for_this_process_only()
    b = IdempotencyKey.random_for_this_process_only()
    assert a != b
    assert a.value.startswith("rnd-") and len(a.value) == 36
    assert IdempotencyKey(a.value) == a


def test_plain_keys_are_validated_and_never_printed() -> None:
    for bad in ["", "a b", "a\0b", "x" * 256, "ключ"]:
        with pytest.raises(InvalidKey):
            IdempotencyKey(bad)
    key = IdempotencyKey("order-123-pay")
    assert "order-123" not in repr(key) and "order-123" not in str(key)
    assert len(key.log_id()) == 12
