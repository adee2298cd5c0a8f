"""The retrieval benchmark: ingest-once bench stores, runs and their logs, rankings, metrics, baselines, tuning.

Modules: :mod:`.run` (a run: ask every question in every mode), :mod:`.ingest` (one bench store per data set
and ingest settings), :mod:`.history` (a haystack as add requests; retrieved blocks as turn and session
rankings), :mod:`.runlog` (the run log), :mod:`.rankings` (the exported rankings contract), :mod:`.metrics`
(the official scores), :mod:`.baselines` and :mod:`.bm25` (simple retrievers reproduced in the same run),
:mod:`.tune` (search settings chosen on the dev split), :mod:`.paired` (question-by-question comparisons).
"""
