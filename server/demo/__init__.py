"""``mesh-mcp demo``: throwaway services, a seeded broken system and a diagnosis through MCP.

- :mod:`server.demo.command`: the command (services, seed, report, ``--serve``);
- :mod:`server.demo.services` and :mod:`server.demo.embedded`: the embedded PostgreSQL and
  Redis (the ``demo`` extra; the test suite uses them too when no local service answers);
- :mod:`server.demo.seed` and :mod:`server.demo.dump`: the seven seeded faults;
- :mod:`server.demo.report`: the tool calls through a real MCP client, and the report.

The demo depends on the app and the tools; nothing outside this package imports it
(the command table names it by string, the tests import it).
"""
