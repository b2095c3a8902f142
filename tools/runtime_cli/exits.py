"""Exit codes of the runtime commands (documented in docs/cli.md), the same for every command.

- 0 ``OK``: read, nothing wrong found;
- 1 ``PROBLEM``: a problem was found (a verdict other than ok, an anomaly, dead letters, a failed job);
- 2 ``USAGE``: usage or configuration error, or the name given does not exist (unknown service, stream,
  queue): nothing about the system was concluded;
- 3 ``UNAVAILABLE``: a database or Redis could not be reached: the answer is incomplete (wins over 1).
"""

from __future__ import annotations

OK = 0
PROBLEM = 1
USAGE = 2
UNAVAILABLE = 3
