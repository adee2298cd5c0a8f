"""Finding, checking and opening the named data sets (see :mod:`memlane.bench.datasets.catalog`).

Layout of a data folder (the subfolders are optional: files directly in the folder are found too)::

    locomo/locomo10.json[.xz]
    longmemeval/longmemeval_oracle.json[.xz]
    longmemeval/longmemeval_s_cleaned.json[.xz]   (or longmemeval_s_cleaned.partial499.json.xz)
    longmemeval/longmemeval_m_cleaned.json[.xz]
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from memlane.bench.datasets.catalog import CATALOG, ENV_VAR, SHIPPED_DIR, DatasetInfo, KnownFile
from memlane.bench.datasets.expansion import DEFAULT_SEED, DEFAULT_SIZE, expand_haystacks
from memlane.bench.datasets.model import Dataset, Haystack, dataset_from_haystacks, per_category
from memlane.bench.datasets.source import content_sha256, file_sha256
from memlane.core.errors import ConfigError, NotFoundError, ValidationError
from memlane.settings import read_setting

# The name the rest of the harness uses for the catalog.
DATASETS: Mapping[str, DatasetInfo] = CATALOG
Origin = Literal["--data-dir", "MEMLANE_DATA", "shipped"]
Status = Literal["matches", "differs", "unlisted"]


class DatasetNotFound(NotFoundError):
    """A data set's file is in none of the places searched; the message says where to get it."""


def _unknown(name: str) -> ConfigError:
    return ConfigError(f"unknown data set {name!r}; known: {', '.join(CATALOG)}")


def data_dirs(explicit: Path | None = None) -> list[tuple[Origin, Path]]:
    """The data folders searched, in order: ``--data-dir`` if given, else ``$MEMLANE_DATA`` if set (the
    copies shipped with memlane come after either). A folder named but missing is an error (exit 3)."""
    if explicit is not None:
        if not Path(explicit).is_dir():
            raise NotFoundError(f"--data-dir {explicit} is not a directory")
        return [("--data-dir", Path(explicit))]
    env: Path | None = read_setting("data")
    if env is not None:
        if not env.is_dir():
            raise NotFoundError(f"{ENV_VAR}={env} is not a directory")
        return [("MEMLANE_DATA", env)]
    return []


@dataclass(frozen=True)
class Located:
    """Where a data set's file was found, and by which rule."""

    name: str
    path: Path
    origin: Origin


def _shipped_path(info: DatasetInfo) -> Path | None:
    return SHIPPED_DIR / info.subdir / info.shipped if info.shipped else None


def find_dataset(name: str, data_dir: Path | None = None) -> Located | None:
    """The file data set ``name`` is read from (see :func:`data_dirs`), or None if there is none."""
    info = CATALOG.get(name)
    if info is None:
        raise _unknown(name)
    for origin, folder in data_dirs(data_dir):
        for filename in info.filenames:
            for sub in (folder / info.subdir, folder):
                if (sub / filename).is_file():
                    return Located(name, sub / filename, origin)
    shipped = _shipped_path(info)
    if shipped is not None and shipped.is_file():
        return Located(name, shipped, "shipped")
    return None


def missing_message(name: str, data_dir: Path | None = None) -> str:
    """One paragraph: which data set is missing, where it was looked for, and where to get it."""
    info = CATALOG[name]
    try:
        looked = [f"{origin} {folder}" for origin, folder in data_dirs(data_dir)]
    except NotFoundError as exc:
        looked = [str(exc)]
    if info.shipped:
        looked.append(f"the copy shipped with memlane ({info.shipped}: missing, so this install is broken)")
    where = "; ".join(looked) if looked else f"no data folder (neither --data-dir nor {ENV_VAR} is set)"
    wanted = " or ".join(info.filenames)
    return (
        f"data set {name!r} ({info.title}) not found. Looked in: {where}. It is read from {wanted}, in "
        f"<folder>/{info.subdir}/ or <folder>/ itself. Get it from {info.source}: {info.url} (licence: "
        f"{info.licence}); then pass --data-dir <folder> or set {ENV_VAR}=<folder>. `memlane datasets` lists "
        "every data set and where each is found."
    )


def dataset_path(name: str, data_dir: Path | None = None) -> Path:
    """The source file of data set ``name``; DatasetNotFound (exit 3) with the guidance if it is missing."""
    found = find_dataset(name, data_dir)
    if found is None:
        raise DatasetNotFound(missing_message(name, data_dir))
    return found.path


@dataclass(frozen=True)
class Verification:
    """A file checked against the catalog: ``matches`` a published digest, ``differs`` from it, or is
    ``unlisted`` (no digest published for that file name)."""

    path: Path
    dataset: str | None
    known: KnownFile | None
    sha256: str
    content_sha256: str
    status: Status

    @property
    def expected(self) -> str | None:
        """The published digest of the content, if any."""
        return self.known.content_sha256 if self.known else None


def _catalog_entry(path: Path, dataset: str | None) -> tuple[str | None, KnownFile | None]:
    infos = [CATALOG[dataset]] if dataset else list(CATALOG.values())
    for info in infos:
        known = info.known(path.name)
        if known is not None:
            return info.name, known
    return dataset, None


