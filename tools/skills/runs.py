"""Commands a runbook tells people to run, checked against what the workspace defines.

Only launchers whose targets the workspace declares are checked: ``npm run X`` / ``yarn X`` /
``pnpm X`` (package.json scripts, ``yarn workspace PKG X`` in that package), ``make X``
(Makefile targets) and ``mesh-mcp X`` (our own commands). Anything else (``psql``,
``redis-cli``, ``npx``...) is not ours to judge.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from tools.skills.names import closest
from tools.skills.spans import Span
from tools.skills.vocabulary import Vocabulary

SHELL_LANGS = {"", "sh", "bash", "shell", "console", "zsh", "terminal"}
YARN_BUILTINS = {
    "add", "bin", "cache", "config", "constraints", "dedupe", "dlx", "exec", "explain", "info", "init", "install",
    "link", "node", "npm", "pack", "patch", "plugin", "rebuild", "remove", "run", "search", "set", "stage",
    "unlink", "unplug", "up", "upgrade", "version", "why", "workspaces", "import", "audit", "global", "login",
    "logout", "outdated", "publish", "tag", "team", "create", "generate-lock-entry", "licenses", "list", "owner",
    "policy",
}
PNPM_BUILTINS = {"install", "i", "add", "remove", "rm", "update", "up", "exec", "dlx", "publish", "list", "ls",
                 "link", "unlink", "import", "rebuild", "prune", "fetch", "audit", "outdated", "why", "store",
                 "create", "init", "env", "setup", "patch", "deploy", "pack", "root", "bin", "config"}
PLACEHOLDER = re.compile(r"[<>{}]|\$\{|\.\.\.")


@dataclass(frozen=True)
class MissingCommand:
    command: str
    line: int
    reason: str
    suggestion: str | None


def _words(line: str) -> list[str] | None:
    line = line.strip().removeprefix("$ ").strip()
    if not line or line.startswith("#") or PLACEHOLDER.search(line):
        return None
    line = re.split(r"\s(?:&&|\|\||\||;)\s", line)[0]
    try:
        return shlex.split(line, comments=True)
    except ValueError:
        return None


def _script(words: list[str]) -> tuple[str | None, str | None]:
    """(package or None, script) named by an npm/yarn/pnpm command, or (None, None)."""
    tool, rest = words[0], [w for w in words[1:] if not w.startswith("-")]
    if not rest:
        return None, None
    if tool == "npm":
        if rest[0] in ("run", "run-script") and len(rest) > 1:
            return None, rest[1]
        return (None, rest[0]) if rest[0] in ("test", "start") else (None, None)
    if tool == "yarn":
        if rest[0] == "workspace" and len(rest) > 2:
            return rest[1], rest[2] if rest[2] != "run" or len(rest) < 4 else rest[3]
        if rest[0] == "run" and len(rest) > 1:
            return None, rest[1]
        return (None, None) if rest[0] in YARN_BUILTINS else (None, rest[0])
    if tool == "pnpm":
        if rest[0] == "run" and len(rest) > 1:
            return None, rest[1]
        return (None, None) if rest[0] in PNPM_BUILTINS else (None, rest[0])
    return None, None


def check_commands(spans: Iterable[Span], vocab: Vocabulary, our_commands: Iterable[str]) -> Iterator[MissingCommand]:
    """The npm/yarn/pnpm/make/mesh-mcp commands of ``spans`` that nothing defines."""
    ours = set(our_commands)
    for span in spans:
        if span.lang is not None and span.lang not in SHELL_LANGS:
            continue
        words = _words(span.text)
        if not words or words[0] not in ("npm", "yarn", "pnpm", "make", "mesh-mcp"):
            continue
        if span.lang is None and len(words) < 2:
            continue
        if words[0] == "mesh-mcp":
            sub = next((w for w in words[1:] if not w.startswith("-")), None)
            if sub and sub not in ours:
                yield MissingCommand(span.text, span.line, f"mesh-mcp has no command '{sub}'", closest(sub, ours))
            continue
        if words[0] == "make":
            target = next((w for w in words[1:] if not w.startswith("-") and "=" not in w), None)
            if target and vocab.make_targets and target not in vocab.make_targets:
                yield MissingCommand(span.text, span.line, f"no Makefile defines the target '{target}'",
                                     closest(target, vocab.make_targets))
            continue
        package, script = _script(words)
        if script is None or not vocab.scripts:
            continue
        owners = vocab.scripts.get(script)
        if owners is None:
            yield MissingCommand(span.text, span.line, f"no package.json defines the script '{script}'",
                                 closest(script, vocab.scripts))
        elif package is not None and package not in owners:
            yield MissingCommand(span.text, span.line,
                                 f"package '{package}' defines no script '{script}' (defined in: "
                                 f"{', '.join(sorted(owners)[:3])})", None)
