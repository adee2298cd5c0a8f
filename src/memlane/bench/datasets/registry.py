"""Where the data lives, and the named data sets the harness knows.

Layout under the data directory (the one the shared data folder uses; files directly in the data
directory are accepted too)::

    locomo/locomo10.json
    longmemeval/longmemeval_oracle.json
    longmemeval/longmemeval_s_cleaned.json[.xz]   (or longmemeval_s_cleaned.partial499.json.xz)
    longmemeval/longmemeval_m_cleaned.json[.xz]
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from memlane.bench.datasets.expansion import DEFAULT_SEED, DEFAULT_SIZE, expand_haystacks
from memlane.bench.datasets.locomo import iter_locomo
from memlane.bench.datasets.longmemeval import iter_longmemeval
from memlane.bench.datasets.model import Dataset, Haystack, dataset_from_haystacks
from memlane.bench.datasets.source import sources_sha256
from memlane.core.errors import ConfigError

ENV_VAR = "MEMLANE_DATA"

ORIGIN_HELP = (
    "LoCoMo: locomo10.json from GitHub snap-research/LoCoMo (data/locomo10.json, CC BY-NC 4.0), "
    "placed as <data dir>/locomo/locomo10.json. LongMemEval: longmemeval_oracle.json, "
    "longmemeval_s_cleaned.json and longmemeval_m_cleaned.json from the Hugging Face dataset "
    "xiaowu0162/longmemeval-cleaned (MIT), placed in <data dir>/longmemeval/ (.json or .json.xz); the "
    "shared copy was reassembled from GitHub hussainzs/Memoria (see its README). Pass --data-dir, set "
    f"{ENV_VAR}, or put the files in ../shared/datasets next to the repository."
)


@dataclass(frozen=True)
class DatasetSpec:
    """A named data set: its folder, candidate file names (first found wins) and loader family."""

    name: str
    subdir: str
    filenames: tuple[str, ...]
    family: str
    expanded: bool = False


DATASETS: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in (
        DatasetSpec("locomo", "locomo", ("locomo10.json",), "locomo"),
        DatasetSpec(
            "longmemeval-s",
            "longmemeval",
            (
                "longmemeval_s_cleaned.json",
                "longmemeval_s_cleaned.json.xz",
                "longmemeval_s_cleaned.partial499.json.xz",
            ),
            "longmemeval",
        ),
        DatasetSpec(
            "longmemeval-oracle",
            "longmemeval",
            ("longmemeval_oracle.json", "longmemeval_oracle.json.xz"),
            "longmemeval",
        ),
        DatasetSpec(
            "longmemeval-m",
            "longmemeval",
            ("longmemeval_m_cleaned.json", "longmemeval_m_cleaned.json.xz"),
            "longmemeval",
        ),
        DatasetSpec(
            "longmemeval-s-x500",
            "longmemeval",
            (
                "longmemeval_s_cleaned.json",
                "longmemeval_s_cleaned.json.xz",
                "longmemeval_s_cleaned.partial499.json.xz",
            ),
            "longmemeval",
            expanded=True,
        ),
    )
}


def _repo_root() -> Path:
    # src/memlane/bench/datasets/registry.py -> repository root (meaningful for editable installs only).
    return Path(__file__).resolve().parents[4]


def resolve_data_dir(explicit: Path | None = None) -> Path:
    """The data directory: ``explicit`` (``--data-dir``), else ``$MEMLANE_DATA``, else the first existing
    ``../shared/datasets`` relative to the working directory or the repository root.

    Raises ConfigError when an explicit or environment directory does not exist, or nothing is found.
    """
    if explicit is not None:
        if not Path(explicit).is_dir():
            raise ConfigError(f"--data-dir {explicit} is not a directory. {ORIGIN_HELP}")
        return Path(explicit)
    env = os.environ.get(ENV_VAR)
    if env:
        if not Path(env).is_dir():
            raise ConfigError(f"{ENV_VAR}={env} is not a directory. {ORIGIN_HELP}")
        return Path(env)
    for base in (Path.cwd(), _repo_root()):
        candidate = base.parent / "shared" / "datasets"
        if candidate.is_dir():
            return candidate
    raise ConfigError(f"no data directory found. {ORIGIN_HELP}")


def dataset_path(name: str, data_dir: Path) -> Path:
    """The source file of data set ``name`` under ``data_dir``; ConfigError if unknown or missing."""
    spec = DATASETS.get(name)
    if spec is None:
        raise ConfigError(f"unknown data set {name!r}; known: {', '.join(DATASETS)}")
    for filename in spec.filenames:
        for folder in (data_dir / spec.subdir, data_dir):
            if (folder / filename).is_file():
                return folder / filename
    wanted = " or ".join(spec.filenames)
    if name == "longmemeval-m":
        raise ConfigError(
            f"LongMemEval_M is not available: no {wanted} in {data_dir / spec.subdir}. It is only "
            "distributed on Hugging Face (xiaowu0162/longmemeval-cleaned, ~2.7 GB); download it there."
        )
    raise ConfigError(f"data set {name!r}: no {wanted} in {data_dir / spec.subdir}. {ORIGIN_HELP}")


@dataclass(frozen=True)
class DatasetStream:
    """A named data set read lazily: iterate for :class:`Haystack` s, ``load()`` to materialise."""

    name: str
    paths: tuple[Path, ...]
    opener: Callable[[], Iterator[Haystack]]
    params: Mapping[str, int | str] = field(default_factory=dict)

    def __iter__(self) -> Iterator[Haystack]:
        return self.opener()

    def sha256(self) -> str:
        """Digest of the source file bytes (streamed; does not parse)."""
        return sources_sha256(self.paths)

    def load(self) -> Dataset:
        """Materialise into a :class:`Dataset`."""
        return dataset_from_haystacks(self.name, self.sha256(), iter(self), self.params)


def open_dataset(
    name: str, data_dir: Path | None = None, *, size: int = DEFAULT_SIZE, seed: int = DEFAULT_SEED
) -> DatasetStream:
    """Open data set ``name`` (see :data:`DATASETS`) for streaming. ``size``/``seed`` only affect
    ``longmemeval-s-x500``."""
    path = dataset_path(name, resolve_data_dir(data_dir))
    spec = DATASETS[name]
    if spec.family == "locomo":
        return DatasetStream(name, (path,), lambda: iter_locomo(path))
    if spec.expanded:
        return DatasetStream(
            name,
            (path,),
            lambda: expand_haystacks(iter_longmemeval(path), size=size, seed=seed),
            {"size": size, "seed": seed},
        )
    return DatasetStream(name, (path,), lambda: iter_longmemeval(path))


def load_dataset(
    name: str, data_dir: Path | None = None, *, size: int = DEFAULT_SIZE, seed: int = DEFAULT_SEED
) -> Dataset:
    """Load data set ``name`` fully into memory (``longmemeval-m`` is better streamed with open_dataset)."""
    return open_dataset(name, data_dir, size=size, seed=seed).load()
