"""The runtime tools for humans: ``mesh-mcp trace job|event``, ``health``, ``stream``, ``dlq``, ``queue``, ``rows``.

Each command calls the same library function as its MCP tool (same verdicts and next steps), prints
tables for a terminal (server/tables.py) or ``--json``, and exits with a code scripts can use
(:mod:`tools.runtime_cli.exits`).
"""
