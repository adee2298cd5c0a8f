"""Benchmark data sets: typed model, streaming loaders, the x500 haystack expansion, the registry."""

from memlane.bench.datasets.expansion import expand_haystacks
from memlane.bench.datasets.locomo import (
    CATEGORY_NAMES,
    MEM0_CATEGORY_NAMES,
    iter_locomo,
    load_locomo,
    locomo_session_of,
)
from memlane.bench.datasets.longmemeval import iter_longmemeval, load_longmemeval, longmemeval_turn_id
from memlane.bench.datasets.model import Dataset, Haystack, Sample, Session, Turn, dataset_from_haystacks
from memlane.bench.datasets.registry import (
    DATASETS,
    DatasetNotFound,
    DatasetStream,
    dataset_path,
    find_dataset,
    load_dataset,
    open_dataset,
    verify_file,
)
from memlane.bench.datasets.source import content_sha256, file_sha256

__all__ = [
    "CATEGORY_NAMES",
    "DATASETS",
    "MEM0_CATEGORY_NAMES",
    "Dataset",
    "DatasetNotFound",
    "DatasetStream",
    "Haystack",
    "Sample",
    "Session",
    "Turn",
    "content_sha256",
    "dataset_from_haystacks",
    "dataset_path",
    "expand_haystacks",
    "file_sha256",
    "find_dataset",
    "iter_locomo",
    "iter_longmemeval",
    "load_dataset",
    "load_locomo",
    "load_longmemeval",
    "locomo_session_of",
    "longmemeval_turn_id",
    "open_dataset",
    "verify_file",
]
