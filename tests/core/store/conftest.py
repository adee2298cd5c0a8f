"""The store's tests, one folder per concept as in memlane.core.store. The helpers several concepts' tests share
(``store_downgrade``: stores of earlier schemas; ``vector_scan``: raw-file scans; ``word_corpus``) live here and
are imported by name, so this folder goes on the import path whichever test runs first."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
