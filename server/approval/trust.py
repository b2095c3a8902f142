"""Where the approvers of ``signature`` mode come from, and whether the agent could change them.

In signature mode the approver set (and the mode itself) is read only from a *trust file*
outside the workspace::

    # /etc/mesh-mcp/trust.toml  (root-owned, 0644, in root-owned folders)
    mode = "signature"
    [approvers]
    alice = "<base64 Ed25519 public key printed by `mesh-mcp approver init`>"

Its place is the first that exists of ``/etc/mesh-mcp/trust.toml`` and
``~<user>/.config/mesh-mcp/trust.toml`` (on Windows ``%PROGRAMDATA%`` then ``%APPDATA%``;
the home folder is the account's, from ``pwd``, never ``$HOME``), or ``[approval]
trust_file`` from a config file *outside* the workspace or the command line, refused when
the system trust file exists (nothing can replace it).

:func:`apply_trust_policy` (run by :func:`server.config.load_settings`) fails closed: a
trust file that exists, a named trust file, or ``mode = "signature"`` anywhere puts the
server in signature mode; then any ``MESH_APPROVAL__*`` variable, ``approvers`` in a config
file, ``mode = "local"`` anywhere and ``trust_file`` in the workspace's ``mesh.toml`` are
configuration errors naming what to do. ``allow_unprotected_approvers`` comes only from the
command line.

:func:`protection_problems` says why the server's OS user could change the trust file: it
or any folder above it owned by that user, writable by one of its groups or by everyone
(a sticky folder such as ``/tmp`` is fine when the entry below it belongs to someone else),
or writable through an ACL (``os.access``). A server running as root fails: root can write
anything. On Windows ACLs are not inspected, so the check fails with that stated limitation.
:func:`check_gate` runs it at start and before every apply; ``apply_remediation`` refuses
while it fails unless the server was started with ``--allow-unprotected-approvers``.
"""

from __future__ import annotations

import os
import stat
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from server.errors import ConfigError, RemediationRefused
from server.filelocks import IS_POSIX

if TYPE_CHECKING:
    from server.config import Settings

TRUST_FILE_NAME = "trust.toml"
WINDOWS_LIMITATION = (
    "on Windows the trust file's ACL is not inspected by mesh-mcp: it cannot tell whether the server's user can "
    "change it. Give write access to Administrators only (icacls), then start the server with "
    "--allow-unprotected-approvers, which every plan shows"
)


class TrustFile(BaseModel):
    """The trust file's content."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["signature"] = "signature"
    approvers: dict[str, str] = Field(default_factory=dict, description="approver id -> Ed25519 public key")
    audit_copy_file: str | None = None
    audit_syslog: bool | None = None


def system_trust_path() -> Path:
    if IS_POSIX:
        return Path("/etc/mesh-mcp") / TRUST_FILE_NAME
    return Path(os.environ.get("PROGRAMDATA") or r"C:\ProgramData") / "mesh-mcp" / TRUST_FILE_NAME


def user_trust_path() -> Path:
    if IS_POSIX:
        import pwd

        home = Path(pwd.getpwuid(os.geteuid()).pw_dir)
        return home / ".config" / "mesh-mcp" / TRUST_FILE_NAME
    return Path.home() / "AppData" / "Roaming" / "mesh-mcp" / TRUST_FILE_NAME


def default_trust_path() -> Path:
    """The first existing of the system and the user trust file, else the system one."""
    for path in (system_trust_path(), user_trust_path()):
        if path.is_file():
            return path
    return system_trust_path()


def read_trust_file(path: Path) -> TrustFile:
    """The parsed trust file; :class:`~server.errors.ConfigError` naming the file and the problem."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"trust file {path}: cannot be read ({exc.strerror})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"trust file {path}: not valid TOML: {exc}") from None
    try:
        trust = TrustFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(root)"
        raise ConfigError(f"trust file {path}: invalid '{loc}': {first['msg']} (keys: mode, [approvers], "
                          "audit_copy_file, audit_syslog)") from None
    from server.approval.keys import APPROVER_ID_RE, parse_public_key

    for approver, text in trust.approvers.items():
        if not APPROVER_ID_RE.match(approver):
            raise ConfigError(f"trust file {path}: approver id {approver!r}: 1-64 letters, digits and . _ @ -")
        try:
            parse_public_key(text)
        except ValueError as exc:
            raise ConfigError(f"trust file {path}: approvers.{approver}: {exc}; paste the line printed by "
                              "`mesh-mcp approver init`") from None
    return trust


def _inside(path: Path, folder: Path) -> bool:
    """True when ``path`` is inside ``folder`` as named or where it leads (a symlink in the workspace that
    points out of it is still the workspace's file: an agent can make one), and when either cannot be
    resolved (fail closed: a config file that cannot be told apart from the workspace's is treated as the
    workspace's). Python 3.11 raises ``RuntimeError`` for a symlink loop, later versions ``OSError``."""
    try:
        roots = (Path(folder).resolve(), Path(os.path.abspath(folder)))
        places = (path.resolve(), Path(os.path.abspath(path)))
        return any(place.is_relative_to(root) for place in places for root in roots)
    except (OSError, RuntimeError):
        return True


