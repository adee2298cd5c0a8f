"""An update of an exchange's sides from the sides a caller gave: each given one, the block's own for the
other (shared by HTTP, MCP and the CLI)."""

from __future__ import annotations

from memlane.core.errors import ValidationError
from memlane.core.model import BlockKind, MemoryBlock


def new_sides(block: MemoryBlock, user_content: str | None, assistant_content: str | None) -> tuple[str, str]:
    """The exchange's new (user, assistant) sides. A fact has none (ValidationError naming ``content``); an
    exchange stored from a message list keeps no sides, so both must be given."""
    if block.kind is not BlockKind.EXCHANGE:
        raise ValidationError("a fact takes content, not user_content or assistant_content", where="content")
    if user_content is not None and assistant_content is not None:
        return (user_content, assistant_content)
    if len(block.sides) != 2:
        missing = "assistant_content" if assistant_content is None else "user_content"
        raise ValidationError(
            "this exchange was stored from a message list and keeps no sides: give both user_content and "
            "assistant_content",
            where=missing,
        )
    return (
        block.sides[0][1] if user_content is None else user_content,
        block.sides[1][1] if assistant_content is None else assistant_content,
    )
