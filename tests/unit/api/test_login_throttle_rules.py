"""The failed-login throttle (api.security.login_throttle) on a manual clock."""

from __future__ import annotations

from api.security.login_throttle import MAX_KEY_CHARS, LoginThrottle
from core.broker.admin.broker_config import BrokerConfig
from core.clock import ManualClock


def throttle(**kwargs: int) -> tuple[LoginThrottle, ManualClock]:
    clock = ManualClock()
    options = {"max_failures": 5, "max_address_failures": 20, "window_ms": 60_000,
               "lockout_ms": 60_000, "tracked_max": 100, **kwargs}
    return LoginThrottle(clock=clock, **options), clock


def fail(t: LoginThrottle, user: str | None, host: str, times: int = 1) -> None:
    for _ in range(times):
        assert t.retry_after(user, host, "wrong") == 0
        t.failed(user, host)


def test_the_defaults_come_from_the_broker_properties() -> None:
    t = LoginThrottle.from_config(BrokerConfig.from_properties({}))
    assert (t.principals.limit, t.addresses.limit, t.principals.window_s,
            t.principals.lockout_s, t.principals.cap) == (5, 20, 60.0, 60.0, 10_000)
    t = LoginThrottle.from_config(BrokerConfig.from_properties(
        {"authentication.failures.max": "2", "authentication.failures.lockout.ms": "1500"}))
    assert (t.principals.limit, t.principals.lockout_s) == (2, 1.5)
    assert LoginThrottle.from_config(None).principals.limit == 5  # a stand-in broker


def test_the_fifth_failure_locks_the_principal_from_any_address() -> None:
    t, clock = throttle()
    for i in range(4):
        fail(t, "alice", f"10.0.0.{i}")
    assert t.retry_after("alice", "10.0.0.9", "right") == 0
    fail(t, "alice", "10.0.0.4")
    assert t.retry_after("alice", "10.0.0.9", "right") == 60
    clock.advance(59_500)
    assert t.retry_after("alice", "10.0.0.9", "right") == 1
    assert t.throttled == 2 and t.failures == 5
    assert t.retry_after("bob", "10.0.0.4", "right") == 0  # another principal: not slowed
    clock.advance(500)
    assert t.retry_after("alice", "10.0.0.9", "right") == 0  # the lock is over


def test_after_a_lock_the_count_starts_afresh() -> None:
    t, clock = throttle()
    fail(t, "alice", "h", 5)
    clock.advance(60_000)
    fail(t, "alice", "h", 4)
    assert t.retry_after("alice", "h", "x") == 0


def test_failures_outside_the_window_are_forgotten() -> None:
    t, clock = throttle()
    fail(t, "alice", "h", 4)
    clock.advance(60_000)
    fail(t, "alice", "h", 4)
    assert t.retry_after("alice", "h", "x") == 0
    fail(t, "alice", "h")
    assert t.retry_after("alice", "h", "x") > 0


def test_a_success_resets_the_principal_not_the_address() -> None:
    t, _ = throttle(max_address_failures=6)
    fail(t, "alice", "h", 4)
    t.succeeded("alice")
    fail(t, "alice", "h", 1)
    assert t.retry_after("alice", "other", "x") == 0
    fail(t, "bob", "h", 1)  # the sixth failure from h
    assert t.retry_after("carol", "h", "right") == 60
    assert t.retry_after("carol", "elsewhere", "right") == 0


def test_spraying_many_users_from_one_address_locks_the_address() -> None:
    t, _ = throttle()
    for i in range(20):
        fail(t, f"user{i}", "6.6.6.6")
    assert t.retry_after("someone-new", "6.6.6.6", "x") == 60
    assert t.retry_after(None, "6.6.6.6") == 60  # malformed credentials too
    assert t.retry_after("someone-new", "1.2.3.4", "x") == 0


def test_malformed_credentials_count_against_the_address() -> None:
    t, _ = throttle(max_address_failures=3)
    fail(t, None, "h", 3)
    assert t.retry_after("alice", "h", "right") == 60
    assert not t.principals.entries


def test_zero_turns_a_limit_off() -> None:
    t, _ = throttle(max_failures=0, max_address_failures=0)
    fail(t, "alice", "h", 100)
    assert t.retry_after("alice", "h", "x") == 0
    assert t.failures == 100 and not t.principals.entries and not t.addresses.entries


def test_parallel_checks_of_different_secrets_count_against_the_limit() -> None:
    t, _ = throttle(max_failures=3)
    tokens = [t.token("alice", f"guess{i}") for i in range(3)]
    for token in tokens:
        t.begin("alice", "h", token)
    assert t.retry_after("alice", "h", "guess3") == 1  # three guesses already in flight
    # the same secret as one being checked: one client's parallel first connections
    assert t.retry_after("alice", "h", "guess0") == 0
    for token in tokens:
        t.end("alice", "h", token)
    assert not t.principals.inflight and not t.addresses.inflight
    assert t.retry_after("alice", "h", "guess3") == 0


def test_tracked_keys_are_capped_oldest_first() -> None:
    t, _ = throttle(tracked_max=10, max_address_failures=1_000)
    for i in range(50):
        fail(t, f"user{i}", "h")
    assert len(t.principals.entries) == 10
    assert list(t.principals.entries)[0] == "user40"


def test_long_names_are_kept_as_digests() -> None:
    t, _ = throttle()
    name = "a" * 4000
    fail(t, name, "h", 5)
    (key,) = t.principals.entries
    assert key.startswith("sha256:") and len(key) < MAX_KEY_CHARS
    assert t.retry_after(name, "other", "x") == 60
    assert t.retry_after("a" * 3999, "other", "x") == 0
