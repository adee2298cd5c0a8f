"""Every data set the harness knows: its files, their published sizes and digests, licence and origin.

A data set is found by one rule, the same for every command: the folder given with ``--data-dir``, else
the folder in ``$MEMLANE_DATA``, else the copies that ship inside memlane (only LoCoMo is small enough to
ship: 452 KB xz-compressed). In a data folder, a file is looked for in ``<folder>/<subdir>/`` and then in
``<folder>/`` itself.

A data set's identity (the ``sha256`` recorded with every run and used to key the ingest-once stores) is the
sha256 of its JSON content, decompressed: the shipped ``locomo10.json.xz`` and an uncompressed
``locomo10.json`` are the same data set and give the same identity. For a file whose stored bytes match a
digest listed here, the content digest is taken from this list instead of decompressing the file again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from memlane.bench.datasets.families import LOCOMO, LONGMEMEVAL, Family
from memlane.settings import env_var

ENV_VAR = env_var("data")
SHIPPED_DIR = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class KnownFile:
    """A file name a data set can be read from, with what is known of the published file.

    ``sha256`` is of the bytes as stored (the ``.xz`` bytes for a compressed file), ``content_sha256`` of the
    decompressed JSON (equal to ``sha256`` for a plain file). None where no digest was published."""

    name: str
    size: int | None = None
    sha256: str | None = None
    content_sha256: str | None = None
    note: str = ""
    namespaces: int | None = None  # conversations (LoCoMo) or questions (LongMemEval) in the file


@dataclass(frozen=True)
class DatasetInfo:
    """One named data set: its family (:mod:`memlane.bench.datasets.families`: how it is read, scored and
    reported), where its file is looked for, what it is, under which licence, from where."""

    name: str
    title: str
    family: Family
    subdir: str
    files: tuple[KnownFile, ...]
    licence: str
    source: str
    url: str
    shipped: str | None = None  # file name under SHIPPED_DIR/<subdir>, when memlane ships a copy
    expanded: bool = False
    description: str = ""

    @property
    def filenames(self) -> tuple[str, ...]:
        """The accepted file names, first found wins."""
        return tuple(f.name for f in self.files)

    def known(self, filename: str) -> KnownFile | None:
        return next((f for f in self.files if f.name == filename), None)


_LOCOMO_SHA256 = "79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4"
_S_FILES = (
    KnownFile("longmemeval_s_cleaned.json", note="the official file, 500 questions (about 277 MB)", namespaces=500),
    KnownFile("longmemeval_s_cleaned.json.xz", note="the official file, xz-compressed", namespaces=500),
    KnownFile(
        "longmemeval_s_cleaned.partial499.json.xz",
        size=42_525_492,
        sha256="3ae6b60ef81e321cca4e1b39bd55ec8c3d64f0163fbe4fe161c59b18b2385eb3",
        content_sha256="48351ae4a5d965880de574a8a6ed975ecfd73a40725a42e70713842d2995595a",
        note="499 of the 500 questions (gpt4_7a0daae1 missing), reassembled from a public copy",
        namespaces=499,
    ),
)
_LME_LICENCE = "MIT (LongMemEval); its filler sessions come from ShareGPT and UltraChat, whose terms may apply"
_LME_SOURCE = "Hugging Face dataset xiaowu0162/longmemeval-cleaned (Wu et al., ICLR 2025)"
_LME_URL = "https://huggingface.co/datasets/xiaowu0162/longmemeval-cleaned"

CATALOG: dict[str, DatasetInfo] = {
    info.name: info
    for info in (
        DatasetInfo(
            name="locomo",
            title="LoCoMo",
            family=LOCOMO,
            subdir="locomo",
            files=(
                KnownFile(
                    "locomo10.json",
                    size=2_805_274,
                    sha256=_LOCOMO_SHA256,
                    content_sha256=_LOCOMO_SHA256,
                    namespaces=10,
                ),
                KnownFile(
                    "locomo10.json.xz",
                    size=451_868,
                    sha256="8c8b6a5492a6fd1dda1fe6043acccf782b65099519cfe8fa4161545990d200f6",
                    content_sha256=_LOCOMO_SHA256,
                    note="the same file, xz-compressed: the copy memlane ships",
                    namespaces=10,
                ),
            ),
            licence="CC BY-NC 4.0 (attribution: cite the paper; non-commercial use only)",
            source="GitHub snap-research/LoCoMo, data/locomo10.json (Maharana et al., ACL 2024)",
            url="https://github.com/snap-research/LoCoMo",
            shipped="locomo10.json.xz",
            description="10 long two-person conversations, 1,986 questions",
        ),
        DatasetInfo(
            name="longmemeval-s",
            title="LongMemEval S",
            family=LONGMEMEVAL,
            subdir="longmemeval",
            files=_S_FILES,
            licence=_LME_LICENCE,
            source=_LME_SOURCE,
            url=_LME_URL,
            description="500 questions, each over its own haystack of about 50 sessions",
        ),
        DatasetInfo(
            name="longmemeval-oracle",
            title="LongMemEval oracle",
            family=LONGMEMEVAL,
            subdir="longmemeval",
            files=(
                KnownFile(
                    "longmemeval_oracle.json",
                    size=15_388_478,
                    sha256="821a2034d219ab45846873dd14c14f12cfe7776e73527a483f9dac095d38620c",
                    content_sha256="821a2034d219ab45846873dd14c14f12cfe7776e73527a483f9dac095d38620c",
                    namespaces=500,
                ),
                KnownFile("longmemeval_oracle.json.xz", note="the same file, xz-compressed", namespaces=500),
            ),
            licence=_LME_LICENCE,
            source=_LME_SOURCE,
            url=_LME_URL,
            description="the 500 questions with only their evidence sessions",
        ),
        DatasetInfo(
            name="longmemeval-m",
            title="LongMemEval M",
            family=LONGMEMEVAL,
            subdir="longmemeval",
            files=(
                KnownFile("longmemeval_m_cleaned.json", note="the official file (about 2.7 GB)", namespaces=500),
                KnownFile("longmemeval_m_cleaned.json.xz", note="the official file, xz-compressed", namespaces=500),
            ),
            licence=_LME_LICENCE,
            source=_LME_SOURCE,
            url=_LME_URL,
            description="500 questions, each over about 500 sessions",
        ),
        DatasetInfo(
            name="longmemeval-s-x500",
            title="LongMemEval S, x500 expansion",
            family=LONGMEMEVAL,
            subdir="longmemeval",
            files=_S_FILES,
            licence=_LME_LICENCE,
            source="built by memlane from LongMemEval S (seeded; no file of its own): " + _LME_SOURCE,
            url=_LME_URL,
            expanded=True,
            description="each S haystack grown to 500 sessions with other questions' filler sessions",
        ),
    )
}
