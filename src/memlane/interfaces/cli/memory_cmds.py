"""Memory commands: init, add, search, get, list, delete, delete-user, users, compact."""

from __future__ import annotations

import builtins
import dataclasses
import json
import sys
from contextlib import closing
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from memlane.core.errors import ConfigError, StoreNotFoundError, ValidationError
from memlane.core.memory import Memory
from memlane.core.model import Explanation, Filters, UserInfo
from memlane.core.names import shown
from memlane.interfaces.cli.app import LLMChoice, llm_options, open_memory, store_options
from memlane.interfaces.cli.filter_options import filter_options
from memlane.interfaces.cli.jsoninput import read_json
from memlane.interfaces.cli.options import LIMIT, OFFSET, K, SettingOption, store_path_option
from memlane.interfaces.cli.pairs import parse_pairs
from memlane.interfaces.wire.shapes import block_json, hit_json, user_json


def _read_messages(file: Path | None) -> Any:
    return read_json(file, sys.stdin.buffer)


@click.command("add")
@click.argument("user")
@click.option(
    "--conversation", "conversation_id", default="default", show_default=True, cls=SettingOption, setting="conversation"
)
@click.option("--session", "session_id", default="default", show_default=True, cls=SettingOption, setting="session")
@click.option(
    "--time",
    "time_",
    default=None,
    help="Session time: ISO 8601, '1:56 pm on 8 May, 2023' or '2023/04/10 (Mon) 23:07', from year 1 to "
    "9999 in UTC. Default: now.",
)
@click.option(
    "--perspective",
    type=click.Choice(["dual", "speakers", "single"]),
    default="dual",
    show_default=True,
    cls=SettingOption,
    setting="perspective",
)
@click.option(
    "--file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="JSON list of messages; default: stdin.",
)
@click.option(
    "--extract",
    type=click.Choice(["off", "async", "sync"]),
    default="off",
    show_default=True,
    cls=SettingOption,
    setting="extract",
    help="LLM extraction of summary and facts: off, async (queued for `memlane worker`), sync (before returning).",
)
@click.option(
    "--annotation",
    "annotation_pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="A string label kept on every block of the add (repeat for more); searches filter on them.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@store_options
@llm_options
def add_cmd(
    user: str,
    conversation_id: str,
    session_id: str,
    time_: str | None,
    perspective: str,
    file: Path | None,
    extract: str,
    annotation_pairs: tuple[str, ...],
    as_json: bool,
    store: Path,
    embedder: str,
    llm: LLMChoice,
) -> None:
    """Add a JSON list of messages ({"role"|"speaker", "content", "time"?, "id"?}) to USER's memory.

    USER, --conversation and --session are names: printable Unicode in NFC, no space at either end (a
    look-alike such as a right-to-left override is refused), none of / ? # % (each is a segment of a URL
    path), not . or .. Times run from 0001-01-01T00:00:00Z to
    9999-12-31T23:59:59Z in UTC. Input that is not UTF-8 or not JSON exits 2 naming the line and column.

    \b
    Example:
      echo '[{"role":"user","content":"My sister is Ana."},{"role":"assistant","content":"Noted."}]' \\
        | memlane add alice --session s1 --time "1:56 pm on 8 May, 2023" --annotation topic=family
    """
    annotations = parse_pairs(annotation_pairs, "--annotation")
    source = str(file) if file else "stdin"
    messages = _read_messages(file)
    if not isinstance(messages, list):
        raise ValidationError("expected a JSON list of messages", where=source)
    chosen = llm if extract == "sync" else None
    mem = open_memory(store, embedder, chosen, create=True)
    try:
        res = mem.add(
            user,
            messages,
            conversation_id=conversation_id,
            session_id=session_id,
            time=time_,
            perspective=perspective,
            extract=extract,  # type: ignore[arg-type]  # click.Choice guarantees the literal
            annotations=annotations,
        )
    except ValidationError as exc:
        if exc.where and exc.where.startswith("messages"):
            # The core names the message; the reader also needs to know which input held it.
            raise ValidationError(str(exc), where=source) from None
        raise
    finally:
        mem.close()
    if as_json:
        summary = {
            "block_ids": list(res.block_ids),
            "exchanges": res.exchanges,
            "skipped_system_messages": res.skipped_system_messages,
            "jobs_enqueued": res.jobs_enqueued,
            "jobs_done": res.jobs_done,
            "jobs_failed": res.jobs_failed,
        }
        click.echo(json.dumps(summary))
    else:
        click.echo(f"added {len(res.block_ids)} blocks from {res.exchanges} exchanges for {user}")
        if extract == "sync":
            click.echo(f"extraction: {res.jobs_done} of {res.jobs_enqueued} jobs done")
    left = res.jobs_enqueued - res.jobs_done - res.jobs_failed if extract == "sync" else 0
    if res.jobs_failed or left:
        problems = []
        if res.jobs_failed:
            problems.append(f"{res.jobs_failed} failed for good")
        if left:
            problems.append(f"{left} stay queued for `memlane worker` (the LLM server could not be reached)")
        click.echo(
            f"error: extraction did not finish: {', '.join(problems)}. The blocks are stored and searchable "
            "without a summary or facts; `memlane queue status` shows the errors.",
            err=True,
        )
        sys.exit(1)


@click.command("search")
@click.argument("user")
@click.argument("query")
@click.option("-k", "k", type=K, default=10, show_default=True)
@click.option("--mode", default="hybrid", show_default=True, help="vector, keyword, hybrid (or a named preset).")
@click.option("--before", default=None, help="Only blocks whose event time is before this time.")
@click.option("--after", default=None, help="Only blocks whose event time is at or after this time.")
@click.option(
    "--at", default=None, help="When the question is asked (default: now); read for phrases like 'two weeks ago'."
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of hits.")
@click.option(
    "--explain", is_flag=True, help="Say why each hit ranked: each retriever's rank and margin, the context gains."
)
@filter_options()
@store_options
def search_cmd(
    user: str,
    query: str,
    k: int,
    mode: str,
    before: str | None,
    after: str | None,
    at: str | None,
    as_json: bool,
    explain: bool,
    filters: Filters | None,
    store: Path,
    embedder: str,
) -> None:
    """Search USER's memory for QUERY: the k best memories, best first, each exchange once.

    Scores: higher is better. --mode vector gives cosine similarities (-1 to 1), --mode keyword BM25 scores
    (0 and up); the hybrid modes give a fused score (each retriever's weighted margin plus context gains,
    usually below 3) that orders the hits of one search and means nothing across searches. --json names it
    in score_kind. --explain says where each score comes from: each retriever's rank, own score and margin
    (what it added), then the session, neighbour, words and time gains (and the time phrase matched). A newer
    block that restates older ones is moved just above them, whatever its score: its line says "moved up
    above" them (--json: supersedes), and theirs "restated by" it (--json: superseded_by).

    Filters are exact and hold in every mode: --session, --block-id and --kind (each repeatable),
    --annotation KEY=VALUE (every pair; checked before the top-k cut, or on the top k with --post-filter),
    --ingested-after/--ingested-before (when the block was written, beside --after/--before for when it was
    said) and --prompt ID[@VERSION] (the registry prompt that extracted it).

    \b
    Example:
      memlane search alice "what is my sister called?" -k 5 --json
      memlane search alice "trips" --session s1 --session s2 --annotation topic=travel
    """
    with closing(open_memory(store, embedder)) as mem:
        hits = mem.search(
            user, query, k, mode=mode, before=before, after=after, at=at, filters=filters, explain=explain
        )
    if as_json:
        click.echo(json.dumps([hit_json(h) for h in hits], ensure_ascii=False))
        return
    for i, h in enumerate(hits, start=1):
        text = h.block.message.replace("\n", " | ")
        click.echo(f"{i:>3}. {h.score:.4f}  [{h.block.time_annotation}] ({h.block.perspective}) {text[:160]}")
        if h.supersedes:
            click.echo(f"       moved up above {', '.join(h.supersedes)}: it restates them")
        if h.superseded_by:
            click.echo(f"       restated by newer {', '.join(h.superseded_by)}")
        if h.explanation is not None:
            click.echo(f"       {explained(h.explanation)}")


def explained(e: Explanation) -> str:
    """One line of why a hit scored what it did: retrievers (rank, score, margin), fused, each gain earned."""
    parts = [f"{p.retriever} #{p.rank} score {p.score:.4f} margin {p.margin:.4f}" for p in e.retrievers]
    gains = {"session": e.session_gain, "neighbour": e.neighbour_gain, "words": e.words_gain, "time": e.time_gain}
    line = "; ".join(parts) or "no retriever"
    line += f" = fused {e.fused:.4f}"
    line += "".join(f" + {name} {gain:.4f}" for name, gain in gains.items() if gain)
    if e.time_phrases:
        line += " (matched " + ", ".join(repr(t) for t in e.time_phrases) + ")"
    return line


@click.command("delete")
@click.argument("user")
@click.argument("block_id")
@store_options
def delete_cmd(user: str, block_id: str, store: Path, embedder: str) -> None:
    """Delete one of USER's blocks with everything that refers to it: its keys, vectors, extraction job and
    the LLM calls of its extraction (in the call log: --llm-log, MEMLANE_LLM_LOG, or STORE.calls.db).

    \b
    Example:
      memlane delete alice 01a2377a3c1e9f0d8b7a6c
    """
    with closing(open_memory(store, embedder)) as mem:
        mem.delete(user, block_id)
    click.echo(f"deleted block {block_id} of {user}")


@click.command("delete-user")
@click.argument("user")
@store_options
def delete_user_cmd(user: str, store: Path, embedder: str) -> None:
    """Delete USER and everything of theirs, API keys and LLM calls included (the call log: MEMLANE_LLM_LOG,
    or STORE.calls.db). Final: an add in flight for USER fails or is deleted with them; a later add starts
    USER afresh.

    \b
    Example:
      memlane delete-user alice
    """
    with closing(open_memory(store, embedder)) as mem:
        deleted = mem.delete_user_counts(user)
    click.echo(f"deleted {user}: {deleted.blocks} blocks, {deleted.keys} API keys")


@click.command("get")
@click.argument("user")
@click.argument("block_id")
@store_options
def get_cmd(user: str, block_id: str, store: Path, embedder: str) -> None:
    """Print one of USER's blocks as JSON.

    \b
    Example:
      memlane get alice 01a2377a3c1e9f0d8b7a6c
    """
    with closing(open_memory(store, embedder)) as mem:
        click.echo(json.dumps(block_json(mem.get(user, block_id)), ensure_ascii=False, indent=2))


@click.command("list")
@click.argument("user")
@click.option("--conversation", "conversation_id", default=None)
@click.option("--session", "session_id", default=None)
@click.option("--limit", type=LIMIT, default=100, show_default=True)
@click.option("--offset", type=OFFSET, default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.option("--ids", "ids_only", is_flag=True, help="Print only the block ids, one per line.")
@filter_options(sessions=False)
@store_options
def list_cmd(
    user: str,
    conversation_id: str | None,
    session_id: str | None,
    limit: int,
    offset: int,
    as_json: bool,
    ids_only: bool,
    filters: Filters | None,
    store: Path,
    embedder: str,
) -> None:
    """List USER's blocks in event-time order, --limit at a time from --offset.

    When more blocks follow, one line on stderr says how many and the --offset of the next page (stdout
    holds the blocks only; with --json, the same JSON list as always).

    With a filter (--kind, --block-id, --annotation, --ingested-after/--ingested-before, --prompt: those of
    `memlane search`), the blocks that pass it, the latest said first.

    \b
    Example:
      memlane list alice --session s1 --json
      memlane list alice --limit 100 --offset 100
      memlane list alice --kind fact --annotation topic=travel
      memlane delete alice "$(memlane list alice --ids --limit 1)"
    """
    with closing(open_memory(store, embedder)) as mem:
        if filters is None:
            blocks = mem.list(user, conversation_id=conversation_id, session_id=session_id, limit=limit, offset=offset)
            total = (
                mem.count(user, conversation_id=conversation_id, session_id=session_id)
                if len(blocks) == limit
                else offset + len(blocks)
            )
        else:
            if conversation_id is not None:
                raise ValidationError("cannot be combined with a filter; use --session", where="--conversation")
            if session_id is not None:
                filters = dataclasses.replace(filters, sessions=(session_id,))
            page = mem.browse(user, filters, order="event", limit=limit, offset=offset)
            blocks, total = page.items, page.total
    if ids_only:
        for b in blocks:
            click.echo(b.id)
        return
    if as_json:
        click.echo(json.dumps([block_json(b) for b in blocks], ensure_ascii=False))
    else:
        for b in blocks:
            click.echo(f"{b.id}  [{b.time_annotation}] ({b.perspective}) {b.message.replace(chr(10), ' | ')[:160]}")
    more = total - offset - len(blocks)
    if more > 0:
        click.echo(
            f"... {more} more blocks ({total} in all); use --limit/--offset: the next page is "
            f"--offset {offset + len(blocks)}",
            err=True,
        )


@click.command("users")
@click.option("--name", "display_name", default=None, help="Only users with this display name, exactly.")
@click.option("--contains", default=None, help="Only users whose name or display name holds this text, in any case.")
@click.option(
    "--metadata", "metadata_pairs", multiple=True, metavar="KEY=VALUE", help="Only users with this metadata pair."
)
@click.option("--json", "as_json", is_flag=True)
@store_options
def users_cmd(
    display_name: str | None,
    contains: str | None,
    metadata_pairs: tuple[str, ...],
    as_json: bool,
    store: Path,
    embedder: str,
) -> None:
    """List the users (namespaces) in the store: name, blocks, retention policy ("default" unless their own).
    --name and --metadata (repeat: every pair) keep those that match exactly; --contains those whose name
    or display name holds the text, in any case.

    \b
    Example:
      memlane users --json
      memlane users --metadata team=blue
      memlane users --contains smith
    """
    metadata = parse_pairs(metadata_pairs, "--metadata")
    with closing(open_memory(store, embedder)) as mem:
        filtered = display_name is not None or metadata is not None or bool(contains)
        users = _all_users(mem, display_name, metadata, contains) if filtered else mem.users()
        own = mem.retention_policies().users
    if as_json:
        rows = [{**user_json(u), "retention": "default" if u.name not in own else asdict(own[u.name])} for u in users]
        click.echo(json.dumps(rows, ensure_ascii=False))
        return
    for u in users:
        # A name stored before the name rule may hold a right-to-left override: printed escaped.
        policy = own[u.name].describe() if u.name in own else "default"
        click.echo(f"{shown(u.name)}\t{u.blocks}\t{policy}")


def _all_users(
    mem: Memory, name: str | None, metadata: dict[str, str] | None, contains: str | None
) -> builtins.list[UserInfo]:
    """Every user that matches, page after page."""
    found: builtins.list[UserInfo] = []
    while True:
        page = mem.list_users(name=name, metadata=metadata, limit=1000, offset=len(found), contains=contains)
        found.extend(page.items)
        if not page.items or len(found) >= page.total:
            return found


@click.command("compact")
@store_path_option("Path of the SQLite store. [env MEMLANE_STORE]")
def compact_cmd(store: str) -> None:
    """Rewrite a SQLite store with 16 KiB pages, each user's rows contiguous and no free space.

    Stores made before memlane used 16 KiB pages load a user's vectors about twice as slowly; run this
    once, while nothing else has the store open (it refuses otherwise).

    \b
    Example:
      memlane compact --store memlane.db
    """
    from memlane.core.store.postgres import is_postgres_url
    from memlane.core.store.sqlite.base import PAGE_SIZE
    from memlane.core.store.sqlite.store import SqliteStore

    if is_postgres_url(store):
        raise ConfigError("compact is for the SQLite store; on PostgreSQL, VACUUM and CLUSTER do this")
    sqlite = SqliteStore(store, create=False)
    try:
        before, after = sqlite.compact()
    finally:
        sqlite.close()
    click.echo(f"compacted {store}: {before / 1e6:.1f} MB -> {after / 1e6:.1f} MB, {PAGE_SIZE // 1024} KiB pages")


@click.command("init")
@store_path_option("Path of the SQLite store, or a postgresql:// URL. [env MEMLANE_STORE]")
def init_cmd(store: str) -> None:
    """Create an empty store (a SQLite file, or memlane's tables in a PostgreSQL database); an existing
    store is left as it is (brought up to this memlane's schema).

    Read-only commands (search, list, get, users, delete-user, queue status, worker) never create one: on a
    path with no store they exit 3. add, serve and mcp create the store on first use, as init does.

    \b
    Example:
      memlane init --store memlane.db
    """
    from memlane.core.store.postgres import is_postgres_url, open_postgres, redact
    from memlane.core.store.sqlite.store import SqliteStore

    def open_store(create: bool) -> None:
        opened = open_postgres(store, create=create) if is_postgres_url(store) else SqliteStore(store, create=create)
        opened.close()

    where = redact(store) if is_postgres_url(store) else store
    try:
        open_store(create=False)
    except StoreNotFoundError:
        open_store(create=True)
        click.echo(f"created a store at {where}")
        return
    click.echo(f"a store exists at {where}; left as it is")


def register(group: click.Group) -> None:
    for cmd in (init_cmd, add_cmd, search_cmd, delete_cmd, delete_user_cmd, get_cmd, list_cmd, users_cmd, compact_cmd):
        group.add_command(cmd)
