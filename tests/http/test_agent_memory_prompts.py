"""The prompt registry through the Agent Memory routes, on every store: versions from 0, the head and a
version by ``vid``, updates that add versions, archive (409 twice; the id stays reserved) and purge (the
current version of a prompt with others is 409; ``all`` frees the id), pagination within bounds, and a
prompt stamped on the blocks an add extracts with it, found again by the prompt filters."""

from __future__ import annotations

from agent_memory_support import AgentApi, flat_error

PROMPT = {"prompt_id": "billing", "prompt": "Look for billing disputes.", "description": "Billing focus"}


def test_a_prompt_is_created_versioned_read_and_listed(api: AgentApi) -> None:
    admin = api.admin
    made = admin.post("/prompts", json={**PROMPT, "annotations": {"team": "support"}})
    assert made.status_code == 201
    head = made.json()
    assert (head["prompt_id"], head["current_vid"], head["version_count"], head["archived"]) == ("billing", 0, 1, False)
    assert head["prompt"] == PROMPT["prompt"] and head["annotations"] == {"team": "support"} and head["last_updated_at"]
    flat_error(admin.post("/prompts", json=PROMPT), 409, "ALREADY_EXISTS")
    v1 = admin.put("/prompts/billing", json={"prompt": "Look for refunds too."}).json()
    assert v1["current_vid"] == 1 and v1["version_count"] == 2 and v1["prompt"] == "Look for refunds too."
    described = admin.put("/prompts/billing", json={"description": "Refunds"}).json()
    assert described["current_vid"] == 1 and described["description"] == "Refunds"  # head-only: no new version
    old = admin.get("/prompts/billing", params={"vid": 0}).json()
    assert old == {
        "prompt_id": "billing",
        "vid": 0,
        "prompt": PROMPT["prompt"],
        "updated_at": old["updated_at"],
        "archived": False,
        "is_current": False,
    }
    assert admin.get("/prompts/billing").json()["current_vid"] == 1
    flat_error(admin.get("/prompts/billing", params={"vid": 7}), 404, "PROMPT_NOT_FOUND")
    flat_error(admin.get("/prompts/billing", params={"vid": "x"}), 400, "INVALID_REQUEST")
    flat_error(admin.get("/prompts/nope"), 404, "PROMPT_NOT_FOUND")
    flat_error(admin.put("/prompts/nope", json={"prompt": "x"}), 404, "PROMPT_NOT_FOUND")
    flat_error(admin.put("/prompts/billing", json={}), 400, "INVALID_REQUEST")
    flat_error(admin.post("/prompts", json={**PROMPT, "prompt_id": "has space"}), 400, "INVALID_REQUEST")
    flat_error(admin.post("/prompts", json={**PROMPT, "prompt_id": "p2", "description": "d" * 201}), 400)

    versions = admin.get("/prompts/billing/versions", params={"limit": 100, "offset": 0}).json()
    assert [v["vid"] for v in versions["versions"]] == [0, 1] or [v["vid"] for v in versions["versions"]] == [1, 0]
    assert (versions["count"], versions["total"], versions["limit"], versions["offset"]) == (2, 2, 100, 0)
    assert sum(v["is_current"] for v in versions["versions"]) == 1
    admin.post("/prompts", json={**PROMPT, "prompt_id": "other"})
    listed = admin.get("/prompts", params={"limit": 1, "offset": 0}).json()
    assert listed["count"] == 1 and listed["total"] == 2 and listed["limit"] == 1
    assert admin.get("/prompts", params={"limit": 50_000}).json()["limit"] == 1000


def test_archive_reserves_and_purge_frees(api: AgentApi) -> None:
    admin = api.admin
    admin.post("/prompts", json=PROMPT)
    admin.put("/prompts/billing", json={"prompt": "v1"})
    flat_error(admin.delete("/prompts/billing", params={"vid": 1}), 409)  # the current version of a prompt with others
    assert admin.delete("/prompts/billing", params={"vid": 0}).status_code == 204
    flat_error(admin.get("/prompts/billing", params={"vid": 0}), 404, "PROMPT_NOT_FOUND")
    flat_error(admin.delete("/prompts/billing"), 400, "INVALID_REQUEST")  # vid is required
    archived = admin.put("/prompts/billing/archive", params={"vid": "all"})  # no body, as the client sends it
    assert archived.status_code == 204
    assert admin.get("/prompts/billing").json()["archived"] is True
    flat_error(admin.put("/prompts/billing/archive", params={"vid": "all"}), 409)
    flat_error(admin.put("/prompts/billing", json={"prompt": "v2"}), 409, "PROMPT_ARCHIVED")
    flat_error(admin.post("/prompts", json=PROMPT), 409)  # archived ids stay reserved
    assert admin.delete("/prompts/billing", params={"vid": "all"}).status_code == 204
    assert admin.post("/prompts", json=PROMPT).status_code == 201  # purged: free again


def test_blocks_carry_the_prompt_that_extracts_them(llm_api: AgentApi) -> None:
    admin = llm_api.admin
    admin.post("/prompts", json=PROMPT)
    admin.put("/prompts/billing", json={"prompt": "v1 text"})
    llm_api.session("alice", "s1")
    mem = "/users/alice/sessions/s1/memory"
    latest = admin.post(mem, json={"facts": ["disputed a charge"], "prompt_id": "billing"}).json()["block_ids"]
    pinned = admin.post(mem, json={"facts": ["asked for a refund"], "prompt_id": "billing", "prompt_vid": 0})
    plain = admin.post(mem, json={"facts": ["likes tea"]}).json()["block_ids"]
    blocks = {b["block_id"]: b for b in admin.get("/users/alice/memory").json()["memory_blocks"]}
    assert (blocks[latest[0]]["prompt_id"], blocks[latest[0]]["prompt_vid"]) == ("billing", 1)
    pinned_id = pinned.json()["block_ids"][0]
    assert (blocks[pinned_id]["prompt_id"], blocks[pinned_id]["prompt_vid"]) == ("billing", 0)
    assert "prompt_id" not in blocks[plain[0]]

    def found(filters: dict[str, object]) -> list[str]:
        return [b["block_id"] for b in admin.post(mem + "/search", json={"filters": filters}).json()["memory_blocks"]]

    assert sorted(found({"prompt_id": "billing"})) == sorted([*latest, pinned_id])
    assert found({"prompt_id": "billing", "prompt_vid": 0}) == [pinned_id]
    switched = admin.put(f"{mem}/{plain[0]}", json={"prompt_id": "billing", "prompt_vid": 0}).json()["block"]
    assert (switched["prompt_id"], switched["prompt_vid"], switched["status"]) == ("billing", 0, "processing")
    back = admin.put(f"{mem}/{plain[0]}", json={"prompt_id": "default"}).json()["block"]
    assert "prompt_id" not in back
    admin.put("/prompts/billing/archive", params={"vid": "all"})
    flat_error(admin.post(mem, json={"facts": ["x"], "prompt_id": "billing"}), 409, "PROMPT_ARCHIVED")
