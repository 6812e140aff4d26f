"""What a git source's ``[[sources]]`` entry may say, declared with pydantic and checked when the
config loads, every mistake listed at once (docs/connectors/git.md): a local path or a clone URL,
the branch, the folder, the files and how they are read (the vocabulary,
docs/connectors/mapping.md), where ``effective_from`` comes from, the cache folder, the timeout.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar
from urllib.parse import urlsplit

from pydantic import Field, PlainValidator

from connectors.options import ConnectorSettings, Loc, checked_url, invalid, text
from connectors.vocabulary import VocabularyOptions, glob_problem, vocabulary_rules

__all__ = [
    "DEFAULT_GLOB",
    "DEFAULT_TIMEOUT",
    "EFFECTIVE_FROM",
    "GitOptions",
    "GitSettings",
    "clean_subdir",
]

DEFAULT_GLOB = "**/*.md"
#: Seconds one git command may take (a first clone of a large repository may need more).
DEFAULT_TIMEOUT = 120.0
#: Where ``effective_from`` comes from: frontmatter when present else the commit time; or
#: always the commit time.
EFFECTIVE_FROM = ("frontmatter", "commit")

_REF = re.compile(
    r"^(?!-)(?!.*\.\.)(?!.*//)(?!.*@\{)[^\x00-\x20\x7f~^:?*\[\\]+(?<![./])(?<!\.lock)$"
)


def clean_subdir(subdir: str | None) -> str:
    """``subdir`` as a repository path: forward slashes, no leading or trailing one."""
    return (subdir or "").replace("\\", "/").strip("/")


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise invalid("must be a non-empty string")
    return value


def _branch(value: Any) -> str:
    if not _REF.match(_text(value)):
        raise invalid(f"{value!r} is not a valid branch name")
    return str(value)


def _subdir(value: Any) -> str:
    parts = _text(value).replace("\\", "/").strip("/").split("/")
    if value.startswith("/") or any(part in {"", ".", ".."} for part in parts):
        raise invalid("must be a folder inside the repository, like 'docs/hr'")
    return str(value)


def _glob(value: Any) -> str:
    problem = glob_problem(_text(value))
    if problem is not None:
        raise invalid(problem)
    return str(value)


def _effective_from(value: Any) -> str:
    if _text(value) not in EFFECTIVE_FROM:
        raise invalid(f"must be one of {', '.join(EFFECTIVE_FROM)}")
    return str(value)


def _timeout(value: Any) -> float:
    try:
        seconds = float(value) if not isinstance(value, bool) else 0.0
    except (TypeError, ValueError):
        seconds = 0.0
    if not seconds > 0:
        raise invalid("must be a positive number of seconds")
    return seconds


class GitOptions(VocabularyOptions):
    """``[sources.options]`` of a git source (docs/connectors/git.md): where the documents
    are, and how they are read (docs/connectors/mapping.md)."""

    unknown_option: ClassVar[str] = "unknown option for a git source"

    branch: Annotated[str, PlainValidator(_branch)] | None = None
    subdir: Annotated[str, PlainValidator(_subdir)] | None = None
    glob: Annotated[str, PlainValidator(_glob)] = DEFAULT_GLOB
    effective_from: Annotated[str, PlainValidator(_effective_from)] = "frontmatter"
    cache_dir: Annotated[str, text("must be a non-empty string")] | None = None
    timeout: Annotated[float, PlainValidator(_timeout)] = DEFAULT_TIMEOUT


def _clone_url_problems(url: str) -> list[str]:
    problems = []
    if url.startswith("-"):
        problems.append("a clone URL cannot start with '-'")
    if url.lower().startswith("ext::"):
        problems.append("the ext:: transport runs commands; it is not allowed")
    parts = urlsplit(url)
    if parts.scheme and parts.password:
        problems.append(
            "credentials do not belong in the config file: use a git credential helper or an "
            "SSH key (the git command's own configuration)"
        )
    return problems


class GitSettings(ConnectorSettings):
    """What a git source reads of its ``[[sources]]`` entry."""

    path: str | None = None
    url: Annotated[str | None, checked_url(_clone_url_problems)] = None
    options: GitOptions = Field(default_factory=GitOptions)

    @classmethod
    def rules(cls, given: Mapping[str, Any], options: Mapping[str, Any]) -> list[tuple[Loc, str]]:
        """git on PATH; exactly one of path and url; a cache folder for a clone URL only."""
        problems: list[tuple[Loc, str]] = []
        if shutil.which("git") is None:
            problems.append((("type",), "the git connector needs the git command on PATH"))
        if given.get("path") and given.get("url"):
            problems.append(
                (("url",), "set path (a local repository) or url (a clone URL), not both")
            )
        elif not given.get("path") and not given.get("url"):
            problems.append(
                (("path",), "a git source needs path (a local repository) or url (a clone URL)")
            )
        if "cache_dir" in options and not given.get("url"):
            problems.append((("options", "cache_dir"), "cache_dir applies to url sources only"))
        if "glob" in options and "include" in options:
            problems.append(
                (("options", "glob"), "set include (a list of globs) or glob, not both")
            )
        return problems + vocabulary_rules(options)
