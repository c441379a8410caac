"""README.md and docs/*.md link only to files that exist and headings that exist, and the
README links to every page of docs/ (the reference lives there, the README is its door)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]

_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^ *(```|~~~).*?^ *\1", re.S | re.M)
_HEADING = re.compile(r"^#{1,6} (.+?)\s*#*$", re.M)


def _prose(path: Path) -> str:
    """The page without its fenced code blocks (links in code are not links)."""
    return _FENCE.sub("", path.read_text(encoding="utf-8"))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces
    as hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a page's headings (a repeated heading gets -1, -2, ... as on GitHub)."""
    seen: dict[str, int] = {}
    found = set()
    for heading in _HEADING.findall(_prose(path)):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def _relative_links(path: Path) -> list[str]:
    return [
        target
        for target in _LINK.findall(_prose(path))
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target)  # http:, https:, mailto:
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_reaches_a_file_and_heading(page: Path) -> None:
    """Each relative link names a file that exists and, after `#`, one of its headings."""
    broken = []
    for target in _relative_links(page):
        file_part, _, anchor = target.partition("#")
        linked = (page.parent / file_part).resolve() if file_part else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no such heading in {linked.name}")
    assert broken == []


def test_the_readme_links_to_every_docs_page() -> None:
    """Every page of docs/ is reachable from the README."""
    linked = {
        (ROOT / target.partition("#")[0]).resolve()
        for target in _relative_links(ROOT / "README.md")
    }
    missing = [p.name for p in DOCS.glob("*.md") if p.resolve() not in linked]
    assert missing == []


def test_slug_matches_github() -> None:
    """Anchors as GitHub makes them: punctuation dropped, code marks dropped, spaces as -."""
    assert slug("Flows: questionnaires that survive restarts") == (
        "flows-questionnaires-that-survive-restarts"
    )
    assert slug("Memory quality on LoCoMo (retrieval)") == "memory-quality-on-locomo-retrieval"
    assert slug("The `supervisor` node") == "the-supervisor-node"
