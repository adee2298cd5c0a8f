"""Benchmark data sets.

* :mod:`.model`: the typed, immutable model (haystacks of sessions of turns, and the questions asked);
* :mod:`.locomo`, :mod:`.longmemeval`: the streaming loaders, with every data quirk they repair;
* :mod:`.expansion`: the seeded x500 growth of LongMemEval S haystacks;
* :mod:`.families`: one object per data set family (LoCoMo, LongMemEval) that knows everything the harness
  treats differently between them: loader, ids, target turns, scores, split, categories, report rows;
* :mod:`.catalog`, :mod:`.registry`: the named data sets, where their files are found, and their digests.

This package imports none of its modules, so that the scorers the families point at can import the model.
"""
