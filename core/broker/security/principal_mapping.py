"""``ssl.principal.mapping.rules``: from a client certificate's subject to a principal name.

Kafka's syntax and semantics (``SslPrincipalMapper``): a list of rules separated by
commas or newlines, tried in order on the subject's RFC 2253 distinguished name (as
Java's ``X500Principal.getName()`` writes it: ``CN=alice,OU=eng,O=acme,C=US``):

    RULE:<pattern>/<replacement>/[L|U]    when the Java regex ``pattern`` matches the
                                          whole DN: the DN with every match of the pattern
                                          replaced by ``replacement`` (``$1`` ... group
                                          references), then lowercased (L) or
                                          uppercased (U)
    DEFAULT                               the whole DN

``/`` and ``\\`` inside a pattern or replacement are escaped with ``\\``; commas need no
escape (a rule ends at the separator after its closing ``/``). A ``$n`` naming a group
the pattern does not have is literal text, as in Kafka (``$12`` with three groups is
group 1 then ``2``). Patterns run on Python's ``re``, which reads the Java regexes such
rules use (named groups ``(?<name>...)`` are translated); one it cannot compile is an
error naming the rule. As in Kafka, an empty rule list maps no DN at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_GROUP_REF = re.compile(r"\$(\d+)|\$\{([A-Za-z][A-Za-z0-9]*)\}")
_JAVA_NAMED_GROUP = re.compile(r"(?<!\\)\(\?<(?![=!])")

# A replacement compiled to its parts: literal text, or a group (number or name).
_Part = str | int


@dataclass(frozen=True, slots=True)
class _Rule:
    text: str  # as written, for messages
    pattern: re.Pattern[str] | None  # None: DEFAULT
    parts: tuple[tuple[bool, _Part], ...] = ()  # (is_group, literal or group)
    case: str = ""  # "", "L" or "U"

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        name = self.pattern.sub(self._expand, dn)  # every match, as Java's replaceAll
        if self.case == "L":
            return name.lower()
        return name.upper() if self.case == "U" else name

    def _expand(self, match: re.Match[str]) -> str:
        return "".join(str(match.group(p) or "") if is_group else str(p)
                       for is_group, p in self.parts)


class PrincipalMapper:
    """``from_rules(text)`` once; ``name_of(dn)`` per new client certificate."""

    def __init__(self, rules: tuple[_Rule, ...]) -> None:
        self._rules = rules

    @classmethod
    def from_rules(cls, text: str) -> PrincipalMapper:
        """The mapper of ``ssl.principal.mapping.rules``; ValueError naming a bad rule."""
        return cls(tuple(_parse_rules(text)))

    def name_of(self, dn: str) -> str | None:
        """The principal name of the first rule that applies to ``dn``; None when none
        does (the caller refuses the request)."""
        for rule in self._rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        return None

    def __repr__(self) -> str:
        return f"PrincipalMapper({', '.join(r.text for r in self._rules)})"


# --- parsing ----------------------------------------------------------------------------


def _parse_rules(text: str) -> list[_Rule]:
    rules: list[_Rule] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            break
        start = i
        if text.startswith("DEFAULT", i):
            i += len("DEFAULT")
            rule = _Rule("DEFAULT", None)
        elif text.startswith("RULE:", i):
            pattern, i = _until_slash(text, i + len("RULE:"), start)
            replacement, i = _until_slash(text, i, start)
            case = ""
            if i < n and text[i] in "LU":
                case, i = text[i], i + 1
            rule = _compile_rule(text[start:i], pattern, replacement, case)
        elif text[i] in ",\n":  # an empty entry: ignored, as in Kafka
            i += 1
            continue
        else:
            end = _separator_at_or_after(text, i)
            raise ValueError(f"invalid rule {text[start:end].strip()!r}: expected "
                             "RULE:pattern/replacement/[L|U] or DEFAULT")
        while i < n and text[i] in " \t\r":
            i += 1
        if i < n and text[i] not in ",\n":
            end = _separator_at_or_after(text, i)
            raise ValueError(f"invalid rule {text[start:end].strip()!r}: unexpected "
                             f"{text[i:end].strip()!r} after the rule")
        i += 1
        rules.append(rule)
    return rules


def _until_slash(text: str, i: int, start: int) -> tuple[str, int]:
    """The text from ``i`` to the next unescaped ``/`` (escapes kept), and the index after
    that slash."""
    out = []
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n:
            out.append(text[i:i + 2])
            i += 2
            continue
        if c == "/":
            return "".join(out), i + 1
        out.append(c)
        i += 1
    raise ValueError(f"invalid rule {text[start:].strip()!r}: expected "
                     "RULE:pattern/replacement/[L|U] (a '/' is missing)")


def _separator_at_or_after(text: str, i: int) -> int:
    ends = [j for j in (text.find(",", i), text.find("\n", i)) if j >= 0]
    return min(ends, default=len(text))


def _compile_rule(text: str, pattern: str, replacement: str, case: str) -> _Rule:
    try:
        compiled = re.compile(_JAVA_NAMED_GROUP.sub("(?P<", pattern))
    except re.error as exc:
        raise ValueError(f"invalid rule {text!r}: bad pattern: {exc}") from None
    parts = _replacement_parts(text, replacement, compiled)
    return _Rule(text, compiled, parts, case)


def _replacement_parts(text: str, replacement: str,
                       pattern: re.Pattern[str]) -> tuple[tuple[bool, _Part], ...]:
    """Java's replacement syntax: ``\\x`` is ``x``, ``$n``/``${name}`` a group; a group
    number beyond the pattern's groups keeps its leading digits that name a group and
    the rest as text (Kafka's rule), or is all text when none does."""
    parts: list[tuple[bool, _Part]] = []
    literal: list[str] = []
    groups = pattern.groups
    i, n = 0, len(replacement)
    while i < n:
        c = replacement[i]
        if c == "\\":
            if i + 1 >= n:
                raise ValueError(f"invalid rule {text!r}: the replacement ends with '\\'")
            literal.append(replacement[i + 1])
            i += 2
            continue
        if c != "$":
            literal.append(c)
            i += 1
            continue
        ref = _GROUP_REF.match(replacement, i)
        if ref is None:
            raise ValueError(f"invalid rule {text!r}: '$' in the replacement must be "
                             "followed by a group number or {name} (write '\\$' for a '$')")
        i = ref.end()
        if ref.group(2) is not None:
            if ref.group(2) not in pattern.groupindex:
                raise ValueError(f"invalid rule {text!r}: no group named {ref.group(2)!r}")
            group: _Part | None = ref.group(2)
            tail = ""
        else:
            group, tail = _group_number(ref.group(1), groups)
        if group is None:
            literal.append(ref.group(0))
            continue
        if literal:
            parts.append((False, "".join(literal)))
            literal = []
        parts.append((True, group))
        literal.append(tail)
    if literal:
        parts.append((False, "".join(literal)))
    return tuple((g, p) for g, p in parts if g or p)


def _group_number(digits: str, groups: int) -> tuple[int | None, str]:
    """The longest leading digits of ``digits`` that name one of ``groups`` groups (0 is
    the whole match), and the digits after them; (None, "") when the first digit names
    none."""
    for cut in range(len(digits), 0, -1):
        number = int(digits[:cut])
        if number <= groups:
            return number, digits[cut:]
    return None, ""
