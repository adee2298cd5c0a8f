"""Fuzz every Agent Memory operation of the OpenAPI spec with schemathesis, in process: schema-valid and
schema-violating requests with the admin key, over a store holding a user, a session, blocks and a
prompt. No answer is a 5xx, and every error answer has the flat body. Bounded: a fixed number of
derandomized examples per operation (MEMLANE_FUZZ_EXAMPLES raises it for a longer run)."""

from __future__ import annotations

import os
from collections import Counter

import schemathesis
from agent_memory_support import AgentApi
from http_support import ADMIN_KEY
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode

from memlane.interfaces.http.agent_memory import serves

EXAMPLES_PER_OPERATION = int(os.environ.get("MEMLANE_FUZZ_EXAMPLES", "8"))
CONFIG = {
    "checks": {
        "positive_data_acceptance": {"enabled": False},
        "negative_data_rejection": {"enabled": False},
        "status_code_conformance": {"enabled": False},
    }
}


def test_no_agent_memory_operation_answers_5xx(sqlite_api: AgentApi) -> None:
    sqlite_api.session("alice", "s1")
    sqlite_api.admin.post("/users/alice/sessions/s1/memory", json={"facts": ["seed fact"]})
    sqlite_api.admin.post("/prompts", json={"prompt_id": "p1", "prompt": "t", "description": "d"})
    schema = schemathesis.openapi.from_asgi(
        "/openapi.json", sqlite_api.app, config=schemathesis.Config.from_dict(CONFIG)
    )
    operations = [r.ok() for r in schema.get_all_operations()]
    operations = [op for op in operations if serves(op.path)]
    assert len(operations) == 30
    statuses: Counter[int] = Counter()
    bad: list[str] = []
    for operation in operations:
        cases = operation.as_strategy(GenerationMode.POSITIVE) | operation.as_strategy(GenerationMode.NEGATIVE)

        @given(case=cases)
        @settings(
            max_examples=2 * EXAMPLES_PER_OPERATION,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def check(case: schemathesis.Case) -> None:
            resp = case.call(headers={"Authorization": f"Bearer {ADMIN_KEY}"})
            statuses[resp.status_code] += 1
            if resp.status_code >= 500 and not (case.path == "/health" and resp.status_code == 503):
                bad.append(f"{case.method} {case.formatted_path}: {resp.status_code} {resp.text[:300]}")
            elif resp.status_code >= 400:
                body = resp.json()
                if not (isinstance(body, dict) and isinstance(body.get("error"), str)):
                    bad.append(f"{case.method} {case.formatted_path}: not flat: {resp.text[:300]}")

        check()
    print(f"fuzz: {sum(statuses.values())} requests, by status {dict(sorted(statuses.items()))}")
    assert bad == [], "\n".join(bad[:20])
