"""The static index of a TypeScript workspace: analyze_impact and list_catalogue.

Pipeline, one module per step:

- :mod:`.workspace` / :mod:`.packages`: discover files, repositories, npm packages, tsconfig aliases;
- :mod:`.parser` (+ :mod:`.class_facts`, :mod:`.literal_facts`, :mod:`.expressions`,
  :mod:`.sql_sites`, :mod:`.ts_queries`): one file -> JSON facts, with tree-sitter;
- :mod:`.indexer` / :mod:`.cache` / :mod:`.snapshot`: parallel parsing, SQLite cache, linked snapshot;
- :mod:`.symbols` (+ :mod:`.type_eval`): cross-file name resolution and evaluation to strings;
- :mod:`.sites` (+ :mod:`.class_link`, :mod:`.pp_binding`, :mod:`.sql_link`, :mod:`.explain`): facts ->
  :mod:`.linked` index;
- :mod:`.impact` / :mod:`.catalogue` / :mod:`.render`: queries and their texts, models in :mod:`.model`;
- :mod:`.service`: ``IndexService`` and ``get_index_service``; :mod:`.mcp_tools` and :mod:`.commands`
  are the MCP and CLI adapters. User documentation: ``docs/static-index.md``.
"""
