"""The settings reference in docs/configuration.md is the one the code renders."""

from __future__ import annotations

from server.config_reference import render
from tests.helpers import REPO_ROOT


def test_configuration_reference_is_current() -> None:
    text = (REPO_ROOT / "docs" / "configuration.md").read_text()
    embedded = text.split("<!-- reference -->", 1)[1].split("<!-- /reference -->", 1)[0]
    assert embedded.strip() == render().strip(), "run: python -m server.config_reference and paste it"


def test_every_setting_has_a_description() -> None:
    missing = [line.split("|")[1].strip() for line in render().splitlines()
               if line.startswith("| `") and line.rstrip().endswith("|  |")]
    assert missing == []
