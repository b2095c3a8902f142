"""Benchmarks of mesh-mcp: speed goals are measured here, never in timed tests."""
