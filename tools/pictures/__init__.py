"""Pictures people look at: the whole mesh (``visualize_mesh``, ``mesh-mcp graph``) and the MCP App
(``ui://mesh/graph.html``) that draws flow, trace and mesh results in hosts that support MCP Apps."""
