"""Reports of a retrieval run, computed from its log alone: the figures (:mod:`.results`), ``report.md`` and the
exported rankings (:mod:`.report`), two runs side by side (:mod:`.compare`) and ``recall.png`` (:mod:`.plot`).
"""
