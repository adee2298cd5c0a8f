"""A small vocabulary and queries over it, for tests that write random histories and search them."""

from __future__ import annotations

WORDS = [
    "garden",
    "tomato",
    "river",
    "kayak",
    "violin",
    "lesson",
    "sister",
    "sushi",
    "dinner",
    "marathon",
    "shoes",
    "budget",
    "trip",
    "museum",
    "dog",
]
QUERIES = ["tomato garden", "kayak on the river", "sushi dinner with my sister", "marathon shoes budget"]
