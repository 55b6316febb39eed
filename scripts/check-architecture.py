#!/usr/bin/env python3
"""Holds docs/ARCHITECTURE.md's crate diagram to the workspace's Cargo.toml.

The diagram is the first ```mermaid block of docs/ARCHITECTURE.md: nodes
`id[crate-name]`, arrows `a --> b` ("a depends on b"). Every arrow must be a
normal (non-dev) dependency between workspace crates, and every such
dependency an arrow: a crate that gains or loses a dependency fails this
check until the picture says so. Dev-dependencies are left out (tests may
use any crate), and so are the crates that are build plumbing rather than
architecture (SKIPPED); of those, the workspace-hack may be a dependency of
the binary only (HACK_USERS).
"""
import json
import re
import subprocess
import sys
from pathlib import Path

# cargo-hakari's feature-unification crate, and the benchmarks' crate: the
# binary depends on the one (and so every build of it), and the other
# depends on everything.
SKIPPED = {"agwire-workspace-hack", "agwire-bench"}
# The only crates that may depend on the workspace-hack (ARCHITECTURE.md:
# "Only the binary depends on it"): a published library crate cannot depend
# on an unpublished one, and would drag the binary's features (sqlx, tokio
# full, aws-lc) into everyone's build.
HACK_USERS = {"agwire"}

root = Path(__file__).resolve().parent.parent
doc = (root / "docs/ARCHITECTURE.md").read_text()
block = re.search(r"```mermaid\n(.*?)```", doc, re.S)
if not block:
    sys.exit("docs/ARCHITECTURE.md: no ```mermaid crate diagram")

names, drawn = {}, set()
node = re.compile(r"(\w+)\[([\w-]+)\]")
for line in block.group(1).splitlines():
    for ident, name in node.findall(line):
        names[ident] = name
    arrow = re.match(r"\s*(\w+)(?:\[[\w-]+\])?\s*-\.?->\s*(\w+)(?:\[[\w-]+\])?\s*$", line)
    if arrow:
        drawn.add(arrow.groups())
drawn = {(names.get(a, a), names.get(b, b)) for a, b in drawn}

metadata = json.loads(
    subprocess.check_output(
        ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"],
        cwd=root,
    )
)
members = {p["name"] for p in metadata["packages"]} - SKIPPED
actual = {
    (p["name"], d["name"])
    for p in metadata["packages"]
    if p["name"] in members
    for d in p["dependencies"]
    if d["name"] in members and d["kind"] in (None, "build")
}

problems = []
for p in metadata["packages"]:
    if p["name"] not in HACK_USERS and any(
        d["name"] == "agwire-workspace-hack" and d["kind"] in (None, "build")
        for d in p["dependencies"]
    ):
        problems.append(
            f"{p['name']} depends on agwire-workspace-hack: only {', '.join(sorted(HACK_USERS))} may"
        )
for a, b in sorted(actual - drawn):
    problems.append(f"{a} depends on {b} (Cargo.toml) but the diagram has no arrow {a} --> {b}")
for a, b in sorted(drawn - actual):
    problems.append(f"the diagram draws {a} --> {b}, but {a}'s Cargo.toml has no such dependency")
for crate in sorted(members - set(names.values())):
    problems.append(f"crate {crate} is not in the diagram")
if problems:
    print("docs/ARCHITECTURE.md's crate diagram disagrees with Cargo.toml:")
    for problem in problems:
        print("  " + problem)
    sys.exit(1)
print(f"docs/ARCHITECTURE.md: {len(actual)} crate arrows, all as in Cargo.toml")
