"""Promise: a trust file the server's user can write through an ACL or one of its own groups is named
as unprotected, and another user's check uses only the groups it is given.

The mode bits say "root's, 0644", but a POSIX ACL entry gives the server's user write access: an agent
running as that user could add its own key, so :func:`protection_problems` must say so. Checked for
real: a root-owned file and folder outside the test's private tmp folder (the unprivileged user must be
able to walk to it), an ACL set through the kernel's ``system.posix_acl_access`` attribute (what
``setfacl`` writes), and the check run in a forked process that has dropped to an unprivileged uid,
as a server started by that user would be. Needs root (to set the ACL and drop privileges) and a
filesystem with ACLs; skipped otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from server.approval.trust import protection_problems

UID = 54321  # owns nothing on the machine
ACL_USER_OBJ, ACL_USER, ACL_GROUP_OBJ, ACL_MASK, ACL_OTHER = 0x01, 0x02, 0x04, 0x10, 0x20
UNDEFINED = 0xFFFFFFFF

pytestmark = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                                reason="needs root: set an ACL, then drop to another uid")


def _acl(*entries: tuple[int, int, int]) -> bytes:
    """The binary form of a POSIX access ACL (version 2, then (tag, perm, id) per entry)."""
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", tag, perm, ident) for tag, perm, ident in entries)


@pytest.fixture
def root_folder() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="mesh-acl-", dir="/tmp"))
    try:
        folder.chmod(0o755)
        yield folder
    finally:
        shutil.rmtree(folder)


def _problems_as(uid: int, path: Path) -> list[str]:
    """``protection_problems(path)`` computed by a forked process running as ``uid`` (no groups)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            os.write(write, json.dumps(protection_problems(path)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as fh:
        data = fh.read()
    os.waitpid(pid, 0)
    return json.loads(data)


def test_a_trust_file_writable_through_an_acl_is_not_protected(root_folder: Path) -> None:
    trust = root_folder / "trust.toml"
    trust.write_text("[approvers]\n", encoding="utf-8")
    trust.chmod(0o644)
    assert _problems_as(UID, trust) == []  # control: root's 0644 file in root's 0755 folder, under sticky /tmp
    # asked for another uid, this process cannot ask the kernel as that user: the ACL look is skipped
    assert protection_problems(trust, uid=UID) == []
    try:
        os.setxattr(trust, "system.posix_acl_access", _acl(
            (ACL_USER_OBJ, 6, UNDEFINED), (ACL_USER, 6, UID), (ACL_GROUP_OBJ, 4, UNDEFINED), (ACL_MASK, 6, UNDEFINED),
            (ACL_OTHER, 4, UNDEFINED)))
    except OSError as exc:
        pytest.skip(f"no POSIX ACLs on this filesystem: {exc}")
    assert _problems_as(UID, trust) == [f"{trust} is writable by the server's user (ACL or capability)"]
    # a folder on the way writable through an ACL counts too (it could replace the file)
    os.removexattr(trust, "system.posix_acl_access")
    trust.chmod(0o644)
    os.setxattr(root_folder, "system.posix_acl_access", _acl(
        (ACL_USER_OBJ, 7, UNDEFINED), (ACL_USER, 7, UID), (ACL_GROUP_OBJ, 5, UNDEFINED), (ACL_MASK, 7, UNDEFINED),
        (ACL_OTHER, 5, UNDEFINED)))
    assert _problems_as(UID, trust) == [f"{root_folder} is writable by the server's user (ACL or capability)"]


def test_the_server_user_s_own_group_counts_by_default_and_only_for_itself(root_folder: Path) -> None:
    """Without ``gids``, the check uses the groups of this process's user; for another uid, no group
    (the caller names its groups). A file of group 0 writable by its group: root's group, not UID's."""
    trust = root_folder / "trust.toml"
    trust.write_text("[approvers]\n", encoding="utf-8")
    trust.chmod(0o664)
    assert protection_problems(trust, uid=UID) == []  # root's own groups are not UID's
    assert protection_problems(trust, uid=UID, gids={0}) == [f"{trust} is writable by group 0, a group of the "
                                                             "server's user"]
    os.chown(trust, 0, UID)  # now of UID's own (primary) group, as the server run by UID sees it
    assert _problems_as(UID, trust) == [f"{trust} is writable by group {UID}, a group of the server's user"]
