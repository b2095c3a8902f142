"""mesh-mcp: the MCP server, its settings, command line, approval tokens and audit log."""

__version__ = "0.1.0"
