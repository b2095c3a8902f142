"""``trace_request``: follow one request across every service database and its streams."""
