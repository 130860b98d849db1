"""Every relative link of the repository's markdown (the READMEs, CONTRIBUTING.md, docs/) resolves
on GitHub: its file exists inside the repository, and its `#anchor` is the slug GitHub gives one of
the target's headings. A page moved, renamed or retitled breaks a link silently otherwise."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[2]
# every markdown file of the repository (docs/, the READMEs, CONTRIBUTING.md), as git tracks them
SOURCES = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split()

FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
INLINE_LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.M)
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$", re.M)
SETEXT = re.compile(r"^(?! {0,3}(?:[-*>#]|\d+[.)])\s)( {0,3}\S.*)\n {0,3}(?:=+|-+)[ \t]*$", re.M)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:|^//")
LINE_ANCHOR = re.compile(r"^L\d+(?:-L\d+)?$")  # GitHub's anchors into a file's lines


def prose(markdown: str) -> str:
    """The text outside fenced code blocks: a link or heading shown as code is neither."""
    return FENCE.sub("", markdown)


def rendered(inline: str) -> str:
    """A heading's text as GitHub renders it: code spans' contents, links' texts, no emphasis."""
    parts = CODE_SPAN.split(inline)
    out = []
    for i, part in enumerate(parts):
        if i % 3 == 2:  # a code span's contents, kept as written
            out.append(part.strip())
        elif i % 3 == 0:
            part = INLINE_LINK.sub(lambda m: m.group(1), part)
            part = re.sub(r"<[^>]+>", "", part)
            part = re.sub(r"(\*+|(?<!\w)_+|_+(?!\w))", "", part)  # emphasis; foo_bar keeps its _
            out.append(part)
    return "".join(out)


def slug(text: str) -> str:
    """GitHub's heading id: lower case, every character but letters, digits, _, - and space
    dropped, each space a hyphen."""
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """The ids GitHub gives a page's headings; a repeated slug gets -1, -2, ... in order."""
    body = prose(markdown)
    titles = [(m.start(), m.group(2)) for m in HEADING.finditer(body)]
    titles += [(m.start(), m.group(1).strip()) for m in SETEXT.finditer(body)]
    seen: dict[str, int] = {}
    ids = set()
    for _, title in sorted(titles):
        base = slug(rendered(title).strip())
        n = seen.get(base, 0)
        seen[base] = n + 1
        ids.add(base if n == 0 else f"{base}-{n}")
    return ids


def links(markdown: str) -> list[str]:
    """Every link and image target in the prose, inline or reference-style."""
    body = CODE_SPAN.sub("", prose(markdown))
    return [m.group(2) for m in INLINE_LINK.finditer(body)] + REFERENCE.findall(body)


def broken(source: Path, root: Path = ROOT) -> list[str]:
    """Each relative link of `source` that does not resolve, with why, in one line each."""
    problems = []
    for target in links(source.read_text()):
        if not target or SCHEME.match(target):
            continue
        path_part, _, anchor = target.partition("#")
        path = (source.parent / unquote(path_part)).resolve() if path_part else source.resolve()
        if not path.is_relative_to(root.resolve()):
            problems.append(f"{target}: outside the repository")
        elif not path.exists():
            problems.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md":
            if unquote(anchor) not in anchors(path.read_text()):
                problems.append(f"{target}: no heading #{anchor} in {path.name}")
        elif anchor and not (path.is_file() and LINE_ANCHOR.match(anchor)):
            problems.append(f"{target}: #{anchor} names no heading (not a markdown file)")
    return problems


@pytest.mark.parametrize("source", SOURCES)
def test_relative_links_resolve(source: str) -> None:
    assert broken(ROOT / source) == []


def test_every_page_is_checked() -> None:
    assert {"README.md", "CONTRIBUTING.md", "examples/README.md", "apiservice/README.md", "docs/adapter.md",
            "docs/performance.md"} <= set(SOURCES)


# GitHub's own ids for these headings, as recorded by projects that test their slugger against
# GitHub's rendering (yzhang-gh/vscode-markdown's slugify tests, pingcap's docs-anchor tests).
@pytest.mark.parametrize(("heading", "expected"), [
    ("foo _italic_ bar", "foo-italic-bar"),
    ("foo_foo_bar", "foo_foo_bar"),
    ("`a.b` c", "ab-c"),
    ("1. not a list", "1-not-a-list"),
    ("`code-abc`", "code-abc"),
    ("第 1 步\uff1a软硬件环境需求及前置检查", "第-1-步软硬件环境需求及前置检查"),
    ("Via [remark-cli](https://example.com)", "via-remark-cli"),
])
def test_slugs_are_githubs(heading: str, expected: str) -> None:
    assert anchors(f"## {heading}\n") == {expected}


def test_a_repeated_heading_gets_a_counter() -> None:
    assert anchors("# Title 1\n\n# Title 1\n") == {"title-1", "title-1-1"}  # pingcap's case


def test_broken_links_are_found(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "target.md").write_text(
        "# Target\n\n## The `--flag` and *more*\n\n```bash\n# not a heading\n```\n\nSetext\n------\n")
    source = tmp_path / "docs" / "page.md"
    source.write_text(
        "[ok](target.md) [ok](target.md#the---flag-and-more) [ok](target.md#setext) [ok](#local)\n"
        "[ok](https://example.com/missing.md) ![ok](target.md 'a title')\n\n## Local\n\n"
        "[gone](missing.md) [bad](target.md#target-1) [code](target.md#not-a-heading)\n"
        "[here](#nowhere) [out](../../elsewhere.md) [ref]\n\n"
        "`[shown](as-code.md)`\n\n```markdown\n[shown](as-code-too.md)\n```\n\n"
        "[ref]: gone-too.md\n")
    assert broken(source, tmp_path) == [
        "missing.md: no such file",
        "target.md#target-1: no heading #target-1 in target.md",
        "target.md#not-a-heading: no heading #not-a-heading in target.md",
        "#nowhere: no heading #nowhere in page.md",
        "../../elsewhere.md: outside the repository",
        "gone-too.md: no such file",
    ]
