"""The README is a front door: short, the two set-up commands first, and headline figures that each
name the date they were measured and the benchmark command that measured them (a script in bench/
and flags it takes), each one that docs/performance.md records: the front door quotes the
measurements, it does not make its own."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
PERFORMANCE = (ROOT / "docs" / "performance.md").read_text()
# a number with the unit written after it, if any: 1.86x, 0.64 ms, 9,456, -29%
FIGURE = re.compile(r"\d[\d,]*(?:\.\d+)?(?:-\d[\d,]*(?:\.\d+)?)?(?:x|%| ms| s| MB| min| core)?")


def test_the_readme_is_short_and_starts_with_the_two_commands() -> None:
    lines = README.splitlines()
    assert len(lines) < 200
    assert lines[:5] == ["# promscaler", "", "```bash", lines[3], lines[4]]
    assert lines[3].startswith("./scripts/demo.sh ") and lines[4].startswith("./scripts/test.sh ")
    assert lines[5] == "```"


def headline_rows() -> list[dict[str, str]]:
    """The rows of the table under "## The figures that matter", by column header."""
    section = README[README.index("## The figures that matter"):]
    section = section[:section.index("\n## ")]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    return [dict(zip(header, (cell.strip() for cell in line.strip("|").split("|")), strict=True))
            for line in lines[2:]]


def commands(cell: str) -> list[tuple[Path, list[str]]]:
    """Each `script.py --flag ...` of a command cell: the script in bench/ and its flags."""
    out = []
    for code in re.findall(r"`([^`]+)`", cell):
        script, *args = code.split()
        out.append((ROOT / "bench" / script, [a for a in args if a.startswith("--")]))
    return out


def test_every_headline_figure_names_its_date_and_command() -> None:
    rows = headline_rows()
    assert len(rows) >= 8
    for row in rows:
        command = next(v for k, v in row.items() if k.startswith("command"))
        assert re.fullmatch(r"20\d\d-\d\d-\d\d( / 20\d\d-\d\d-\d\d)*", row["measured"]), row
        found = commands(command)
        assert found, row
        for script, flags in found:
            assert script.is_file(), script
            source = script.read_text()
            assert all(f'"{flag}"' in source for flag in flags), (script.name, flags)


def test_every_headline_figure_is_recorded_in_performance_md() -> None:
    missing = []
    for row in headline_rows():
        for column in ("promscaler", "prometheus-adapter", "the HPA alone"):
            missing += [(row["what"], f) for f in FIGURE.findall(row[column])
                        if not re.search(rf"(?<![\d.,]){re.escape(f)}(?![\d,]|\.\d)", PERFORMANCE)]
    assert missing == []
