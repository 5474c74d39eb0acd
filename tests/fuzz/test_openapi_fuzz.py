"""Schemathesis over franz's whole published ``/openapi.json`` (docs/openapi-fuzzing.md).

A real ``franz serve`` (``fuzz_server``, tests/fuzz/conftest.py) is fuzzed two ways:

- ``test_every_operation``: every operation of the document on its own, with valid
  (positive) and invalid (negative) inputs from schemathesis' examples, coverage and
  fuzzing phases; one pytest subtest per operation.
- ``test_stateful_links``: scenarios that follow the document's OpenAPI ``links``
  (``api/openapi_links.py``, ``api/schema_registry/links.py``): create a consumer
  instance, then subscribe, seek, read, commit and delete *that* instance; list
  clusters, then create a topic in *that* cluster, then describe, configure, produce to
  and read *that* topic; register a schema, then read it by *that* id and *that*
  subject's versions; and so on.

Every response must pass these checks: no 5xx (``not_a_server_error``), a status the
operation documents (``status_code_conformance``), a documented Content-Type
(``content_type_conformance``), a body that matches the documented schema
(``response_schema_conformance``), documented response headers, and a 405's ``Allow``
listing exactly the documented methods of the path (``allow_header_conformance``).

Reproducible by default (fixed seed, no example database). Longer or random runs:
``FRANZ_FUZZ_EXAMPLES`` (per operation), ``FRANZ_FUZZ_SCENARIOS`` and
``FRANZ_FUZZ_STEPS`` (stateful), ``FRANZ_FUZZ_SEED`` (an integer, or ``random``).
"""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis", minversion="4.0")
from hypothesis import HealthCheck, Phase, seed, settings  # noqa: E402
from hypothesis.errors import Flaky  # noqa: E402

EXAMPLES = int(os.environ.get("FRANZ_FUZZ_EXAMPLES", "10"))
SCENARIOS = int(os.environ.get("FRANZ_FUZZ_SCENARIOS", "120"))
STEPS = int(os.environ.get("FRANZ_FUZZ_STEPS", "12"))
_SEED = os.environ.get("FRANZ_FUZZ_SEED", "20240501")
SEED: int | None = None if _SEED == "random" else int(_SEED)

#: The checks every response must pass; all others are off (see docs/openapi-fuzzing.md
#: for positive_data_acceptance / negative_data_rejection, which are not run here).
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
    "response_headers_conformance",
    "allow_header_conformance",
)


#: Operations whose answer is not always JSON though its content type says so, so
#: ``response_schema_conformance`` cannot read it: a schema's text alone, which for a
#: PROTOBUF schema is ``.proto`` source, sent in the registry's media type as Confluent's
#: registry sends it (docs/schema-registry.md). Every other check still applies.
NOT_ALWAYS_JSON = ("getSchemaOnly", "getSchemaOnly1")


def _config() -> Any:
    data: dict[str, Any] = {
        "generation": {"mode": "all", "max-examples": EXAMPLES, "database": "none"},
        "checks": {"enabled": False, **{name: {"enabled": True} for name in CHECKS}},
        "phases": {"stateful": {"max-steps": STEPS}},
        "request-timeout": 30,
        "operations": [{"include-operation-id": list(NOT_ALWAYS_JSON),
                        "checks": {"response_schema_conformance": {"enabled": False}}}],
    }
    if SEED is not None:
        data["seed"] = SEED
    return schemathesis.Config.from_dict(data)


@pytest.fixture(scope="module")
def api_schema(fuzz_server: Any) -> Any:
    return schemathesis.openapi.from_url(fuzz_server.url + "/openapi.json", config=_config())


