"""Resources and prompts: skills, the catalogue, guided diagnoses."""
