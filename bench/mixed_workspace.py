"""Build a mixed workspace for ``static_bench.py --workspace``: real TypeScript + fixtures + generated files.

The generator (:mod:`bench.gen_workspace`) writes a few shapes again and again; real code has
more varied syntax (generics, overloads, decorators with object arguments, namespaces,
template literals, long union types). This script lays side by side, each in its own folder
with its ``package.json``:

- the TypeScript sources (``*.ts``, not ``*.d.ts``) shipped in npm tarballs: by default the
  packages of :data:`PACKAGES` fetched with ``npm pack`` (rxjs, zod, tRPC, TanStack Query,
  LoopBack 4 and Feathers: class and decorator heavy, DI containers, repositories, REST
  controllers), or the ``*.tgz`` of ``--tarballs DIR``;
- this repository's fixture workspaces (``tests/fixtures/*_workspace`` and
  ``resources/sample_workspace``), the target system's shapes written by hand;
- generated files (:func:`bench.gen_workspace.generate`) up to ``--files``.

Usage: ``python bench/mixed_workspace.py OUT_DIR [--files 1500] [--tarballs DIR]``. Prints how many
files of each part were written.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.gen_workspace import generate

PACKAGES = [
    "rxjs@7.8.2", "zod@4.6.7", "@trpc/server@11.25.2", "@tanstack/query-core@5.108.4",
    "@loopback/repository@8.0.15", "@loopback/rest@15.0.16", "@loopback/context@8.0.15",
    "@loopback/core@7.0.15", "@loopback/boot@8.0.16", "@loopback/openapi-v3@11.0.16",
    "@loopback/authentication@12.0.16", "@loopback/express@8.0.15",
    "@feathersjs/feathers@5.0.50", "@feathersjs/schema@5.0.50", "@feathersjs/authentication@5.0.50",
]
REPO = Path(__file__).resolve().parent.parent
FIXTURES = [*sorted((REPO / "tests/fixtures").glob("*_workspace")), REPO / "resources/sample_workspace"]


def fetch(into: Path) -> list[Path]:
    """``npm pack`` every package of :data:`PACKAGES` into ``into``; the tarballs written."""
    out = subprocess.run(["npm", "pack", "--silent", *PACKAGES], cwd=into, check=True,
                         capture_output=True, text=True).stdout.split()
    return [into / name for name in out if name.endswith(".tgz")]


def unpack_sources(tgz: Path, dest: Path) -> int:
    """Extract the ``package.json`` and the TypeScript sources of one tarball under ``dest``."""
    n = 0
    with tarfile.open(tgz) as tar:
        for member in tar.getmembers():
            name = member.name.split("/", 1)[-1]
            source = name.endswith(".ts") and not name.endswith(".d.ts")
            if not member.isfile() or not (source or name == "package.json") or ".." in name:
                continue
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(tar.extractfile(member).read())
            n += source
    return n


def build(out: Path, files: int, tarballs: list[Path]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for tgz in sorted(tarballs):
        counts[f"npm {tgz.stem}"] = unpack_sources(tgz, out / "vendor" / tgz.stem)
    for fixture in FIXTURES:
        name = fixture.name if fixture.parent.name == "fixtures" else "sample_workspace"
        shutil.copytree(fixture, out / "fixtures" / name, ignore=shutil.ignore_patterns("node_modules", ".mesh"))
        counts[f"fixture {name}"] = sum(1 for p in (out / "fixtures" / name).rglob("*.ts"))
    rest = files - sum(counts.values())
    if rest > 0:
        counts["generated"] = generate(out / "generated", rest)
    return counts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--files", type=int, default=1500)
    ap.add_argument("--tarballs", type=Path, help="a folder of npm *.tgz (default: npm pack the fixed list)")
    args = ap.parse_args()
    if args.out.exists() and any(args.out.iterdir()):
        print(f"{args.out} is not empty", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        tarballs = sorted(args.tarballs.glob("*.tgz")) if args.tarballs else fetch(Path(tmp))
        counts = build(args.out, args.files, tarballs)
    for part, n in counts.items():
        print(f"{n:6d}  {part}")
    print(f"{sum(counts.values()):6d}  files under {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