def test_document_has_links(api_schema: Any) -> None:
    """The published document carries the links the stateful test walks."""
    raw = api_schema.raw_schema
    links = {
        (path, method, status, name)
        for path, item in raw["paths"].items()
        for method, op in item.items()
        for status, response in op.get("responses", {}).items()
        for name in response.get("links", {})
    }
    assert ("/consumers/{group}", "post", "200", "Subscribe") in links
    assert ("/consumers/{group}", "post", "200", "ReadRecords") in links
    assert ("/v3/clusters", "get", "200", "CreateTopic") in links
    assert ("/v3/clusters/{cluster_id}/topics", "post", "201", "ListPartitions") in links
    assert ("/subjects/{subject}/versions", "post", "200", "GetSchema") in links
    assert ("/subjects/{subject}/versions", "post", "200", "GetLatestVersion") in links
    assert len(links) >= 110


fuzz = schemathesis.pytest.from_fixture("api_schema")


@fuzz.parametrize()
@settings(deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_every_operation(case: Any) -> None:
    case.call_and_validate()


#: Entry points the stateful test adds to schemathesis' own (list operations and POSTs
#: it expects to create something): its dependency analysis takes the body field ``id``
#: of ``POST /consumers/{group}`` for a reference to a resource nothing creates, and
#: would never start a scenario there, so no consumer instance would ever be linked.
EXTRA_ROOTS = ("POST /consumers/{group}",)


def _machine(api_schema: Any, answered: dict[str, set[int]], failures: list[BaseException]) -> Any:
    """schemathesis' state machine for the document, with ``EXTRA_ROOTS``; records the
    statuses each operation answered in ``answered`` and every failed check in
    ``failures``."""
    from hypothesis import strategies as st
    from hypothesis.stateful import Bundle
    from schemathesis.generation import GenerationMode
    from schemathesis.generation.meta import TestPhase
    from schemathesis.generation.stateful.state_machine import StepInput
    from schemathesis.specs.openapi.stateful import transition

    base = api_schema.as_state_machine()
    rules: dict[str, Any] = {}
    for label in EXTRA_ROOTS:
        method, path = label.split(" ", 1)
        operation = api_schema[path][method]
        cases = st.one_of(
            *(
                operation.as_strategy(mode, phase=TestPhase.STATEFUL)
                for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
            )
        )
        name = "EXTRA_ROOT__" + "".join(c if c.isalnum() else "_" for c in label)
        rules[name] = transition(
            name=name,
            target=Bundle("catch_all"),
            input=cases.map(StepInput.initial),
            precondition=lambda machine: True,
        )

    def after_call(self: Any, response: Any, case: Any) -> None:
        base.after_call(self, response, case)
        answered.setdefault(case.operation.label, set()).add(response.status_code)

    def validate_response(self: Any, response: Any, case: Any, *args: Any, **kwargs: Any) -> None:
        try:
            base.validate_response(self, response, case, *args, **kwargs)
        except Exception as exc:
            failures.append(exc)
            raise

    return type(
        "FranzWorkflow",
        (base,),
        {**rules, "after_call": after_call, "validate_response": validate_response},
    )


def test_stateful_links(api_schema: Any) -> None:
    answered: dict[str, set[int]] = {}
    failures: list[BaseException] = []
    machine = _machine(api_schema, answered, failures)
    if SEED is not None:
        machine = seed(SEED)(machine)
    started = time.monotonic()
    try:
        machine.run(
            settings=settings(
                max_examples=SCENARIOS,
                stateful_step_count=STEPS,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
                phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
            )
        )
    except Flaky as exc:
        # Hypothesis replays a prefix of a scenario and finds the server in another state
        # (the consumer instance it created exists now: 409, so nothing to link from).
        # That ends the run; schemathesis' own runner counts it as no failure as well.
        # A check that failed on the way is still a failure.
        if failures:
            raise AssertionError(f"{len(failures)} failed check(s); first:\n{failures[0]}") from exc
        print(f"stateful: stopped early, replay against a changed server ({type(exc).__name__})")
    print(f"stateful: at most {SCENARIOS} scenarios x {STEPS} steps in {time.monotonic() - started:.1f}s")
    for label, statuses in sorted(answered.items()):
        print(f"  {label}: {sorted(statuses)}")
