"""Memory systems under test, behind one small protocol, so every system goes through the same loop.

A :class:`System` stores a user's sessions (:meth:`System.ingest`), answers a query with ranked items that
name the data set's sessions and turns (:meth:`System.search`), and forgets a user (:meth:`System.reset`).
It tells the run log its ``name``, ``version`` and ``settings``. The retrieval loop
(:mod:`memlane.bench.retrieval.run`) maps the items to session and turn rankings, scores them with the same
metric code for every system, and exports them in the same rankings contract; the QA pipeline reads the
same items' text as its context.

Systems:

* ``memlane``: memlane's own search (:mod:`.memlane`), one search preset per system (``mode=``);
* ``baseline``: the harness's baseline retrievers (:mod:`.baselines`, ``name=``);
* ``mem0``: mem0 OSS (:mod:`.mem0`, extra ``memlane[mem0]``);
* ``engram``: engram-search (:mod:`.engram`; ``make venv`` installs it without its torch dependencies).

On the command line a system is ``NAME[:key=value,...]`` (:func:`parse_system_spec`); ``as=LABEL`` names it
in the report (default: the spec as written).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from memlane.core.errors import ConfigError, MemlaneError, ValidationError

if TYPE_CHECKING:
    from memlane.bench.datasets.families import Family
    from memlane.bench.datasets.model import Session
    from memlane.core.embedding.protocol import CachedEmbedder


class SystemFailure(MemlaneError):
    """A system under test failed (its own exception, translated where it entered): logged as the question's
    error, scored like any other ranking."""


@dataclass(frozen=True)
class Hit:
    """One ranked item of a system's answer: its id and score, the session it comes from, the data set's
    turn ids it holds (any roles; the loop keeps the family's target turns), and its text."""

    item_id: str
    score: float
    session_id: str
    turn_ids: tuple[str, ...] = ()
    text: str = ""


@runtime_checkable
class System(Protocol):
    """A memory system under test (see the module doc).

    ``ranks_turns`` is False for systems whose items are whole sessions: their turn ranking is left empty
    (no turn metrics) rather than invented. ``cuts_rankings``: keep at most the contract length of
    sessions and turns (the baselines, as the official flat retrievers); otherwise every retrieved entry
    is kept. ``search`` returns at least ``k`` items where the user holds that many; it may return more
    (a baseline ranks the whole haystack).
    """

    name: str
    version: str
    ranks_turns: bool
    cuts_rankings: bool

    def settings(self) -> dict[str, object]:
        """Every setting that can move the figures, for the run log."""
        ...

    def ingest(self, user: str, sessions: Sequence[Session]) -> None:
        """Store ``sessions`` for ``user`` (after :meth:`reset`: nothing of the user is kept)."""
        ...

    def search(self, user: str, query: str, k: int, at: datetime | None) -> list[Hit]:
        """The user's items for ``query``, best first, asked at time ``at`` (the question's date)."""
        ...

    def reset(self, user: str) -> None:
        """Forget ``user``."""
        ...

    def close(self) -> None:
        """Release what the system holds."""
        ...


@dataclass(frozen=True)
class SystemContext:
    """What a run gives every system: the data set family, the run's embedder (with the shared embedding
    cache), where systems may keep files, and the run's depth (items asked per question)."""

    family: Family
    embedder: CachedEmbedder
    work_dir: Path
    depth: int
    extras: Mapping[str, object] = field(default_factory=dict)


SystemFactory = Callable[[Mapping[str, str], SystemContext], System]


@dataclass(frozen=True)
class SystemSpec:
    """A system as asked for: its registered ``name``, its ``params`` and the ``label`` the report uses."""

    name: str
    params: tuple[tuple[str, str], ...] = ()
    label: str = ""

    @property
    def options(self) -> dict[str, str]:
        return dict(self.params)


_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:=,+-]*$")


def parse_system_spec(text: str) -> SystemSpec:
    """``NAME[:key=value,...]`` -> :class:`SystemSpec`; ``as=LABEL`` sets the label. Raises
    :class:`~memlane.core.errors.ValidationError` saying what is wrong and where."""
    raw = text.strip()
    name, _, rest = raw.partition(":")
    if not _NAME.match(name):
        raise ValidationError(f"--system {text!r}: expected NAME[:key=value,...] with a lower-case name")
    if name not in SYSTEMS:
        raise ValidationError(f"--system {text!r}: unknown system {name!r}; known: {', '.join(sorted(SYSTEMS))}")
    params: list[tuple[str, str]] = []
    label = ""
    if rest:
        for part in rest.split(","):
            key, eq, value = part.partition("=")
            key, value = key.strip(), value.strip()
            if not eq or not key or not value:
                raise ValidationError(f"--system {text!r}: {part!r} is not key=value")
            if key == "as":
                label = value
                continue
            if any(k == key for k, _ in params):
                raise ValidationError(f"--system {text!r}: {key!r} given twice")
            params.append((key, value))
    label = label or raw
    if not _LABEL.match(label) or "/" in label:
        raise ValidationError(f"--system {text!r}: label {label!r} must be letters, digits and _.:=,+- only")
    return SystemSpec(name, tuple(params), label)


SYSTEMS: dict[str, SystemFactory] = {}


def register_system(name: str, factory: SystemFactory) -> None:
    """Make ``name`` usable as ``--system name``; the built-ins register through this same call."""
    SYSTEMS[name] = factory


def make_system(spec: SystemSpec, context: SystemContext) -> System:
    """The system ``spec`` names, built for ``context`` (its own option errors name the system)."""
    factory = SYSTEMS.get(spec.name)
    if factory is None:
        raise ConfigError(f"unknown system {spec.name!r}; known: {', '.join(sorted(SYSTEMS))}")
    return factory(spec.options, context)


def take_options(system: str, options: Mapping[str, str], known: Sequence[str]) -> dict[str, str]:
    """``options`` checked against ``known`` keys (a clear error for any other)."""
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ValidationError(f"system {system!r}: unknown option {unknown[0]!r}; known: {', '.join(known) or 'none'}")
    return dict(options)


def flag(system: str, key: str, value: str | None, default: bool) -> bool:
    """A boolean option: true/false, yes/no, 1/0."""
    if value is None:
        return default
    lowered = value.lower()
    if lowered in ("true", "yes", "1", "on"):
        return True
    if lowered in ("false", "no", "0", "off"):
        return False
    raise ValidationError(f"system {system!r}: {key} must be true or false, got {value!r}")


def integer(system: str, key: str, value: str | None, default: int, low: int = 1) -> int:
    """A whole-number option, at least ``low``."""
    if value is None:
        return default
    try:
        out = int(value)
    except ValueError:
        raise ValidationError(f"system {system!r}: {key} must be a whole number, got {value!r}") from None
    if out < low:
        raise ValidationError(f"system {system!r}: {key} must be at least {low}, got {out}")
    return out


def _register_builtins() -> None:
    from memlane.bench.systems import baselines, engram, mem0, memlane

    register_system("memlane", memlane.factory)
    register_system("baseline", baselines.factory)
    register_system("mem0", mem0.factory)
    register_system("engram", engram.factory)


_register_builtins()
