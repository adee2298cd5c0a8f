"""Digests of what memlane's searches and QA pipeline produce, to prove that a change of code changed none of it.

    python scripts/snapshot_results.py run OUT            # run the set below into OUT, write OUT/digests.json
    python scripts/snapshot_results.py compare OLD NEW    # exit 1 and list what differs

The set: the LoCoMo retrieval benchmark with every named search preset and the default baselines; every preset
on LongMemEval-S when ``$MEMLANE_DATA`` holds it; the QA pipeline on LoCoMo (and LongMemEval-S) with the scripted
LLM as reader and judge, at two retrieval settings. Each output file is digested byte for byte (the exported
rankings, the answers) or after dropping what varies from run to run (times, latencies, git revision,
package versions: the run logs and results). It runs the ``memlane`` command of the current environment, so
the same script measures code before and after a change (check the old code out in a worktree, run there).
``rehash`` recomputes the digests of a folder already run (after a change of this script).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

PRESETS = (
    "vector",
    "keyword",
    "hybrid",
    "hybrid-rrf",
    "hybrid-rank",
    "hybrid-no-time",
    "hybrid-no-words",
    "hybrid-fusion",
    "hybrid-session",
    "hybrid-context",
    "vector-messages",
    "keyword-messages",
    "hybrid-messages",
)
VOLATILE = re.compile(
    r"^latency|_ms$|_s$|_p50$|_p95$|^seconds$|_at$|^at$|^git_revision$|^packages$|^warm$|^ingest$|"
    r"^calibrations?$|^segments$|^call_id$"
)
RUN_RECORDS = ("segment", "calibration")  # one per invocation and every hundred questions: not results


def memlane(*args: str) -> None:
    exe = Path(sys.executable).with_name("memlane")
    subprocess.run([str(exe), *args, "--quiet"], check=True, stdout=subprocess.DEVNULL)


def stable(value: Any) -> Any:
    """``value`` without the keys that differ between two runs of the same code."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if not VOLATILE.search(k)}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def digest_file(path: Path) -> str:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if path.name.startswith(("log.jsonl", "results.json")):
        lines = data.decode("utf-8").splitlines() if "jsonl" in path.name else [data.decode("utf-8")]
        records = [json.loads(line) for line in lines if line.strip()]
        kept = [json.dumps(stable(r), sort_keys=True) for r in records if r.get("type") not in RUN_RECORDS]
        # Concurrent QA workers log in the order questions finish: compare the set of records.
        data = "\n".join(sorted(kept)).encode()
    return hashlib.sha256(data).hexdigest()


def digests(root: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for run in sorted(p for p in root.iterdir() if p.is_dir() and p.name != "cache"):
        for path in sorted(run.iterdir()):
            if path.suffix in (".jsonl", ".json", ".gz"):
                out[f"{run.name}/{path.name.removesuffix('.gz')}"] = digest_file(path)
    return out


def run(out: Path, cache: Path | None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    common = ["--cache-dir", str(cache)] if cache else []
    modes = [a for m in PRESETS for a in ("--mode", m)]
    lme = bool(os.environ.get("MEMLANE_DATA"))
    memlane("bench", "retrieval", "locomo", *modes, "--baselines", "default", "--out", str(out / "locomo"), *common)
    if lme:  # the baselines' first LongMemEval-S run embeds 19,000 sessions: presets only
        memlane("bench", "retrieval", "longmemeval-s", *modes, "--out", str(out / "lme-s"), *common)
    qa = ["--llm", "scripted", "--judge", "scripted", *common]
    for name, dataset, limit in (("locomo", "locomo", "120"), ("lme-s", "longmemeval-s", "60")):
        if dataset != "locomo" and not lme:
            continue
        memlane("bench", "qa", dataset, *qa, "--limit", limit, "--out", str(out / f"qa-{name}"))
        memlane("bench", "qa", dataset, *qa, "--limit", limit, "--k", "5", "--mode", "keyword",
                "--out", str(out / f"qa-{name}-k5-keyword"))  # fmt: skip
    (out / "digests.json").write_text(json.dumps(digests(out), indent=1, sort_keys=True) + "\n")
    print(f"{len(digests(out))} files digested into {out / 'digests.json'}")


def compare(old: Path, new: Path) -> int:
    a = json.loads((old / "digests.json").read_text())
    b = json.loads((new / "digests.json").read_text())
    bad = 0
    for name in sorted(set(a) | set(b)):
        if a.get(name) != b.get(name):
            bad += 1
            print(f"DIFFERS  {name}  {a.get(name, 'missing')[:12]}  {b.get(name, 'missing')[:12]}")
    same = len(set(a) & set(b)) - bad
    print(f"{same} files identical, {bad} differ")
    return 1 if bad else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("out", type=Path)
    r.add_argument("--cache-dir", type=Path, default=None, help="bench stores (default: memlane's bench cache)")
    r.add_argument("--fresh", action="store_true", help="delete OUT first")
    h = sub.add_parser("rehash")
    h.add_argument("out", type=Path)
    c = sub.add_parser("compare")
    c.add_argument("old", type=Path)
    c.add_argument("new", type=Path)
    args = parser.parse_args()
    if args.command == "compare":
        return compare(args.old, args.new)
    if args.command == "rehash":
        (args.out / "digests.json").write_text(json.dumps(digests(args.out), indent=1, sort_keys=True) + "\n")
        return 0
    if args.fresh and args.out.exists():
        shutil.rmtree(args.out)
    run(args.out, args.cache_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
