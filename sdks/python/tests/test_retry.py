import email.utils

from chargeonce import RetryPolicy, is_transient, parse_retry_after


def test_backoff_grows_exponentially_to_a_cap() -> None:
    policy = RetryPolicy(base_delay=0.1, max_delay=1.0)
    assert [round(policy.ceiling(n), 3) for n in (1, 2, 3, 4, 5, 50)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]


def test_full_jitter_stays_under_the_ceiling_and_honours_retry_after() -> None:
    policy = RetryPolicy(base_delay=0.1, max_delay=1.0)
    seen = {round(policy.delay(3, None), 4) for _ in range(200)}
    assert all(0 <= d <= 0.4 for d in seen)
    assert len(seen) > 10
    assert all(policy.delay(1, 2.0) >= 2.0 for _ in range(50))
    assert policy.delay(3, None, rng=lambda lo, hi: hi) == 0.4


def test_retry_after_seconds_and_dates() -> None:
    now = 1_000_000_000.0
    assert parse_retry_after("3", now) == 3
    assert parse_retry_after(" 0 ", now) == 0
    assert parse_retry_after(email.utils.formatdate(now + 7, usegmt=True), now) == 7
    assert parse_retry_after(email.utils.formatdate(now - 7, usegmt=True), now) == 0
    assert parse_retry_after("soon", now) is None
    assert parse_retry_after("-1", now) is None


def test_prefer_wait_fits_inside_the_attempt() -> None:
    policy = RetryPolicy(prefer_wait=10)
    assert policy.prefer_seconds(20) == 10
    assert policy.prefer_seconds(4) == 3
    assert policy.prefer_seconds(1.5) is None
    assert RetryPolicy(prefer_wait=None).prefer_seconds(20) is None


def test_transient_statuses() -> None:
    for status in (408, 409, 425, 429, 500, 502, 503, 504):
        assert is_transient(status)
    for status in (200, 201, 202, 400, 401, 402, 404, 413, 415, 422):
        assert not is_transient(status)
