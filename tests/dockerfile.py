"""The Dockerfile and .dockerignore read as data: instructions, the final stage, what the build
context leaves out."""

from __future__ import annotations

import fnmatch
import re

from tests.conftest import PROJECT_ROOT


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs of the Dockerfile, continuation lines joined."""
    lines = [
        line
        for line in (PROJECT_ROOT / "Dockerfile").read_text().splitlines()
        if not line.lstrip().startswith("#")
    ]
    joined = re.sub(r"\\\n\s*", " ", "\n".join(lines))
    instructions = []
    for line in joined.splitlines():
        if line.strip():
            keyword, _, rest = line.strip().partition(" ")
            instructions.append((keyword.upper(), rest.strip()))
    return instructions


def final_stage() -> list[tuple[str, str]]:
    instructions = dockerfile_instructions()
    starts = [index for index, (keyword, _) in enumerate(instructions) if keyword == "FROM"]
    assert len(starts) >= 2, "the Dockerfile is not multi-stage"
    return instructions[starts[-1] :]


def dockerignored(relative: str, patterns: list[str]) -> bool:
    """Whether Docker leaves RELATIVE out of the build context (no `!` patterns are used)."""
    parts = relative.split("/")
    prefixes = ["/".join(parts[: count + 1]) for count in range(len(parts))]
    for pattern in patterns:
        anywhere = pattern.removeprefix("**/")
        for prefix in prefixes:
            if fnmatch.fnmatchcase(prefix, pattern):
                return True
            if pattern != anywhere and fnmatch.fnmatchcase(prefix.split("/")[-1], anywhere):
                return True
    return False


def dockerignore_patterns() -> list[str]:
    lines = (PROJECT_ROOT / ".dockerignore").read_text().splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    assert not any(pattern.startswith("!") for pattern in patterns), "dockerignored() needs `!`"
    return patterns
