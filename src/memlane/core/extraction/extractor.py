"""The extraction prompt and its call: one block in, ``{"summary": str, "facts": [str]}`` out."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

from memlane.core.calls import forget_blocks
from memlane.core.errors import LLMResponseError, NotFoundError
from memlane.core.jobs import ExtractionResult
from memlane.core.llm.calllog import CallLog
from memlane.core.llm.protocol import LLM, ChatMessage, JSONSchema
from memlane.core.model import MemoryBlock, PerspectiveMode, PromptVersion

log = logging.getLogger("memlane.extraction")

# How a registry prompt's text enters memlane's extraction prompt: as the application's instructions on
# what to remember, after memlane's own; the reply's shape (a summary and facts) stays memlane's.
CUSTOM_INSTRUCTIONS = (
    "\n\nThe application adds these instructions on what to remember (follow them within the rules above; "
    'the reply is still the JSON object with "summary" and "facts"):\n'
    "<<<\n{text}\n>>>"
)
# A registry prompt by (id, version or None for the current one): Store.get_prompt_version.
PromptLookup = Callable[[str, int | None], PromptVersion]

DEFAULT_PROMPT_ID = "extract-v1"
MAX_FACTS = 50
MAX_FACT_CHARS = 2000

EXTRACTION_SCHEMA: JSONSchema = {
    "type": "object",
    "properties": {
        "summary": {"type": "string"},
        "facts": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["summary", "facts"],
    "additionalProperties": False,
}


@dataclass(frozen=True, slots=True)
class ExtractionPrompt:
    """A prompt file shipped in the package; ``ref`` (id and sha256) is stored with every extracted block."""

    prompt_id: str
    template: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.template.encode("utf-8")).hexdigest()

    @property
    def ref(self) -> str:
        return f"{self.prompt_id}@{self.sha256}"

    @classmethod
    def load(cls, prompt_id: str = DEFAULT_PROMPT_ID) -> ExtractionPrompt:
        text = resources.files("memlane.core.extraction").joinpath("prompts", f"{prompt_id}.md").read_text("utf-8")
        return cls(prompt_id, text)

    def render(self, block: MemoryBlock) -> str:
        speakers = ", ".join(dict.fromkeys(line.split(":", 1)[0] for line in block.message.splitlines() if ":" in line))
        return self.template.format(
            perspective=_perspective_text(block),
            speakers=speakers or "unknown",
            time=block.time_annotation,
        )


def _perspective_text(block: MemoryBlock) -> str:
    if block.mode is PerspectiveMode.SINGLE:
        return "a neutral observer of the whole exchange"
    if block.mode is PerspectiveMode.DUAL:
        return f"the {block.perspective} (remember what matters to the {block.perspective})"
    return f"{block.perspective} (remember what matters to {block.perspective})"


def extraction_messages(prompt: ExtractionPrompt, block: MemoryBlock, custom: str | None = None) -> list[ChatMessage]:
    """What extracting ``block`` with ``prompt`` sends: the instructions as the system message (with a
    registry prompt's ``custom`` text added as the application's instructions), the exchange alone as the
    user message."""
    system = prompt.render(block)
    if custom:
        system += CUSTOM_INSTRUCTIONS.format(text=custom)
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": block.message},
    ]


class Extractor:
    """Calls the LLM for one block and validates the reply into an :class:`ExtractionResult`."""

    def __init__(
        self, llm: LLM, prompt: ExtractionPrompt | None = None, *, prompts: PromptLookup | None = None
    ) -> None:
        """``prompts`` looks up the registry prompt a block names (``MemoryBlock.prompt_id``)."""
        self.llm = llm
        self.prompt = prompt or ExtractionPrompt.load()
        self.prompts = prompts

    def custom_text(self, block: MemoryBlock) -> str | None:
        """The text of the registry prompt that extracts ``block`` (None: memlane's prompt alone). A prompt
        purged since the block was queued is left out (logged): the block is still extracted."""
        if block.prompt_id is None or self.prompts is None:
            return None
        try:
            return self.prompts(block.prompt_id, block.prompt_version).text
        except NotFoundError:
            log.warning("prompt %s version %s is gone; extracting with memlane's prompt alone",
                        block.prompt_id, block.prompt_version)  # fmt: skip
            return None

    def messages(self, block: MemoryBlock) -> list[ChatMessage]:
        return extraction_messages(self.prompt, block, self.custom_text(block))

    def forget(self, block: MemoryBlock) -> int:
        """Delete the logged LLM calls of this block's extraction (when the LLM keeps a call log): for a job
        whose user was deleted while the call was in flight. Returns how many rows went."""
        log = getattr(self.llm, "call_log", None)
        if not isinstance(log, CallLog):
            return 0
        return forget_blocks([log], [block])

    def extract(self, block: MemoryBlock, *, deadline: float | None = None) -> ExtractionResult:
        """Raises LLMError (transport) or LLMResponseError (bad reply, with ``raw``) on failure; by
        ``deadline`` (a :func:`time.monotonic` instant) when given."""
        messages = self.messages(block)
        # The block's id goes into the call log with the call: deleting the block finds its calls by it.
        res = self.llm.complete_json(
            messages,
            schema=EXTRACTION_SCHEMA,
            purpose="extract",
            namespace=block.user,
            block_id=block.id,
            deadline=deadline,
        )
        parsed = res.parsed
        if not isinstance(parsed, dict):
            raise LLMResponseError("extraction reply is not an object", raw=res.text)
        summary = str(parsed.get("summary", "")).strip()
        if not summary:
            raise LLMResponseError("extraction reply has an empty summary", raw=res.text)
        raw_facts = parsed.get("facts", [])
        if not isinstance(raw_facts, list):
            raise LLMResponseError("extraction reply's facts is not a list", raw=res.text)
        facts = list(dict.fromkeys(f.strip() for f in raw_facts if isinstance(f, str) and f.strip()))
        if len(facts) > MAX_FACTS:
            facts = facts[:MAX_FACTS]
        facts = [f[:MAX_FACT_CHARS] for f in facts]
        return ExtractionResult(summary=summary[:MAX_FACT_CHARS], facts=tuple(facts), prompt_ref=self.prompt.ref)
