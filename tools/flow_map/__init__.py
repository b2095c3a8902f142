"""Flow pictures: the flow of a job, event, websocket type, queue or stream as a Mermaid flowchart.

:mod:`~tools.flow_map.graph` builds the graph from the static index, :mod:`~tools.flow_map.fold`
folds big fan-out, :mod:`~tools.flow_map.live` overlays the runtime state of each hop,
:mod:`~tools.flow_map.render` writes the Mermaid text (escaping through
:mod:`~tools.flow_map.mermaid`), and :mod:`~tools.flow_map.trace_mermaid` draws the hops of a
``trace_job`` / ``trace_event`` result.
"""
