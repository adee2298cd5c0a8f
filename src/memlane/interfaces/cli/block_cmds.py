"""Commands on blocks of the memory model: ``memlane add-fact``, ``memlane update``, ``memlane ttl``."""

from __future__ import annotations

import json
from contextlib import closing
from pathlib import Path
from typing import Any

import click

from memlane.core.errors import ValidationError
from memlane.interfaces.cli.app import LLMChoice, llm_options, open_memory, store_options
from memlane.interfaces.cli.options import TTL
from memlane.interfaces.cli.pairs import parse_pairs, parse_prompt
from memlane.interfaces.wire.shapes import block_json
from memlane.interfaces.wire.updates import new_sides

annotation_option = click.option(
    "--annotation",
    "annotation_pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="A string label for the blocks (repeat for more); searches filter on them.",
)
ttl_option = click.option(
    "--ttl",
    "ttl_s",
    type=TTL,
    default=None,
    help="Seconds from now until the blocks expire (0: never). Default: the session's, else the server's.",
)
prompt_option = click.option(
    "--prompt", default=None, metavar="ID[@VERSION]", help="The registry prompt to extract with (`memlane prompt`)."
)
extract_option = click.option(
    "--extract",
    type=click.Choice(["off", "async", "sync"]),
    default="off",
    show_default=True,
    help="LLM extraction: off, async (queued for `memlane worker`), sync (before returning).",
)


@click.command("add-fact")
@click.argument("user")
@click.argument("facts", nargs=-1, required=True)
@click.option("--session", "session_id", default="default", show_default=True)
@click.option("--conversation", "conversation_id", default="default", show_default=True)
@click.option("--time", "time_", default=None, help="When the fact was learnt (its event time). Default: now.")
@annotation_option
@ttl_option
@prompt_option
@extract_option
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@store_options
@llm_options
def add_fact_cmd(
    user: str,
    facts: tuple[str, ...],
    session_id: str,
    conversation_id: str,
    time_: str | None,
    annotation_pairs: tuple[str, ...],
    ttl_s: int | None,
    prompt: str | None,
    extract: str,
    as_json: bool,
    store: Path,
    embedder: str,
    llm: LLMChoice,
) -> None:
    """Store each FACT as one block of kind fact in USER's memory (searchable and listable like any block).

    \b
    Example:
      memlane add-fact alice "Alice is allergic to peanuts." "Alice's sister is Ana." --annotation topic=health
    """
    annotations = parse_pairs(annotation_pairs, "--annotation")
    chosen = parse_prompt(prompt)
    with closing(open_memory(store, embedder, llm if extract == "sync" else None, create=True)) as mem:
        res = mem.add_facts(
            user,
            list(facts),
            session_id=session_id,
            conversation_id=conversation_id,
            time=time_,
            annotations=annotations,
            ttl_s=ttl_s,
            prompt=chosen,
            extract=extract,  # type: ignore[arg-type]  # click.Choice guarantees the literal
        )
    if as_json:
        click.echo(json.dumps({"block_ids": list(res.block_ids), "jobs_enqueued": res.jobs_enqueued}))
    else:
        click.echo(f"added {len(res.block_ids)} facts for {user}")


@click.command("update")
@click.argument("user")
@click.argument("block_id")
@click.option("--content", default=None, help="A fact's new text.")
@click.option("--user-content", default=None, help="An exchange's new user side.")
@click.option("--assistant-content", default=None, help="An exchange's new assistant side.")
@click.option("--annotation", "annotation_pairs", multiple=True, metavar="KEY=VALUE", help="Replace its annotations.")
@click.option("--clear-annotations", is_flag=True, help="Remove its annotations.")
@click.option("--ttl", "ttl_s", type=TTL, default=None, help="A new TTL in seconds, counted from now (0: never).")
@click.option("--prompt", default=None, metavar="ID[@VERSION]", help="The registry prompt to extract with.")
@click.option(
    "--extract",
    type=click.Choice(["off", "async"]),
    default=None,
    help="LLM extraction of the new content, queued for `memlane worker`. Default: as the block had it.",
)
@store_options
def update_cmd(
    user: str,
    block_id: str,
    content: str | None,
    user_content: str | None,
    assistant_content: str | None,
    annotation_pairs: tuple[str, ...],
    clear_annotations: bool,
    ttl_s: int | None,
    prompt: str | None,
    extract: str | None,
    store: Path,
    embedder: str,
) -> None:
    """Update one of USER's blocks in place (same id) and print it as JSON: new content is embedded, indexed
    and extracted anew; --annotation replaces its annotations; --ttl restarts its clock.

    \b
    Example:
      memlane update alice "$(memlane list alice --ids --kind fact --limit 1)" --content "Alice moved to Porto."
    """
    if content is not None and (user_content is not None or assistant_content is not None):
        raise ValidationError("a fact's; --user-content and --assistant-content are an exchange's", where="--content")
    if clear_annotations and annotation_pairs:
        raise ValidationError("cannot be combined with --annotation", where="--clear-annotations")
    annotations = {} if clear_annotations else parse_pairs(annotation_pairs, "--annotation")
    kw: dict[str, Any] = {}
    chosen = parse_prompt(prompt)
    if chosen is not None:
        kw["prompt"] = chosen
    if extract is not None:
        kw["extract"] = extract
    with closing(open_memory(store, embedder)) as mem:
        if content is not None:
            kw["content"] = content
        if user_content is not None or assistant_content is not None:
            kw["sides"] = new_sides(mem.get(user, block_id), user_content, assistant_content)
        block = mem.update(user, block_id, annotations=annotations, ttl_s=ttl_s, **kw)
    click.echo(json.dumps(block_json(block), ensure_ascii=False, indent=2))


@click.command("ttl")
@click.argument("user")
@click.argument("seconds", type=TTL)
@click.option("--session", "session_id", default=None, help="Only this session's blocks.")
@click.option("--block-id", "block_ids", multiple=True, help="Only this block (repeat for more).")
@store_options
def ttl_cmd(
    user: str, seconds: int, session_id: str | None, block_ids: tuple[str, ...], store: Path, embedder: str
) -> None:
    """Give USER's blocks a new TTL of SECONDS, counted from now (0: never expire): all of them, one
    session's (--session), or the listed ones (--block-id). An expired block is gone from every read at
    once.

    \b
    Example:
      memlane ttl alice 86400 --session s1
    """
    if session_id is not None and block_ids:
        raise ValidationError("cannot be combined with --block-id", where="--session")
    with closing(open_memory(store, embedder)) as mem:
        changed = mem.set_ttl(user, seconds, session_id=session_id, block_ids=list(block_ids) or None)
    click.echo(f"{changed} blocks of {user} now expire {'never' if seconds == 0 else f'in {seconds} s'}")


def register(group: click.Group) -> None:
    for cmd in (add_fact_cmd, update_cmd, ttl_cmd):
        group.add_command(cmd)
