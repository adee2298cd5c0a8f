"""The dev/test split: parameters are chosen on dev only, and the targets are read on test.

* LongMemEval: a question is ``dev`` when the SHA-256 of its ``question_id`` is 0 modulo 5 (about 20%);
  the rule looks at nothing but the id, so it is the same for S, M, oracle and the 500-session haystacks.
* LoCoMo: by conversation, so no conversation is seen on both sides. The ``ceil(20%)`` conversations with
  the lowest SHA-256 of their id are ``dev`` (2 of the 10: ``conv-47`` and ``conv-48``); a rank rule, not a
  modulus, because 10 conversations are too few for a modulus to give about 20%.

The split depends on ids only, never on gold answers, evidence or dataset order.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Literal

from memlane.bench.datasets.model import Sample

if TYPE_CHECKING:
    # Only for annotations: each family points at the rule it follows here.
    from memlane.bench.datasets.families import Family

Split = Literal["dev", "test"]
SPLITS: tuple[Split, ...] = ("dev", "test")
DEV_MODULUS = 5
DEV_FRACTION = 0.2
SPLIT_RULE = "memlane-split/1"


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest(), "big")


def question_split(question_id: str) -> Split:
    """LongMemEval: ``dev`` iff sha256(question_id) % 5 == 0."""
    return "dev" if _digest(question_id) % DEV_MODULUS == 0 else "test"


def dev_conversations(conversation_ids: Iterable[str]) -> frozenset[str]:
    """LoCoMo: the ``ceil(20%)`` conversations with the lowest sha256 of their id."""
    ids = sorted(set(conversation_ids), key=_digest)
    return frozenset(ids[: math.ceil(DEV_FRACTION * len(ids))])


def conversation_split(conversation_id: str, dev: frozenset[str]) -> Split:
    """LoCoMo: a conversation's side given the data set's :func:`dev_conversations`."""
    return "dev" if conversation_id in dev else "test"


def sample_splitter(family: Family, namespaces: Iterable[str]) -> Callable[[Sample], Split]:
    """The split of each sample of a data set of ``family`` whose namespaces are ``namespaces``: the rule
    above that the family follows (:meth:`Family.splitter`; only LoCoMo reads the namespaces, its split
    being by conversation, so pass a generator)."""
    return family.splitter(namespaces)
