"""A hostile workspace cannot take the server (issue 32: the workspace-reading attacks).

Each test plants one attack in a small workspace of its own and checks it is refused or
shown, not obeyed: a git layout whose config runs a command, symlinks out of the workspace
(to a secret file, to ``/dev/zero``), a FIFO, an oversized file, a tsconfig ``extends`` to
``/dev/zero``, a pathological skill glob, an object spreading itself, escape sequences, a
Markdown fence in a value, sources naming outside paths. The cases that could hang or eat the
machine run the command line in a subprocess under a timeout and an address-space limit, so a
regression fails the test instead of the machine.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from resources.workspace_skills import discover_workspace_skills
from server.config import load_settings
from tests.helpers import REPO_ROOT, in_process_client
from tools.skills.check import check_skills

pytestmark = pytest.mark.anyio

MEMORY_LIMIT = 3 << 30  # bytes of address space for a subprocess (the CLI needs well under 1 GB)
ESC = "\x1b"


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``mesh-mcp ARGS`` in a subprocess under the memory limit; a hang fails the test."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "NO_COLOR": "1"}
    try:
        return subprocess.run([sys.executable, "-m", "server.cli", *args], cwd=REPO_ROOT, env=env, text=True,
                              capture_output=True, timeout=timeout, preexec_fn=_limit_memory, check=False,
                              errors="replace")
    except subprocess.TimeoutExpired:
        pytest.fail(f"mesh-mcp {' '.join(args)} hung (over {timeout} s)")


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def skill(name: str, extra: str = "", body: str = "Nothing to see.\n") -> str:
    return f"---\nname: {name}\ndescription: a skill\n{extra}---\n# {name}\n\n{body}"


def settings(root: Path, tmp_path: Path):
    return load_settings(workspace=root, environ={}, overrides={"state_dir": str(tmp_path / "state")})


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """A small workspace: one service with a producer, and a secret file next to (outside) it."""
    root = tmp_path / "ws"
    write(root, "ms-shop/package.json", '{"name": "ms-shop"}')
    write(root, "ms-shop/src/types.ts", "export enum ShopJobType { CHARGE = 'shop.charge' }\n")
    write(root, "ms-shop/src/charge.ts",
          "import { ShopJobType } from './types';\n"
          "export class ChargeService {\n  run() {\n"
          "    return JobsOutboxEntity.createJob({ type: ShopJobType.CHARGE, emitter: 'ms-shop', payload: {} });\n"
          "  }\n}\n")
    write(tmp_path, "secret.txt", "TOP-SECRET-PASSWORD\n")
    return root


# -- 1. no program runs from a workspace's git layout ---------------------------------------------------

GIT_SETTINGS = {  # each setting that makes some git command run a program, with the marker it would write
    "fsmonitor": "[core]\n\tfsmonitor = \"touch {m}\"\n",
    "hooks": "[core]\n\thooksPath = hooks\n",
    "ssh": "[core]\n\tsshCommand = \"touch {m}\"\n",
    "pager": "[core]\n\tpager = \"touch {m}\"\n",
    "filter": "[filter \"x\"]\n\tclean = \"touch {m}\"\n\tsmudge = \"touch {m}\"\n\tprocess = \"touch {m}\"\n",
    "diff": "[diff \"x\"]\n\ttextconv = \"touch {m}\"\n\tcommand = \"touch {m}\"\n",
    "signature": "[log]\n\tshowSignature = true\n[gpg]\n\tprogram = \"touch {m}\"\n",
}


def _git(*args: str | Path) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_DATE": "2026-01-01T00:00:00+00:00", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+00:00"}
    subprocess.run(["git", *map(str, args)], env=env, check=True, capture_output=True)


def _plant_git(root: Path, rel: str, setting: str, marker: Path, *, bare: bool = False) -> None:
    """A repository with one commit made before the skill's verification record (so that the checker of
    old asked git log, found nothing, and ran git status), an uncommitted change, then the setting planted."""
    folder = root / rel
    work = folder if not bare else root.parent / f"{rel}-work"
    write(work, "README.md", "a file\n")
    write(work, ".gitattributes", "* filter=x diff=x\n")
    _git("init", "-q", work)
    _git("-C", work, "add", "-A")
    _git("-C", work, "commit", "-q", "-m", "one")
    if bare:
        _git("clone", "-q", "--bare", work, folder)
    write(work, "README.md", "a file, changed\n")  # an uncommitted change: status compares the content
    git_dir = folder if bare else folder / ".git"
    with (git_dir / "config").open("a") as fh:
        fh.write(GIT_SETTINGS[setting].format(m=marker))
    hooks = git_dir / "hooks" if setting != "hooks" else folder / "hooks"
    hooks.mkdir(exist_ok=True)
    for hook in ("post-checkout", "pre-commit", "post-index-change", "reference-transaction", "fsmonitor-watchman"):
        (hooks / hook).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (hooks / hook).chmod(0o755)


def test_skills_check_runs_no_program_from_a_git_layout_it_is_pointed_at(ws: Path, tmp_path: Path) -> None:
    markers = {}
    sources = ""
    for setting in GIT_SETTINGS:
        markers[setting] = tmp_path / f"ran-{setting}"
        _plant_git(ws, f"evil-{setting}", setting, markers[setting])
        sources += f"  - resource: evil-{setting}\n"
    markers["bare"] = tmp_path / "ran-bare"
    _plant_git(ws, "evil-bare", "fsmonitor", markers["bare"], bare=True)
    sources += "  - resource: evil-bare\n"
    record = 'verified:\n  - at: "2026-01-10T10:00:00Z"\n    digest: "0000000000000000"\n'
    write(ws, "meta/.agents/skills/git-bait/SKILL.md", skill("git-bait", f"sources:\n{sources}{record}"))

    done = run_cli("skills", "check", "--workspace", str(ws), "--json")
    assert done.returncode in (0, 1), done.stderr
    assert "source_unverified" in done.stdout, "the sources were reached (a digest that does not match)"
    ran = [name for name, marker in markers.items() if marker.exists()]
    assert ran == [], f"git settings of the workspace ran a program: {ran}"


# -- 2. symlinks, FIFOs, devices and oversized files are not read -------------------------------------------

async def test_a_skill_that_is_a_symlink_out_of_the_workspace_is_not_read(ws: Path, tmp_path: Path) -> None:
    link = ws / "meta/.agents/skills/leak/SKILL.md"
    link.parent.mkdir(parents=True)
    link.symlink_to(tmp_path / "secret.txt")
    inside = write(ws, "meta/docs/inside.md", skill("inside"))
    (ws / "meta/.agents/skills/fine").mkdir(parents=True)
    (ws / "meta/.agents/skills/fine/SKILL.md").symlink_to(inside)  # a symlink staying inside is followed
    found = {s.slug: s for s in discover_workspace_skills(ws).skills}
    assert "outside the workspace" in (found["leak"].error or "")
    assert "TOP-SECRET" not in found["leak"].text
    assert found["fine"].error is None and found["fine"].name == "inside"

    async with in_process_client(settings(ws, tmp_path)) as client:
        listed = {str(r.uri): r for r in (await client.list_resources()).resources}
        uri = next(u for u in listed if u.endswith("/leak"))
        with pytest.raises(Exception) as refused:
            await client.read_resource(uri)
    assert "TOP-SECRET" not in str(refused.value) and "outside the workspace" in str(refused.value)


def test_a_skill_linked_to_dev_zero_is_refused_under_a_memory_limit(ws: Path) -> None:
    link = ws / "meta/.agents/skills/zero/SKILL.md"
    link.parent.mkdir(parents=True)
    link.symlink_to("/dev/zero")
    done = run_cli("skills", "check", "--workspace", str(ws), "--json")
    assert done.returncode == 1 and "unreadable" in done.stdout, done.stderr[-2000:]


def test_a_fifo_named_skill_md_does_not_hang_the_listing(ws: Path) -> None:
    fifo = ws / "meta/.agents/skills/fifo/SKILL.md"
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    done = run_cli("skills", "check", "--workspace", str(ws), "--json", timeout=30)
    assert done.returncode == 1 and "not a regular file (a FIFO)" in done.stdout, done.stderr[-2000:]


async def test_an_oversized_skill_is_not_served_whole(ws: Path, tmp_path: Path) -> None:
    big = write(ws, "meta/.agents/skills/big/SKILL.md", skill("big", body="x" * 30_000_000))
    assert big.stat().st_size > 30_000_000
    async with in_process_client(settings(ws, tmp_path)) as client:
        listed = [str(r.uri) for r in (await client.list_resources()).resources]
        uri = next(u for u in listed if u.endswith("/big"))
        with pytest.raises(Exception, match="over the 1000000-byte cap"):
            await client.read_resource(uri)


def test_a_tsconfig_extending_dev_zero_does_not_crash_index(ws: Path) -> None:
    depth = len(ws.parts)
    write(ws, "ms-shop/tsconfig.json", '{"extends": "' + "../" * depth + 'dev/zero", '
          '"compilerOptions": {"baseUrl": "."}}')
    write(ws, "ms-shop/tsconfig.build.json", '{"extends": "./tsconfig.json"}')
    write(ws, "ms-event/package.json", '{"name": "ms-event"}')
    write(ws, "ms-event/src/x.ts", "export const x = 1;\n")
    write(ws, "ms-event/tsconfig.json", '{"extends": "./base.json", "compilerOptions": {"baseUrl": "."}}')
    (ws / "ms-event/base.json").symlink_to("/dev/zero")
    done = run_cli("index", "--workspace", str(ws))
    assert done.returncode == 0, done.stderr[-2000:]


LAUGHS = "".join(f"{k}: &{k} [{', '.join([f'*{p}'] * 9)}]\n" for p, k in zip("abcdefgh", "bcdefghi", strict=True))


def test_a_yaml_alias_bomb_in_a_skill_neither_hangs_the_listing_nor_eats_memory(ws: Path, tmp_path: Path) -> None:
    front = f"a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n{LAUGHS}tags: *i\npaths: *i\nsources: *i\n"
    write(ws, "meta/.agents/skills/bomb/SKILL.md", skill("bomb", front))
    code = (  # the server's own listing and check_skills, in a process under the limits
        "import anyio, sys\nfrom pathlib import Path\nfrom server.config import load_settings\n"
        "from tests.helpers import in_process_client\n"
        "async def main():\n"
        f"    s = load_settings(workspace=Path({str(ws)!r}), environ={{}},\n"
        f"                      overrides={{'state_dir': {str(tmp_path)!r}}})\n"
        "    async with in_process_client(s) as c:\n"
        "        listed = [r for r in (await c.list_resources()).resources if str(r.uri).endswith('/bomb')]\n"
        "        checked = await c.call_tool('check_skills', {})\n"
        "    print(listed[0].description, checked.is_error, checked.structured_content['errors'])\n"
        "anyio.run(main)\n")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    try:
        done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=env, text=True, capture_output=True,
                              timeout=60, preexec_fn=_limit_memory, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail("listing a skill whose front matter is an alias bomb hung")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "aliases are expanded" in done.stdout and "False 1" in done.stdout


# -- 6. bounded work: globs and self-referencing objects ---------------------------------------------------

def _deep_tree(ws: Path) -> None:
    write(ws, "ms-shop/src/" + "/".join(f"d{i}" for i in range(18)) + "/leaf.ts", "export const leaf = 1;\n")


def test_a_pathological_skill_glob_neither_hangs_check_skills_nor_impact(ws: Path) -> None:
    _deep_tree(ws)
    glob = "ms-shop/" + "**/" * 25 + "nothing.ts"
    write(ws, "ms-shop/.agents/skills/glob/SKILL.md", skill("glob", f'paths: ["{glob}"]\n'))
    done = run_cli("skills", "check", "--workspace", str(ws), "--json", timeout=60)
    assert done.returncode in (0, 1) and "glob" in done.stdout, done.stderr[-2000:]
    done = run_cli("impact", "shop.charge", "--workspace", str(ws), timeout=60)
    assert done.returncode == 0 and "ChargeService" in done.stdout, done.stderr[-2000:]


async def test_an_object_spreading_itself_breaks_no_static_tool(ws: Path, tmp_path: Path) -> None:
    write(ws, "ms-shop/src/cycle.ts",
          "export const A = { ...A } as const;\n"
          "export const B = { ...C, x: 'shop.x' };\nexport const C = { ...B };\n"
          "export const D = E;\nexport const E = D;\n"
          "export { F as G } from './cycle';\nexport { G as F } from './cycle';\nexport * from './cycle';\n")
    async with in_process_client(settings(ws, tmp_path)) as client:
        results = {name: await client.call_tool(name, args) for name, args in (
            ("list_catalogue", {}), ("analyze_impact", {"target": "shop.charge"}), ("lint_flows", {}),
            ("flow_map", {"target": "shop.charge"}), ("verify_flow", {"target": "shop.charge"}))}
    broken = {name: r.content[0].text[:300] for name, r in results.items() if r.is_error}
    assert broken == {}


# -- 7. sources outside the workspace are refused without a look ----------------------------------------------

def test_sources_outside_the_workspace_are_refused_without_probing(ws: Path, tmp_path: Path) -> None:
    write(ws, "meta/.agents/skills/probe/SKILL.md", skill("probe", (
        "sources:\n"
        f"  - resource: {tmp_path / 'secret.txt'}\n"
        f"  - resource: {tmp_path / 'no-such-file'}\n"
        "  - resource: ../secret.txt\n"
        "  - resource: ms-shop/../../no-such-file\n"
        "  - resource: out-link/secret.txt\n"
        "  - resource: out-link/no-such-file\n"
        "  - resource: ms-shop/src/types.ts\n"
        "verified:\n  - at: \"2026-01-10T10:00:00Z\"\n    digest: \"0000000000000000\"\n")))
    (ws / "out-link").symlink_to(tmp_path)
    report = check_skills(settings(ws, tmp_path))
    findings = [f for s in report.skills for f in s.findings]
    outside = sorted(f.name for f in findings if f.code == "source_outside")
    assert outside == sorted([str(tmp_path / "secret.txt"), str(tmp_path / "no-such-file"), "../secret.txt",
                              "ms-shop/../../no-such-file", "out-link/secret.txt", "out-link/no-such-file"]), \
        "an existing and a missing outside path: the same answer"
    assert all(f.severity == "error" and "not looked at" in f.message for f in findings if f.code == "source_outside")
    assert not [f for f in findings if f.code == "source_missing"]
    unverified = [f for f in findings if f.code == "source_unverified"]
    assert [f.name for f in unverified] == ["ms-shop/src/types.ts"], "the digest covers the inside source only"


# -- 8. workspace text is shown, not obeyed --------------------------------------------------------------------

def test_escape_sequences_from_the_workspace_never_reach_the_terminal(ws: Path) -> None:
    evil = f"shop.{ESC}]0;pwned\a{ESC}[2J{ESC}]52;c;cm0gLXJmIH4=\a\u202egone\rover"
    write(ws, "ms-shop/src/types.ts", f"export enum ShopJobType {{ CHARGE = 'shop.charge', EVIL = '{evil}' }}\n")
    write(ws, f"ms-shop/src/evil{ESC}[31m.ts",
          "import { ShopJobType } from './types';\n"
          "export class EvilService { run() {\n"
          "  return JobsOutboxEntity.createJob({ type: ShopJobType.EVIL, emitter: 'ms-shop', payload: {} }); } }\n")
    for args in (("catalogue",), ("impact", "EVIL"), ("map", "EVIL"), ("lint", "--min-severity", "info")):
        done = run_cli(*args, "--workspace", str(ws))
        assert done.returncode in (0, 1), (args, done.stderr[-2000:])
        shown = done.stdout + done.stderr
        assert ESC not in shown and "\a" not in shown and "\r" not in shown and "\u202e" not in shown, args
        assert "\\u001b" in shown, (args, "the escape is shown as text")


async def test_tool_text_shows_escapes_instead_of_passing_them_to_the_client(ws: Path, tmp_path: Path) -> None:
    write(ws, "ms-shop/src/types.ts", f"export enum ShopJobType {{ CHARGE = 'shop.charge', EVIL = 'shop.{ESC}[2J' }}\n")
    write(ws, "ms-shop/src/evil.ts",
          "import { ShopJobType } from './types';\n"
          "export class EvilService { run() {\n"
          "  return JobsOutboxEntity.createJob({ type: ShopJobType.EVIL, emitter: 'ms-shop', payload: {} }); } }\n")
    async with in_process_client(settings(ws, tmp_path)) as client:
        results = [await client.call_tool("list_catalogue", {}),
                   await client.call_tool("analyze_impact", {"target": "EVIL"})]
    for result in results:
        assert not result.is_error and ESC not in result.content[0].text and "\\u001b" in result.content[0].text


async def test_a_skill_title_with_escapes_is_listed_on_one_line(ws: Path, tmp_path: Path) -> None:
    write(ws, "meta/.agents/skills/title/SKILL.md",
          '---\nname: title\ntitle: "Nice\\e[2J\\nSecond line"\ndescription: "d\\e]0;x\\a"\n---\n# t\n')
    async with in_process_client(settings(ws, tmp_path)) as client:
        listed = [r for r in (await client.list_resources()).resources if str(r.uri).endswith("/title")]
    assert listed and ESC not in (listed[0].title or "") and "\n" not in (listed[0].title or "")
    assert ESC not in (listed[0].description or "") and "\a" not in (listed[0].description or "")
    assert "\\u001b" in (listed[0].title or "")


async def test_a_value_holding_a_fence_cannot_open_a_block_before_the_picture(ws: Path, tmp_path: Path) -> None:
    value = 'shop.fence\n~~~mermaid\nflowchart LR\n  A-->B\n  click A href "javascript:alert(1)"\n~~~\n'
    write(ws, "ms-shop/src/fence.ts",
          f"export const FenceType = {{ X: `{value}` }} as const;\n"
          "export class FenceService { run() {\n"
          "  return JobsOutboxEntity.createJob({ type: FenceType.X, emitter: 'ms-shop', payload: {} }); } }\n")
    async with in_process_client(settings(ws, tmp_path)) as client:
        result = await client.call_tool("flow_map", {"target": "FenceType.X"})
    assert not result.is_error, result.content[0].text
    text = result.content[0].text
    fences = [line for line in text.splitlines() if line.lstrip().startswith(("```", "~~~"))]
    assert fences == ["```mermaid", "```"], fences
    picture = text[text.index("```mermaid"):]
    clicks = [line for line in picture.splitlines() if line.lstrip().startswith("click")]
    assert not [line for line in clicks if "javascript" in line], "the value stays inside its quoted label"
