"""The ``Prompts`` protocol (memlane.core.store.prompts) on every backend, driven through that protocol alone:
what each method's docstring promises and the registry test beside this one does not already check."""

from __future__ import annotations

import pytest

from memlane.core.errors import AlreadyExistsError, ConflictError, NotFoundError, PromptArchivedError
from memlane.core.store.prompts import PromptChange, Prompts
from memlane.core.timefmt import from_epoch

T0 = 1_700_000_000.0


def test_create_is_version_0_with_what_was_given(prompts: Prompts) -> None:
    made = prompts.create_prompt("p", "Remember tea.", description="drinks", annotations={"team": "a"}, now=T0)
    assert (made.prompt_id, made.text, made.description, made.annotations) == (
        "p",
        "Remember tea.",
        "drinks",
        {"team": "a"},
    )
    assert (made.current_version, made.version_count, made.archived) == (0, 1, False)
    assert made.updated_at == from_epoch(T0)
    assert prompts.get_prompt("p") == made
    version = prompts.get_prompt_version("p")
    assert (version.version, version.text, version.is_current, version.archived) == (0, "Remember tea.", True, False)
    assert version.created_at == from_epoch(T0)


def test_unknown_prompts_and_versions_are_not_found(prompts: Prompts) -> None:
    prompts.create_prompt("p", "x", description="", annotations={}, now=T0)
    for call in (
        lambda: prompts.get_prompt("q"),
        lambda: prompts.get_prompt_version("q"),
        lambda: prompts.get_prompt_version("p", 1),
        lambda: prompts.list_prompt_versions("q", limit=10, offset=0),
        lambda: prompts.update_prompt("q", PromptChange(text="y", now=T0)),
        lambda: prompts.archive_prompt("q", now=T0),
        lambda: prompts.archive_prompt("p", 3, now=T0),
        lambda: prompts.purge_prompt("q"),
        lambda: prompts.purge_prompt("p", 3),
    ):
        with pytest.raises(NotFoundError):
            call()


def test_an_update_without_text_adds_no_version(prompts: Prompts) -> None:
    prompts.create_prompt("p", "v0", description="d", annotations={"a": "1"}, now=T0)
    same = prompts.update_prompt("p", PromptChange(description="d2", annotations={"b": "2"}, now=T0 + 1))
    assert (same.current_version, same.version_count, same.text) == (0, 1, "v0")
    assert (same.description, same.annotations, same.updated_at) == ("d2", {"b": "2"}, from_epoch(T0 + 1))
    newer = prompts.update_prompt("p", PromptChange(text="v1", now=T0 + 2))
    assert (newer.current_version, newer.version_count, newer.text, newer.description) == (1, 2, "v1", "d2")
    assert prompts.get_prompt_version("p").version == 1


def test_versions_and_prompts_page_with_the_total(prompts: Prompts) -> None:
    prompts.create_prompt("p", "v0", description="", annotations={}, now=T0)
    for i in range(1, 4):
        prompts.update_prompt("p", PromptChange(text=f"v{i}", now=T0 + i))
    page = prompts.list_prompt_versions("p", limit=2, offset=1)
    assert [v.version for v in page.items] == [2, 1] and page.total == 4
    assert [v.is_current for v in prompts.list_prompt_versions("p", limit=1, offset=0).items] == [True]
    for prompt_id in ("c", "a", "b"):
        prompts.create_prompt(prompt_id, "x", description="", annotations={}, now=T0)
    listed = prompts.list_prompts(limit=2, offset=1)
    assert [p.prompt_id for p in listed.items] == ["b", "c"] and listed.total == 4


def test_archiving_one_version_leaves_the_prompt_usable(prompts: Prompts) -> None:
    prompts.create_prompt("p", "v0", description="", annotations={}, now=T0)
    prompts.update_prompt("p", PromptChange(text="v1", now=T0))
    head = prompts.archive_prompt("p", 0, now=T0 + 5)
    assert not head.archived and head.updated_at == from_epoch(T0 + 5)
    assert prompts.get_prompt_version("p", 0).archived and not prompts.get_prompt_version("p", 1).archived
    assert prompts.update_prompt("p", PromptChange(text="v2", now=T0)).current_version == 2  # not archived as a whole
    assert prompts.list_prompts(limit=10, offset=0).total == 1


def test_an_archived_prompt_is_read_but_not_updated_and_keeps_its_id(prompts: Prompts) -> None:
    prompts.create_prompt("p", "v0", description="", annotations={}, now=T0)
    assert prompts.archive_prompt("p", now=T0).archived
    assert prompts.get_prompt("p").archived and prompts.get_prompt_version("p").text == "v0"
    with pytest.raises(PromptArchivedError):
        prompts.update_prompt("p", PromptChange(description="x", now=T0))
    with pytest.raises(AlreadyExistsError) as err:
        prompts.create_prompt("p", "again", description="", annotations={}, now=T0)
    assert (err.value.what, err.value.name) == ("prompt", "p")
    assert prompts.list_prompts(limit=10, offset=0).total == 0
    assert [p.prompt_id for p in prompts.list_prompts(limit=10, offset=0, include_archived=True).items] == ["p"]


def test_purge_rules(prompts: Prompts) -> None:
    prompts.create_prompt("p", "v0", description="", annotations={}, now=T0)
    prompts.update_prompt("p", PromptChange(text="v1", now=T0))
    prompts.update_prompt("p", PromptChange(text="v2", now=T0))
    with pytest.raises(ConflictError):
        prompts.purge_prompt("p", 2)  # the current version of a prompt that has others
    assert prompts.purge_prompt("p", 1) == 1
    assert [v.version for v in prompts.list_prompt_versions("p", limit=10, offset=0).items] == [2, 0]
    assert (
        prompts.update_prompt("p", PromptChange(text="v3", now=T0)).current_version == 3
    )  # a purged number is not reused
    assert prompts.purge_prompt("p") == 3  # the whole prompt: every version left
    with pytest.raises(NotFoundError):
        prompts.get_prompt("p")
    prompts.create_prompt("q", "only", description="", annotations={}, now=T0)
    assert prompts.purge_prompt("q", 0) == 1  # the current and only version: the prompt goes with it
    with pytest.raises(NotFoundError):
        prompts.get_prompt("q")
    assert prompts.create_prompt("q", "free again", description="", annotations={}, now=T0).current_version == 0