def apply_trust_policy(
    data: dict[str, Any],
    *,
    file_data: dict[str, Any],
    env_data: dict[str, Any],
    overrides: dict[str, Any],
    config_file: Path | None,
    workspace: str | Path | None,
) -> dict[str, Any]:
    """The merged settings ``data`` with the approval section taken from the trust file in signature mode.

    Raises :class:`~server.errors.ConfigError` for every source an agent could use to change
    who approves (see the module docstring).
    """
    env_a = env_data.get("approval") if isinstance(env_data.get("approval"), dict) else {}
    file_a = file_data.get("approval") if isinstance(file_data.get("approval"), dict) else {}
    over_a = overrides.get("approval") if isinstance(overrides.get("approval"), dict) else {}
    if "trust_file" in env_a:
        raise ConfigError("MESH_APPROVAL__TRUST_FILE is refused: the trust file is never named by an environment "
                          "variable (an agent can add those to the MCP client's server config); use the default "
                          f"place {system_trust_path()}")
    for source, where in ((env_a, "the MESH_* environment"), (file_a, str(config_file))):
        if "allow_unprotected_approvers" in source:
            raise ConfigError(f"{where}: allow_unprotected_approvers is refused there: only the command-line flag "
                              "`mesh-mcp serve --allow-unprotected-approvers` sets it")
    in_workspace = config_file is not None and workspace is not None and _inside(config_file, Path(workspace))
    if "trust_file" in file_a and in_workspace:
        raise ConfigError(f"{config_file}: [approval] trust_file is refused in the workspace's mesh.toml (an agent "
                          "working in the workspace can edit it): keep the trust file at its default place "
                          f"{system_trust_path()}")
    raw = over_a.get("trust_file") or file_a.get("trust_file")
    path = Path(str(raw)).expanduser() if raw else default_trust_path()
    system = system_trust_path()
    if raw and system.is_file() and os.path.realpath(path) != os.path.realpath(system):
        raise ConfigError(f"[approval] trust_file = {str(raw)!r} is refused: the system trust file {system} exists, "
                          "and no setting can replace it (remove the setting, or have its owner edit that file)")
    exists = path.is_file()
    asked = [src.get("mode") for src in (file_a, env_a, over_a)]
    if not (exists or raw or "signature" in asked):
        return data
    if env_a:
        names = ", ".join(f"MESH_APPROVAL__{k.upper()}" for k in sorted(env_a))
        raise ConfigError(f"signature mode: {names} refused: in signature mode nothing of [approval] comes from "
                          f"MESH_* variables (an agent can set them); approvers live in the trust file {path}. "
                          "Remove the variable(s) from the server's environment")
    if file_a.get("approvers"):
        raise ConfigError(f"{config_file}: [approval] approvers are refused in signature mode: approvers are read "
                          f"only from the trust file {path} (outside the workspace, not writable by the server's "
                          "user); move them there")
    if "local" in asked:
        cause = f"the trust file {path} exists" if exists else "signature mode is configured"
        raise ConfigError(f"[approval] mode = \"local\" is refused: {cause}, and a trust file is the only place "
                          "that decides the mode. Remove mode = \"local\" (or the trust file, as its owner)")
    approval = dict(data.get("approval") or {})
    approval["mode"] = "signature"
    approval["trust_file"] = str(path)
    trust = read_trust_file(path) if exists else TrustFile()
    if "approvers" not in over_a:  # programmatic overrides (embedding, tests) are reported as such by the gate
        approval["approvers"] = dict(trust.approvers)
    if trust.audit_copy_file is not None:
        approval["audit_copy_file"] = trust.audit_copy_file
    if trust.audit_syslog is not None:
        approval["audit_syslog"] = trust.audit_syslog
    data["approval"] = approval
    return data


# -- protection ------------------------------------------------------------------------


def _writable_by(info: os.stat_result, uid: int, gids: set[int]) -> str | None:
    if info.st_uid == uid:
        return f"owned by the server's user (uid {uid}), who can change it or its mode"
    if info.st_mode & stat.S_IWGRP and info.st_gid in gids:
        return f"writable by group {info.st_gid}, a group of the server's user"
    if info.st_mode & stat.S_IWOTH:
        return "writable by every user"
    return None


def _chain(path: Path) -> list[Path]:
    return [path, *path.parents]


