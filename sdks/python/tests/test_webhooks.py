import pytest

from chargeonce import webhooks
from chargeonce.webhooks import SignatureError, sign, verify

SECRET = "whsec_test"
BODY = b'{"id":"evt_1"}'


def test_sign_and_verify_like_the_server() -> None:
    header = sign(SECRET, 1_700_000_000, BODY)
    assert header.startswith("t=1700000000,v1=") and len(header.split("v1=")[1]) == 64
    verify(SECRET, header, BODY, now=1_700_000_100)


def test_a_known_vector() -> None:
    import hashlib
    import hmac

    expected = hmac.new(b"whsec_test", b"1700000000." + BODY, hashlib.sha256).hexdigest()
    assert sign(SECRET, 1_700_000_000, BODY) == f"t=1700000000,v1={expected}"


@pytest.mark.parametrize(
    "header,body,now,reason",
    [
        (sign(SECRET, 1_700_000_000, BODY), b"{}", 1_700_000_100, "mismatch"),
        (sign("whsec_other", 1_700_000_000, BODY), BODY, 1_700_000_100, "mismatch"),
        (sign(SECRET, 1_700_000_000, BODY), BODY, 1_700_000_400, "outside_tolerance"),
        (sign(SECRET, 1_700_000_000, BODY), BODY, 1_699_999_600, "outside_tolerance"),
        ("v1=" + "0" * 64, BODY, 1_700_000_000, "malformed"),
        ("t=1700000000", BODY, 1_700_000_000, "malformed"),
        ("t=1700000000,v1=abc", BODY, 1_700_000_000, "malformed"),
        ("t=1,t=2,v1=" + "0" * 64, BODY, 1, "malformed"),
        ("garbage", BODY, 1, "malformed"),
        ("t=1700000000," + ",".join(["v1=" + "0" * 64] * 9), BODY, 1_700_000_000, "malformed"),
    ],
)
def test_refusals(header: str, body: bytes, now: int, reason: str) -> None:
    with pytest.raises(SignatureError) as error:
        verify(SECRET, header, body, now=now)
    assert error.value.reason == reason


def test_several_signatures_during_a_rotation_and_other_schemes_ignored() -> None:
    good = sign(SECRET, 1_700_000_000, BODY).split(",")[1]
    old = sign("whsec_old", 1_700_000_000, BODY).split(",")[1]
    verify(SECRET, f"t=1700000000, {old}, v0=whatever, {good}", BODY, now=1_700_000_000)
    assert webhooks.construct_event(SECRET, f"t=1700000000,{good}", BODY, now=1_700_000_000) == {"id": "evt_1"}
    with pytest.raises(SignatureError):
        verify(SECRET, None, BODY)
