"""Protocols: each a pydantic config plus `run(ctx) -> summary`, on the shared core."""
