"""Capabilities of mesh-mcp: each package is a plain library plus a thin ``mcp_tools`` adapter."""