def verify_file(path: Path, dataset: str | None = None) -> Verification:
    """Check ``path`` against the published digests of its file name (of data set ``dataset``, or of any
    data set when None). The content digest is computed only when the stored bytes match no listed file."""
    path = Path(path)
    stat = path.stat() if path.is_file() else None
    if stat is None:
        raise NotFoundError(f"no file at {path}")
    return _verify(path.resolve(), stat.st_size, stat.st_mtime_ns, dataset)


@functools.lru_cache(maxsize=32)
def _verify(path: Path, size: int, mtime_ns: int, dataset: str | None) -> Verification:
    # Cached per (file, size, mtime): `memlane bench` checks a file once however often it is opened.
    name, known = _catalog_entry(path, dataset)
    stored = file_sha256(path)
    if known is not None and known.sha256 == stored and known.content_sha256:
        return Verification(path, name, known, stored, known.content_sha256, "matches")
    content = content_sha256(path, stored)
    if known is None:
        # A renamed copy of a published file is still that file.
        for info in CATALOG.values() if dataset is None else [CATALOG[dataset]]:
            for f in info.files:
                if f.content_sha256 == content:
                    return Verification(path, info.name, f, stored, content, "matches")
    if known is None or known.content_sha256 is None:
        return Verification(path, name, known, stored, content, "unlisted")
    status: Status = "matches" if content == known.content_sha256 else "differs"
    return Verification(path, name, known, stored, content, status)


@dataclass(frozen=True)
class DatasetStream:
    """A named data set read lazily: iterate for :class:`Haystack` s, ``load()`` to materialise.

    ``verification`` tells whether the file is the published one; its ``content_sha256`` is the data set's
    identity (:meth:`sha256`)."""

    name: str
    paths: tuple[Path, ...]
    opener: Callable[[], Iterator[Haystack]]
    params: Mapping[str, int | str] = field(default_factory=dict)
    origin: Origin | None = None
    # Set when only the first N questions of each category are read (:meth:`per_category`): then walking
    # the stream is not walking the data set.
    sampled_per_category: int | None = None
    # Set when only the questions of some categories are read (:meth:`only_categories`).
    sampled_categories: tuple[str, ...] = ()

    @property
    def sampled(self) -> bool:
        """Whether walking the stream is not walking the whole data set."""
        return self.sampled_per_category is not None or bool(self.sampled_categories)

    def __iter__(self) -> Iterator[Haystack]:
        return self.opener()

    @property
    def verification(self) -> Verification:
        return verify_file(self.paths[0], self.name)

    def sha256(self) -> str:
        """sha256 of the source's JSON content (decompressed); see :mod:`memlane.bench.datasets.catalog`."""
        return self.verification.content_sha256

    def load(self) -> Dataset:
        """Materialise into a :class:`Dataset`."""
        return dataset_from_haystacks(self.name, self.sha256(), iter(self), self.params)

    def per_category(self, n: int | None) -> DatasetStream:
        """This data set with only the first ``n`` questions of each category (:func:`per_category`), and
        the namespaces they need; the same data set (its identity and bench store) otherwise."""
        if n is None:
            return self
        opener = self.opener
        return replace(self, opener=lambda: per_category(opener(), n), sampled_per_category=n)

    def only_categories(self, categories: Sequence[str]) -> DatasetStream:
        """This data set with only the questions of ``categories`` (none: all), and the namespaces they
        need; the same data set (its identity and bench store) otherwise."""
        if not categories:
            return self
        opener, keep = self.opener, frozenset(categories)
        return replace(self, opener=lambda: _only(opener(), keep), sampled_categories=tuple(categories))


def _only(haystacks: Iterator[Haystack], categories: frozenset[str]) -> Iterator[Haystack]:
    for haystack in haystacks:
        kept = tuple(s for s in haystack.samples if s.category in categories)
        if kept:
            yield replace(haystack, samples=kept)


def open_dataset(
    name: str, data_dir: Path | None = None, *, size: int = DEFAULT_SIZE, seed: int = DEFAULT_SEED
) -> DatasetStream:
    """Open data set ``name`` (see :data:`DATASETS`) for streaming. ``size``/``seed`` only affect
    ``longmemeval-s-x500``. The copy shipped with memlane is checked against its published digest here: a
    damaged copy is an error naming the file and both digests."""
    found = find_dataset(name, data_dir)
    if found is None:
        raise DatasetNotFound(missing_message(name, data_dir))
    path, info = found.path, CATALOG[name]
    if found.origin == "shipped":
        check = verify_file(path, name)
        if check.status != "matches":
            raise ValidationError(
                f"the copy of {info.title} shipped with memlane is damaged: the sha256 of its content is "
                f"{check.content_sha256}, expected {check.expected}; reinstall memlane",
                where=str(path),
            )
    read = info.family.read
    if info.expanded:
        return DatasetStream(
            name,
            (path,),
            lambda: expand_haystacks(read(path), size=size, seed=seed),
            {"size": size, "seed": seed},
            origin=found.origin,
        )
    return DatasetStream(name, (path,), lambda: read(path), origin=found.origin)


def load_dataset(
    name: str, data_dir: Path | None = None, *, size: int = DEFAULT_SIZE, seed: int = DEFAULT_SEED
) -> Dataset:
    """Load data set ``name`` fully into memory (``longmemeval-m`` is better streamed with open_dataset)."""
    return open_dataset(name, data_dir, size=size, seed=seed).load()
