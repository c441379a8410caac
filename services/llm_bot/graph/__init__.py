"""The LangGraph graph: ingest → recall → call_model → build_candidate → remember."""
