"""Promise: the trust file is read as UTF-8 whatever the server's locale says.

An administrator's trust file may carry a comment in their own language; a server started under an
ASCII locale (``LANG=C`` on a minimal image, where Python falls back to the locale's codec) must still
read it, not refuse it as "not valid TOML" and so fail every apply. The locale is switched for real
(``setlocale(LC_CTYPE, "C")``, as such a machine has it) and restored after.
"""

from __future__ import annotations

import locale
from collections.abc import Iterator
from pathlib import Path

import pytest

from server.approval.trust import read_trust_file

KEY = "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="


@pytest.fixture
def ascii_locale() -> Iterator[None]:
    before = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        if locale.getpreferredencoding(False).lower() not in ("ansi_x3.4-1968", "ascii", "us-ascii"):
            pytest.skip("the C locale is not ASCII here (UTF-8 mode): nothing to tell apart")
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, before)


def test_a_trust_file_with_a_non_ascii_comment_is_read_under_an_ascii_locale(tmp_path: Path, ascii_locale) -> None:
    path = tmp_path / "trust.toml"
    path.write_bytes(f'# approbateurs de l\'équipe exploitation — café\n[approvers]\nalice = "{KEY}"\n'
                     .encode())
    with pytest.raises(UnicodeDecodeError):  # the control: the locale's codec cannot read this file
        path.read_text(encoding=None)
    assert read_trust_file(path).approvers == {"alice": KEY}
