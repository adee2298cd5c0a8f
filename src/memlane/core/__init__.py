"""Memory core: model, ingest, embedders, stores, retrieval, LLM client, the Memory facade."""
