"""lint_flows: workspace-wide flow defects found statically, with file:line evidence, SARIF and baselines."""
