"""Scoring formulas shared by the stores, the search pipeline and the benchmarks' baselines."""