def protection_problems(path: Path, *, uid: int | None = None, gids: set[int] | None = None) -> list[str]:
    """Why the user ``uid`` (default: this process) could change ``path``; empty when it cannot.

    Checks the file and every folder above it, both the path as written (a symlink on the
    way counts by its folder) and the resolved one.
    """
    if not IS_POSIX:
        return [WINDOWS_LIMITATION]
    me = os.geteuid()
    uid = me if uid is None else uid
    gids = ({os.getegid(), *os.getgroups()} if uid == me else set()) if gids is None else set(gids)
    absolute = Path(os.path.abspath(path))
    if not absolute.is_file():
        return [f"no trust file at {absolute}: signature mode has no approvers (create it, root-owned 0644)"]
    if uid == 0:
        return ["the server runs as root, which can write any file: no trust file is protected from an agent "
                "running as root; run the server as an unprivileged user"]
    problems: list[str] = []
    seen: set[Path] = set()
    resolved = absolute.resolve()
    for chain in (_chain(absolute), _chain(resolved)):
        child: os.stat_result | None = None
        for entry in chain:
            info = os.lstat(entry)
            if entry not in seen and not stat.S_ISLNK(info.st_mode):
                seen.add(entry)
                why = _writable_by(info, uid, gids)
                sticky_ok = (stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX and info.st_uid != uid
                             and child is not None and child.st_uid != uid)
                if why and not sticky_ok:
                    problems.append(f"{entry} is {why}")
                elif not why and not sticky_ok and uid == me and os.access(entry, os.W_OK):
                    problems.append(f"{entry} is writable by the server's user (ACL or capability)")
            child = info
    return problems


@dataclass
class GateStatus:
    """What the approval gate rests on, as shown by server_info, plans, doctor and `mesh-mcp approve`."""

    mode: str
    trust_file: str | None
    source: str
    approvers: list[tuple[str, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    allow_unprotected: bool = False

    @property
    def protected(self) -> bool:
        return self.mode == "signature" and not self.problems

    def lines(self) -> list[str]:
        if self.mode == "local":
            return ["approval mode: local (HMAC secret readable by this OS user: stops accidents, not an agent)"]
        out = [f"approval mode: signature; approvers from {self.source}"]
        out += [f"  approver {who}  {fp}" for who, fp in self.approvers] or ["  (no approver listed)"]
        if self.problems:
            out.append("trust check: FAILED, an agent running as the server's user could change the approvers:")
            out += [f"  - {p}" for p in self.problems]
        else:
            out.append(f"trust check: ok ({self.trust_file} and every folder above it are not writable by the "
                       "server's user)")
        if self.allow_unprotected:
            out.append("WARNING: the server was started with --allow-unprotected-approvers: it applies plans even "
                       "when the trust check fails")
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "trust_file": self.trust_file, "source": self.source,
                "approvers": [{"id": a, "fingerprint": f} for a, f in self.approvers],
                "trust_check": "ok" if not self.problems else "failed", "problems": self.problems,
                "allow_unprotected_approvers": self.allow_unprotected}


def gate_status(settings: Settings) -> GateStatus:
    """The approval gate's sources and protection, read now (the trust file is read again)."""
    from server.approval.keys import approver_keys, fingerprint
    approval = settings.approval
    allow = approval.allow_unprotected_approvers
    if approval.mode == "local":
        return GateStatus("local", None, "local mode", allow_unprotected=allow)
    path = Path(approval.trust_file).expanduser() if approval.trust_file else default_trust_path()
    listed = [(who, fingerprint(key)) for who, key in sorted(approver_keys(settings).items())]
    problems = protection_problems(path)
    source = f"the trust file {path}"
    if path.is_file():
        try:
            current = read_trust_file(path).approvers
        except ConfigError as exc:
            current = None
            problems.append(str(exc))
        if current is not None and current != dict(approval.approvers):
            source = "settings given programmatically, not the trust file"
            problems.append(f"the server's approvers differ from those of {path} (set programmatically, or the "
                            "trust file changed since the server started: restart it)")
    return GateStatus("signature", str(path), source, listed, problems, allow)


def check_gate(settings: Settings) -> GateStatus:
    """The gate status; :class:`RemediationRefused` while the trust check fails (unless allowed)."""
    status = gate_status(settings)
    if status.mode == "signature" and status.problems and not status.allow_unprotected:
        raise RemediationRefused(
            "signature mode: the approver set is not protected, so an agent running as the server's OS user could "
            "add its own key: " + "; ".join(status.problems) + ". Fix the trust file's owner and mode (see "
            "docs/remediation.md, threat model), or start the server with --allow-unprotected-approvers "
            "(every plan and server_info then say so)"
        )
    return status


def log_gate_at_start(settings: Settings) -> GateStatus:
    """The start-time check: the gate's status, each failing condition logged on stderr."""
    import logging

    status = gate_status(settings)
    logger = logging.getLogger("mesh.approval")
    for problem in status.problems:
        logger.warning("approval gate: %s%s", problem, "" if status.allow_unprotected else
                       " (apply_remediation refuses until this is fixed)")
    if status.allow_unprotected:
        logger.warning("approval gate: started with --allow-unprotected-approvers (every plan and server_info say so)")
    return status
