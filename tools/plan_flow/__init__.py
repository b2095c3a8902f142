"""plan_flow: the read-only edit plan for a new job or event type, built on the static index."""
