"""The team's own skills: served as resources, linked to the flows they describe, checked against the code."""
