"""Topic patterns of v2 subscriptions (``core.broker.group.topics``): what is refused and
why, and that no accepted pattern can take long to match."""

from __future__ import annotations

import pytest

from core.broker.group.topics import (
    MAX_TOPIC_PATTERN_LENGTH,
    compile_topic_pattern,
    linear_engine_available,
    match_topics,
)
from core.errors import InvalidRequestError

ENGINES = [pytest.param(False, id="re")] + (
    [pytest.param(True, id="re2")] if linear_engine_available() else [])

COMMON = [
    ("topic-.*", ["topic-a", "topic-", "topic"], ["topic-a", "topic-"]),
    (r"orders\..+", ["orders.eu", "orders.", "ordersXeu"], ["orders.eu"]),
    ("(a|b)-[0-9]+", ["a-1", "b-22", "c-1", "a-"], ["a-1", "b-22"]),
    ("(?i)logs-.*", ["LOGS-x", "logs-y"], ["LOGS-x", "logs-y"]),
    ("events-v[0-9]{1,3}", ["events-v1", "events-v1000"], ["events-v1"]),
    ("(dev|prod)\\.orders", ["dev.orders", "prod.orders", "qa.orders"],
     ["dev.orders", "prod.orders"]),
]


@pytest.mark.parametrize("linear", ENGINES)
@pytest.mark.parametrize(("pattern", "topics", "matched"), COMMON)
def test_common_java_patterns_match_as_java_matches_does(
    linear: bool, pattern: str, topics: list[str], matched: list[str]
) -> None:
    matches = compile_topic_pattern(pattern, linear=linear)
    assert [t for t in topics if matches(t)] == matched


@pytest.mark.parametrize("linear", ENGINES)
@pytest.mark.parametrize(("pattern", "why"), [
    (r"(a)\1", "a backreference is not supported"),
    ("(?P<x>a)(?P=x)", "a backreference is not supported"),
    ("(?=a)a.*", "a lookahead or lookbehind is not supported"),
    ("(?<!x)a", "a negative lookahead or lookbehind is not supported"),
    ("a*+", "a possessive quantifier is not supported"),
    ("(?>a+)b", "an atomic group is not supported"),
    ("(a)?(?(1)b|c)", "a conditional group is not supported"),
    ("[a-", "unterminated character set"),
    ("x" * (MAX_TOPIC_PATTERN_LENGTH + 1), f"at most {MAX_TOPIC_PATTERN_LENGTH} are allowed"),
])
def test_constructs_no_linear_engine_runs_are_refused_naming_them(
    linear: bool, pattern: str, why: str
) -> None:
    with pytest.raises(InvalidRequestError) as err:
        compile_topic_pattern(pattern, linear=linear)
    assert err.value.message.startswith("Invalid topic pattern") and why in err.value.message


@pytest.mark.parametrize(("pattern", "why"), [
    ("(a+)+$", "nested quantifiers"),
    ("(a*)*b", "nested quantifiers"),
    ("(a{1,2})+", "nested quantifiers"),
    ("(x*){40}y", "nested quantifiers"),
    ("(a|ab)+c", "an alternation under a quantifier"),
    ("a*a*a*b", "3 variable quantifiers"),
    ("a?" * 25 + "a" * 25, "25 variable quantifiers"),
])
def test_without_re2_backtracking_patterns_are_refused(pattern: str, why: str) -> None:
    with pytest.raises(InvalidRequestError) as err:
        compile_topic_pattern(pattern, linear=False)
    assert why in err.value.message


@pytest.mark.skipif(not linear_engine_available(), reason="google-re2 is not installed")
def test_with_re2_catastrophic_patterns_are_accepted_and_match_in_linear_time() -> None:
    names = ["a" * n + "!" for n in range(200, 249)] + ["a" * 249]
    assert match_topics("(a+)+", names) == ("a" * 249,)
    assert match_topics("(a|aa)*a*a*a*b", names) == ()


def test_a_stored_pattern_now_refused_matches_nothing() -> None:
    assert match_topics(r"(t)\1", ["tt", "t"]) == ()


def test_internal_topics_are_never_matched() -> None:
    assert match_topics(".*", ["__consumer_offsets", "a"]) == ("a",)
