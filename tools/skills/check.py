"""check_skills: the workspace's own SKILL.md files checked against the code, schema and config.

Per skill, with file and line: names in code that nothing declares (with the closest declared
name), paths and ``paths`` globs that match nothing (a missing repository said so), sources that
no longer exist or changed since their last verification record, and commands that nothing
defines. Precision comes first: see :mod:`tools.skills.names`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from resources.skill_catalog import SkillCatalog
from resources.workspace_skills import WorkspaceSkill, discover_workspace_skills
from server.config import Settings
from server.errors import InvalidArgument, MeshError
from tools.skills.model import SkillCheck, SkillFinding, SkillsReport
from tools.skills.names import NameChecker, Stale
from tools.skills.paths import GlobTooComplex, literal_head
from tools.skills.runs import check_commands
from tools.skills.sources import check_sources
from tools.skills.spans import code_spans
from tools.skills.vocab_cache import VocabularyCache, make_checker
from tools.skills.vocabulary import Vocabulary, build_vocabulary


def _line_of(skill: WorkspaceSkill, needle: str) -> int:
    """The first line of the file holding ``needle`` (front-matter values), else 1."""
    for number, line in enumerate(skill.text.splitlines(), start=1):
        if needle and needle in line:
            return number
    return 1


def _finding(skill: WorkspaceSkill, code: str, severity: str, line: int, name: str, message: str,
             suggestion: str | None = None) -> SkillFinding:
    return SkillFinding(code=code, severity=severity, file=skill.rel_path, line=line, name=name,  # type: ignore[arg-type]
                        message=message, suggestion=suggestion)


def _stale_finding(skill: WorkspaceSkill, stale: Stale) -> SkillFinding:
    if stale.kind == "path":
        return _finding(skill, "path_unmatched", "warning", stale.line, stale.name,
                        "no file or folder of the workspace matches this path", stale.suggestion)
    return _finding(skill, "unknown_name", stale.severity, stale.line, stale.name,
                    f"no {stale.kind} of that name is declared in the code, migrations or config",
                    stale.suggestion)


def check_one(skill: WorkspaceSkill, root: Path, names: NameChecker, vocab: Vocabulary,
              our_commands: Iterable[str], *, check_paths: bool = True) -> SkillCheck:
    """Every finding of one skill, in line order."""
    findings: list[SkillFinding] = []
    if skill.error:
        findings.append(_finding(skill, "unreadable", "error", 1, skill.rel_path, skill.error))
    for glob in skill.paths:
        try:
            if names.find_path(glob) is not None:
                continue
        except GlobTooComplex as exc:
            findings.append(_finding(skill, "path_unchecked", "info", _line_of(skill, glob), glob,
                                     f"paths glob not checked: {exc} (nested '**' over a deep tree); simplify it"))
            continue
        head = literal_head(glob)
        line = _line_of(skill, glob)
        if head is not None and head not in vocab.top_dirs:
            findings.append(_finding(skill, "repo_missing", "warning", line, glob,
                                     f"paths glob names repository '{head}', which is not in this workspace"))
        else:
            findings.append(_finding(skill, "path_unmatched", "warning", line, glob,
                                     "paths glob matches no file or folder of the workspace", names.moved_to(glob)))
    for verdict in check_sources(root, skill.front_matter):
        severity = {"source_missing": "error", "source_outside": "error"}.get(verdict.code, "info")
        suggestion = names.moved_to(verdict.resource) if verdict.code == "source_missing" else None
        findings.append(_finding(skill, verdict.code, severity, _line_of(skill, verdict.resource.split(", ")[0]),
                                 verdict.resource, verdict.message, suggestion))
    spans = code_spans(skill.body, skill.body_line)
    seen: set[tuple[str, int]] = set()
    for span in spans:
        for stale in names.check(span):
            if stale.kind == "path" and not check_paths:
                continue
            if (stale.name, stale.line) not in seen:
                seen.add((stale.name, stale.line))
                findings.append(_stale_finding(skill, stale))
    for missing in check_commands(spans, vocab, our_commands):
        findings.append(_finding(skill, "unknown_command", "warning", missing.line, missing.command,
                                 missing.reason, missing.suggestion))
    findings.sort(key=lambda f: (f.line, f.code, f.name))
    return SkillCheck(uri=skill.uri, name=skill.name, file=skill.rel_path, findings=findings)


def our_commands() -> list[str]:
    """The ``mesh-mcp`` subcommands (so a skill may tell people to run them)."""
    from server.commands import COMMANDS

    return sorted({name.split()[0] for name in COMMANDS})


REUSED = "; names as read by an earlier call (no folder, source file or setting changed since)"


def check_skills(settings: Settings, name: str | None = None, *, vocabulary: VocabularyCache | None = None,
                 catalog: SkillCatalog | None = None) -> SkillsReport:
    """Check the workspace's skills (or the one whose name, slug or URI is ``name``).

    A running server passes its ``vocabulary`` cache (kept while the code and config are unchanged)
    and its skill ``catalog``; without them both are built for this call."""
    if settings.workspace is None:
        raise MeshError("check_skills needs a workspace: start the server with --workspace DIR (or set workspace)")
    root = settings.workspace
    conv = settings.conventions
    static = conv.static
    found = catalog.current() if catalog is not None else discover_workspace_skills(root, static.skip_dirs)
    skills = found.skills
    if name is not None:
        skills = [s for s in skills if name in (s.name, s.slug, s.uri)]
        if not skills:
            known = ", ".join(s.name for s in found.skills) or "(none)"
            raise InvalidArgument(f"no workspace skill named '{name}'; known: {known}")
    vocab, names, reused = (vocabulary or VocabularyCache()).get(root, static.skip_dirs, conv)
    commands = our_commands()
    checks = [check_one(s, root, names, vocab, commands) for s in skills]
    counts = {sev: sum(f.severity == sev for c in checks for f in c.findings) for sev in ("error", "warning", "info")}
    searched = (f"{len(vocab.files)} files of {root} (source, SQL, JSON and YAML read), the configured table names "
                f"and mesh-mcp's commands{'; the walk was cut at its bound' if vocab.truncated else ''}"
                f"{'; skill discovery was cut at its bound' if found.truncated else ''}"
                f"{REUSED if reused else ''}")
    return SkillsReport(skills=checks, errors=counts["error"], warnings=counts["warning"], infos=counts["info"],
                        searched=searched, vocabulary_reused=reused)


def check_bundled(package_root: Path, settings: Settings, skills_dir: Path | None = None) -> list[SkillCheck]:
    """mesh-mcp's own skills (or those of ``skills_dir``) checked against the code under ``package_root``."""
    from resources.skills import load_skills
    from resources.workspace_skills import parse_workspace_skill

    conv = settings.conventions
    skip = [".venv", ".git", "tests", "bench", "docs", "node_modules", "dist", "build", ".mesh", "__pycache__"]
    vocab = build_vocabulary(package_root, skip)
    names = make_checker(vocab, conv)
    checks = []
    for bundled in load_skills(skills_dir):
        rel = bundled.path.relative_to(package_root).as_posix() if bundled.path else bundled.name
        skill = parse_workspace_skill(bundled.text, rel_path=rel, repo=".", slug=bundled.name)
        # its paths are examples of a workspace's layout, not paths of mesh-mcp: names and commands only
        checks.append(check_one(skill, package_root, names, vocab, our_commands(), check_paths=False))
    return checks
