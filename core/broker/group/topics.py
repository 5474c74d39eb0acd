"""What groups need to know about topics: pattern subscriptions, partition counts and
whether partitions exist, asked of the :class:`GroupBackend`.

Topic patterns (v2 ``subscription`` with ``topic_pattern``) are matched against every
topic name on each rebalance and metadata refresh, on the event loop, so a pattern must
never take long: ``compile_topic_pattern`` is the one gate (``InvalidRequestError``,
400 / 40002 over REST, naming the problem).

- At most ``MAX_TOPIC_PATTERN_LENGTH`` characters.
- Java-regex syntax as Python's ``re`` parses it (they agree on what topic patterns use:
  ``topic-.*``, ``orders\\..+``, ``(a|b)-[0-9]+``, classes, ``{m,n}``, ``(?i)``).
- No backreferences, lookahead/lookbehind, conditionals, possessive quantifiers or
  atomic groups: a linear-time engine cannot run them.
- With the ``google-re2`` package installed (module ``re2``) patterns run on RE2, in
  time linear in the topic name whatever the pattern, so ``(a+)+$`` is harmless.
  Without it Python's backtracking ``re`` runs them, and patterns that can backtrack
  badly are refused as well: nested quantifiers (``(a+)+``, ``(a{1,2})*``), an
  alternation under a quantifier (``(a|ab)+``) and more than
  ``MAX_BACKTRACKING_QUANTIFIERS`` variable quantifiers (``a*a*a*a*``, polynomial).
"""

from __future__ import annotations

import functools
import logging
import re
import re._constants as sre_c  # type: ignore[import-not-found]
import re._parser as sre_parse  # type: ignore[import-not-found]
from collections.abc import Callable, Iterable
from typing import Any

from core.broker.errors import UnknownTopicOrPartitionError
from core.broker.group.backend import GroupBackend
from core.broker.types import TopicPartition, is_internal_topic
from core.errors import InvalidRequestError

try:  # linear-time matching (RE2) when the google-re2 wheel is installed
    import re2 as _re2  # type: ignore[import-untyped, import-not-found, unused-ignore]
except ImportError:  # pragma: no cover - depends on the environment
    _re2 = None

log = logging.getLogger(__name__)

#: Longest topic pattern accepted (characters). Topic names are at most 249 characters;
#: a pattern listing dozens of them explicitly still fits.
MAX_TOPIC_PATTERN_LENGTH = 1024
#: Without RE2: most variable quantifiers (``*``, ``+``, ``?``, ``{m,n}``) in one pattern.
MAX_BACKTRACKING_QUANTIFIERS = 2

Matcher = Callable[[str], Any]

_UNSUPPORTED = {
    sre_c.GROUPREF: "a backreference",
    sre_c.GROUPREF_EXISTS: "a conditional group",
    sre_c.ASSERT: "a lookahead or lookbehind",
    sre_c.ASSERT_NOT: "a negative lookahead or lookbehind",
    sre_c.ATOMIC_GROUP: "an atomic group",
    sre_c.POSSESSIVE_REPEAT: "a possessive quantifier",
}
_REPEATS = (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT)


def linear_engine_available() -> bool:
    """Whether patterns run on RE2 (the ``google-re2`` package is installed)."""
    return _re2 is not None


def compile_topic_pattern(pattern: str, *, linear: bool | None = None) -> Matcher:
    """A full-match function for ``pattern`` (Java's ``Pattern.matches``), or
    InvalidRequestError naming why the pattern is refused (see the module doc).
    ``linear``: run on RE2 (default: when installed); False forces Python's ``re``."""
    if not isinstance(pattern, str):
        raise InvalidRequestError("Invalid topic pattern: it must be a string")
    use_re2 = linear_engine_available() if linear is None else linear and _re2 is not None
    return _compile(pattern, use_re2)


