"""Reading ``mesh.toml``: UTF-8 with or without a byte-order mark; any other encoding is one clear line."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from server.errors import ConfigError

_OTHER_ENCODINGS = (
    (b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"),
)


MAX_WORKSPACE_CONFIG_BYTES = 1_000_000


def read_config_toml(path: Path, workspace: Path | None = None) -> dict[str, Any]:
    """The TOML of ``path``, read as UTF-8 with or without a byte-order mark.

    With ``workspace`` (the workspace's own ``mesh.toml``, untrusted) the file is read through the
    guarded reader (:mod:`server.workspace_files`): a symlink out of the workspace, a FIFO or device,
    or more than 1 MB is refused with one line instead of being followed, waited on or read whole.

    Any other encoding (UTF-16 or UTF-32, as some Windows editors save, with or without a mark; bytes
    that are not UTF-8) raises a one-line ``ConfigError`` saying how to re-save the file, as does invalid
    TOML.
    """
    from server.workspace_files import read_bytes

    try:
        raw = path.read_bytes() if workspace is None else read_bytes(workspace, path, MAX_WORKSPACE_CONFIG_BYTES)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc}): check the path and permissions") from None
    for mark, name in _OTHER_ENCODINGS:
        if raw.startswith(mark):
            raise ConfigError(f"{path}: saved as {name}; mesh.toml must be UTF-8 (re-save it as UTF-8)")
    if b"\x00" in raw[:4]:  # UTF-16/32 without a mark: TOML text in UTF-8 never holds a NUL
        raise ConfigError(f"{path}: saved as UTF-16 or UTF-32; mesh.toml must be UTF-8 (re-save it as UTF-8)")
    try:
        text = raw.decode("utf-8-sig")  # a UTF-8 byte-order mark is dropped
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 (byte {exc.start} cannot be decoded): re-save it as UTF-8") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
