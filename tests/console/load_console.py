"""Server time per page view of the console, for a user with many blocks.

    .venv/bin/python tests/console/load_console.py --blocks 100000 --repeat 20
    .venv/bin/python tests/console/load_console.py --blocks 2000 --users 100000 --repeat 20
    .venv/bin/python tests/console/load_console.py --blocks 2000 --users 100000 --postgres "$MEMLANE_TEST_POSTGRES_URL"

With ``--users N`` it also makes N more users (ids ``user-000001``..., display names from a list of first
and last names) and times the users page found by part of a name (``GET /v1/users?q=``).

Fills a store in a temporary folder with one user's ``--blocks`` blocks (exchanges of two messages, stored
from both sides, in sessions of 200 blocks; the hashing embedder), serves it on a free loopback port
(uvicorn on a thread, as the browser tests do), then replays the API calls each console page makes, in
the order the page makes them, ``--repeat`` times, and prints p50/p95 of each page view's total time and of
its slowest call. Only loopback is targeted; it stops by itself.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from console_support import ADMIN_KEY, start_console

from memlane.core.memory import AddRequest
from memlane.core.store.postgres.schema import drop_schema
from memlane.core.store.postgres.store import PostgresStore

WORDS = ["sister", "Lisbon", "cello", "garden", "coffee", "dog", "trip", "Japan", "novel", "marathon", "recipe",
         "birthday", "concert", "museum", "river", "mountain", "camera", "guitar", "chess", "puzzle"]  # fmt: skip
USER = "big"
PER_ADD = 100  # exchanges per add (200 blocks: one session)


def fill(console_memory: object, blocks: int) -> float:
    """Adds ``blocks`` blocks for USER; returns the seconds it took."""
    rng = random.Random(7)
    start = time.perf_counter()
    exchanges = blocks // 2
    batch: list[AddRequest] = []
    for first in range(0, exchanges, PER_ADD):
        messages = []
        for i in range(first, min(exchanges, first + PER_ADD)):
            words = " ".join(rng.choice(WORDS) for _ in range(8))
            messages += [
                {"role": "user", "content": f"Note {i}: {words}.", "time": 1_600_000_000 + i * 600},
                {"role": "assistant", "content": f"Noted ({i})."},
            ]
        batch.append(AddRequest(USER, messages, session_id=f"s{first // PER_ADD}"))
        if len(batch) == 20:
            console_memory.add_many(batch)  # type: ignore[attr-defined]
            batch = []
    if batch:
        console_memory.add_many(batch)  # type: ignore[attr-defined]
    return time.perf_counter() - start


FIRST = ["Ana", "Bruno", "Carla", "Diego", "Elena", "Farid", "Greta", "Hugo", "Ines", "Jonas", "Kemal", "Lena",
         "Marta", "Nils", "Olga", "Pedro", "Quinn", "Rosa", "Sven", "Tomas"]  # fmt: skip
LAST = ["Silva", "Moreau", "Keller", "Novak", "Rossi", "Jansen", "Berg", "Costa", "Weber", "Lund", "Horvat",
        "Dubois", "Meyer", "Ortega", "Petrov", "Quist", "Ramos", "Sato", "Tanaka", "Varga"]  # fmt: skip


def make_users(console_memory: object, users: int) -> float:
    """Makes ``users`` users with display names; returns the seconds it took."""
    rng = random.Random(11)
    start = time.perf_counter()
    for i in range(1, users + 1):
        name = f"{rng.choice(FIRST)} {rng.choice(LAST)}-{rng.randrange(1000)}"
        console_memory.create_user(f"user-{i:06d}", display_name=name)  # type: ignore[attr-defined]
    return time.perf_counter() - start


def user_searches(admin: httpx.Client) -> dict[str, list[Callable[[], httpx.Response]]]:
    """The users page found by part of a name: a common part, a rare one, one that matches nobody."""

    def view(q: str) -> list[Callable[[], httpx.Response]]:
        return [lambda: admin.get("/v1/retention"), lambda: admin.get("/v1/users", params={"limit": 50, "q": q})]

    return {"users, q=silva (1 in 20)": view("silva"), "users, q=ortega-42 (rare)": view("ortega-42"),
            "users, q=zzz (none)": view("zzz"), "users, q=user-0999 (ids)": view("user-0999")}  # fmt: skip


def page_views(admin: httpx.Client, total: int, block_id: str) -> dict[str, list[Callable[[], httpx.Response]]]:
    """Each page's API calls, as the console's views make them (docs/console.md); the console sends a page's
    calls together, so a page view takes about as long as its slowest call."""
    base = f"/v1/users/{USER}"
    last = (total - 1) // 50 * 50
    sessions = total // (2 * PER_ADD)
    middle = f"s{sessions // 2}"  # a session halfway through the user's history
    # The timeline lists the oldest sessions first: the API's first page (it gives the total), then its last.
    timeline = [
        lambda: admin.get(f"{base}/sessions", params={"limit": 20}),
        lambda: admin.get(f"{base}/sessions", params={"limit": 20, "offset": max(0, sessions - 20)}),
    ]
    return {
        "users": [lambda: admin.get("/v1/retention"), lambda: admin.get("/v1/users", params={"limit": 50})],
        "user, first page": [
            lambda: admin.get(f"{base}/memories", params={"limit": 50, "offset": 0}),
            lambda: admin.get("/v1/retention"),
            lambda: admin.get(f"{base}/keys"),
            *timeline,
            lambda: admin.get(base),
        ],
        "user, last page": [
            lambda: admin.get(f"{base}/memories", params={"limit": 50, "offset": last}),
            lambda: admin.get("/v1/retention"),
            lambda: admin.get(f"{base}/keys"),
            *timeline,
            lambda: admin.get(base),
        ],
        "session": [
            lambda: admin.get(f"{base}/sessions/{middle}"),
            lambda: admin.get(f"{base}/memories", params={"session_id": middle, "limit": 50}),
        ],
        "block": [lambda: admin.get(f"{base}/memories/{block_id}"), lambda: admin.get(f"{base}/sessions/{middle}")],
        # The console asks for each hit's explanation; the plain search beside it is what explaining costs.
        "search (hybrid, k=10)": [
            lambda: admin.post(
                f"{base}/search", json={"query": "When did I visit the museum in Lisbon?", "k": 10, "explain": True}
            )
        ],
        "search, not explained": [
            lambda: admin.post(f"{base}/search", json={"query": "When did I visit the museum in Lisbon?", "k": 10})
        ],
        "search, one session (hybrid, k=10)": [
            lambda: admin.post(
                f"{base}/search", json={"query": "museum in Lisbon", "k": 10, "sessions": [middle], "explain": True}
            )
        ],
        "operations": [
            lambda: admin.get("/v1/queue"),
            lambda: admin.get("/healthz"),
            lambda: admin.get("/v1/retention"),
            lambda: admin.get("/v1/llm"),
            lambda: admin.get("/v1/prompts", params={"limit": 50, "include_archived": True}),
        ],
    }


def pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--blocks", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--users", type=int, default=0, help="this many more users, and the users page by q")
    parser.add_argument("--postgres", metavar="URL", help="a PostgreSQL store there (a schema of its own, dropped)")
    args = parser.parse_args()
    schema = f"load_console_{uuid.uuid4().hex[:12]}"
    with tempfile.TemporaryDirectory() as folder:
        store = None if args.postgres is None else PostgresStore(args.postgres, schema=schema, durability="normal")
        console = start_console(Path(folder), store)
        try:
            took = fill(console.memory, args.blocks)
            if args.users:
                print(f"{args.users} more users made in {make_users(console.memory, args.users):.0f} s")
            with httpx.Client(base_url=console.base, headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as admin:
                page = admin.get(f"/v1/users/{USER}/memories", params={"limit": 1, "offset": args.blocks // 2}).json()
                total, block_id = page["total"], page["items"][0]["block_id"]
                print(f"{total} blocks of one user, stored in {took:.0f} s")
                print("| page view | API calls | p50 sum | p95 sum | p50 slowest call |")
                print("|---|---|---|---|---|")
                views = page_views(admin, total, block_id)
                if args.users:
                    views.update(user_searches(admin))
                for name, calls in views.items():
                    totals, slowest = [], []
                    for _ in range(args.repeat + 1):
                        times = []
                        for call in calls:
                            start = time.perf_counter()
                            res = call()
                            times.append(time.perf_counter() - start)
                            assert res.status_code == 200, (name, res.status_code, res.text[:200])
                        totals.append(sum(times))
                        slowest.append(max(times))
                    totals, slowest = totals[1:], slowest[1:]  # the first view warms caches
                    ms = [pct(totals, 0.5) * 1000, pct(totals, 0.95) * 1000, statistics.median(slowest) * 1000]
                    print(f"| {name} | {len(calls)} | " + " | ".join(f"{x:.1f} ms" for x in ms) + " |")
        finally:
            console.stop()
            if args.postgres is not None:
                drop_schema(args.postgres, schema)


if __name__ == "__main__":
    main()