@functools.lru_cache(maxsize=1024)
def _compile(pattern: str, use_re2: bool) -> Matcher:
    if len(pattern) > MAX_TOPIC_PATTERN_LENGTH:
        raise InvalidRequestError(
            f"Invalid topic pattern: {len(pattern)} characters, at most "
            f"{MAX_TOPIC_PATTERN_LENGTH} are allowed")
    shown = repr(pattern)
    try:
        tree = sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        raise InvalidRequestError(f"Invalid topic pattern {shown}: {exc}") from None
    problem = _unsupported(tree)
    if problem is None and not use_re2:
        problem = _backtracking_problem(tree)
    if problem is not None:
        raise InvalidRequestError(f"Invalid topic pattern {shown}: {problem}")
    if use_re2:
        assert _re2 is not None
        try:
            return _re2.compile(pattern).fullmatch  # type: ignore[no-any-return]
        except Exception as exc:  # noqa: BLE001  (re2.error: syntax RE2 does not take)
            raise InvalidRequestError(
                f"Invalid topic pattern {shown}: {exc}; franz matches patterns with RE2 "
                f"syntax, which covers Java's common constructs") from None
    try:
        return re.compile(pattern).fullmatch
    except (re.error, RecursionError, OverflowError) as exc:
        raise InvalidRequestError(f"Invalid topic pattern {shown}: {exc}") from None


def _children(op: Any, av: Any) -> list[Any]:
    """The sub-patterns directly under one parse-tree node."""
    if op in _REPEATS or op is sre_c.POSSESSIVE_REPEAT:
        return [av[2]]
    if op is sre_c.SUBPATTERN:
        return [av[3]]
    if op is sre_c.BRANCH:
        return list(av[1])
    if op in (sre_c.ASSERT, sre_c.ASSERT_NOT):
        return [av[1]]
    if op is sre_c.ATOMIC_GROUP:
        return [av]
    if op is sre_c.GROUPREF_EXISTS:
        return [b for b in av[1:] if b is not None]
    return []


def _nodes(tree: Any) -> Iterable[tuple[Any, Any]]:
    stack = [tree]
    while stack:
        for op, av in stack.pop():
            yield op, av
            stack.extend(_children(op, av))


def _unsupported(tree: Any) -> str | None:
    for op, _ in _nodes(tree):
        if op in _UNSUPPORTED:
            return f"{_UNSUPPORTED[op]} is not supported (patterns are matched in linear time)"
    return None


def _variable(op: Any, av: Any) -> bool:
    return op in _REPEATS and av[0] != av[1]


def _backtracking_problem(tree: Any) -> str | None:
    count = 0
    for op, av in _nodes(tree):
        if op not in _REPEATS:
            continue
        count += av[0] != av[1]
        if av[1] <= 1:
            continue
        for inner_op, inner_av in _nodes(av[2]):
            if _variable(inner_op, inner_av):  # also under a fixed count: (a*){50}
                return ("nested quantifiers such as (a+)+ can take exponential time "
                        "to match; quantify a single item, as in (a|b)+ or [ab]+")
            if inner_op is sre_c.BRANCH and av[0] != av[1]:
                return ("an alternation under a quantifier such as (a|ab)+ can take "
                        "exponential time to match; use a character class such as "
                        "[ab]+ where possible")
    if count > MAX_BACKTRACKING_QUANTIFIERS:
        return (f"{count} variable quantifiers (*, +, ?, {{m,n}}); at most "
                f"{MAX_BACKTRACKING_QUANTIFIERS} are allowed")
    return None


def match_topics(pattern: str, topics: Iterable[str]) -> tuple[str, ...]:
    """Topics ``pattern`` matches as a whole (Java's ``matches()``), sorted; internal
    topics are left out (the Java consumer's ``exclude.internal.topics=true``). A stored
    pattern that ``compile_topic_pattern`` now refuses (written by an older franz)
    matches nothing."""
    try:
        matches = compile_topic_pattern(pattern)
    except InvalidRequestError as exc:
        _warn_refused(pattern, exc.message)
        return ()
    return tuple(sorted(t for t in topics if not is_internal_topic(t) and matches(t)))


@functools.lru_cache(maxsize=256)
def _warn_refused(pattern: str, why: str) -> None:
    log.warning("a stored topic pattern is refused and matches no topic: %s", why)


async def partition_counts(backend: GroupBackend, topics: Iterable[str]) -> dict[str, int]:
    """Partition count per existing topic of ``topics`` (missing ones are left out)."""
    counts: dict[str, int] = {}
    for topic in sorted(set(topics)):
        count = await backend.partition_count(topic)
        if count is not None:
            counts[topic] = count
    return counts


async def check_partitions(backend: GroupBackend, tps: Iterable[TopicPartition]) -> None:
    """UnknownTopicOrPartitionError unless every partition exists."""
    tps = list(tps)
    counts = await partition_counts(backend, (tp[0] for tp in tps))
    for topic, partition in tps:
        if not 0 <= partition < counts.get(topic, 0):
            raise UnknownTopicOrPartitionError(
                f"This server does not host this topic-partition: {topic}-{partition}"
            )
