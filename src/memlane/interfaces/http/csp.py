"""The Content-Security-Policy of the pages memlane serves (the console, the API docs): only this server's
own files, no other origin, no framing, no plugins."""

from __future__ import annotations


def content_security_policy(style_src: str = "'self'") -> str:
    """The policy; ``style_src`` for a page whose scripts set inline style attributes (Swagger UI)."""
    return "; ".join(
        [
            "default-src 'self'",
            "script-src 'self'",
            f"style-src {style_src}",
            "img-src 'self' data:",
            "connect-src 'self'",
            "font-src 'self'",
            "object-src 'none'",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        ]
    )
