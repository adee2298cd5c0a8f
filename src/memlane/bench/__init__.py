"""Evaluation harness: datasets, ingest-once stores, retrieval and QA runs, scorers, reports."""
