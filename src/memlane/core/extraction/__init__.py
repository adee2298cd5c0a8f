"""LLM extraction: a versioned prompt turns one exchange into a summary and self-contained facts, run by
workers from the durable queue (or inline)."""
