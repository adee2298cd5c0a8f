"""Fuzz every operation of the OpenAPI spec with schemathesis, in process: no 5xx, and every answer conforms
to the spec (status, content type, body schema).

The one check left out is that every schema-valid request is accepted: what a value means (a parseable
time, a role allowed in the perspective, a name without control characters) is the core's to judge, and
JSON schema cannot say it. Bounded: a fixed number of derandomized examples per operation."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable

import schemathesis
from http_support import ADMIN_KEY, Service, chat
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode

from memlane.interfaces.http.agent_memory import serves

# Per operation and kind (positive, negative). The suite runs a few; a longer run for a report:
#   MEMLANE_FUZZ_EXAMPLES=500 .venv/bin/pytest tests/http/test_http_fuzz.py
EXAMPLES_PER_OPERATION = int(os.environ.get("MEMLANE_FUZZ_EXAMPLES", "10"))
ADMIN_PATHS = ("/v1/users", "/metrics", "/v1/retention", "/v1/prompts", "/v1/llm")
CONFIG = {
    "checks": {
        "positive_data_acceptance": {"enabled": False},
        # A body over the size limit is refused with 413 before it is parsed.
        "negative_data_rejection": {"expected-statuses": [400, 401, 403, 404, 405, 413, 422]},
    }
}


def fuzzer(
    operation: schemathesis.APIOperation, headers: dict[str, str], examples: int, statuses: Counter[int]
) -> Callable[[], None]:
    """Positive (schema-valid) and negative (schema-violating) requests, ``examples`` of each kind."""
    cases = operation.as_strategy(GenerationMode.POSITIVE) | operation.as_strategy(GenerationMode.NEGATIVE)

    @given(case=cases)
    @settings(
        max_examples=2 * examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def check(case: schemathesis.Case) -> None:
        statuses[case.call_and_validate(headers=headers).status_code] += 1

    return check  # type: ignore[no-any-return]


def test_no_operation_answers_5xx_or_off_spec(service: Service) -> None:
    user_key = service.new_user("fuzzer")
    service.client(user_key).post("/v1/memories", json={"messages": chat("seed text", "reply")})
    schema = schemathesis.openapi.from_asgi("/openapi.json", service.app, config=schemathesis.Config.from_dict(CONFIG))
    operations = [result.ok() for result in schema.get_all_operations()]
    # memlane's own operations; the Agent Memory routes are fuzzed by test_agent_memory_fuzz.py.
    operations = [op for op in operations if not serves(op.path)]
    assert len(operations) == 53
    failures: list[str] = []
    statuses: Counter[int] = Counter()
    for operation in operations:
        key = ADMIN_KEY if operation.path.startswith(ADMIN_PATHS) else user_key
        try:
            fuzzer(operation, {"Authorization": f"Bearer {key}"}, EXAMPLES_PER_OPERATION, statuses)()
        except BaseException as exc:  # every operation gets its run; the failures are reported together
            if isinstance(exc, KeyboardInterrupt):
                raise
            failures.append(f"{operation.method.upper()} {operation.path}: {str(exc)[:3000]}")
    print(f"fuzz: {sum(statuses.values())} requests, by status {dict(sorted(statuses.items()))}")
    assert failures == [], "\n\n".join(failures)
    assert not [s for s in statuses if s >= 500]
