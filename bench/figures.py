"""The bench table: every bench script records its headline figures here, one JSON line each, and ``make bench``
prints them as one table, each beside its goal; ``make bench-readme`` writes that table into the README.

A script records only when ``$BENCH_FIGURES`` names the file (``make bench`` sets it); run alone, it prints its
own report and records nothing. ``python bench/figures.py FILE [--readme README.md]`` prints the table of FILE
(and rewrites the README's block between the two ``bench-table`` markers).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from pathlib import Path

ENV = "BENCH_FIGURES"
START, END = "<!-- bench-table:start -->", "<!-- bench-table:end -->"


def record(figure: str, measured: str, goal: str = "", ok: bool | None = None) -> None:
    """Add one row to the table: what was measured, the figure as printed, its goal and whether it meets it."""
    path = os.environ.get(ENV)
    if not path:
        return
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps({"figure": figure, "measured": measured, "goal": goal, "ok": ok}) + "\n")


def table(rows: list[dict[str, object]]) -> str:
    """The rows as a markdown table, in the order they were recorded."""
    lines = ["| figure | measured | goal | |", "|---|---|---|---|"]
    for row in rows:
        verdict = {True: "ok", False: "**over**", None: ""}[row["ok"]]  # type: ignore[index]
        lines.append(f"| {row['figure']} | {row['measured']} | {row['goal'] or '-'} | {verdict} |")
    return "\n".join(lines)


def into_readme(readme: Path, block: str, day: dt.date) -> None:
    """Replace what lies between the README's two markers with ``block`` and the day it was measured."""
    if not readme.is_file():
        raise SystemExit(f"{readme}: no such file to write the table into")
    text = readme.read_text(encoding="utf-8")
    if START not in text or END not in text:
        raise SystemExit(f"{readme}: no {START} ... {END} block to write the table into")
    head, rest = text.split(START, 1)
    tail = rest.split(END, 1)[1]
    note = f"Measured by `make bench` on {day.isoformat()} (2 cores); `make bench-readme` measures and writes it again."
    written = readme.with_name(f".{readme.name}.bench")  # then renamed over it: never half-written
    written.write_text(f"{head}{START}\n{note}\n\n{block}\n{END}{tail}", encoding="utf-8")
    written.replace(readme)


def read_rows(path: Path) -> list[dict[str, object]]:
    """The figures recorded in ``path``, one JSON object a line."""
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SystemExit(f"{path}: line {number} is not a recorded figure ({exc.msg})") from None
        if not isinstance(row, dict) or set(row) != {"figure", "measured", "goal", "ok"}:
            raise SystemExit(f"{path}: line {number} is not a recorded figure (figure, measured, goal, ok)")
        rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("figures", help="the JSON lines the bench scripts recorded")
    parser.add_argument("--readme", help="also write the table into this README, between its bench-table markers")
    args = parser.parse_args()
    path = Path(args.figures)
    if not path.exists():
        print(f"figures: error: {path}: no figures recorded (run make bench)", file=sys.stderr)
        return 2
    try:
        rows = read_rows(path)
        block = table(rows)
        if args.readme:
            into_readme(Path(args.readme), block, dt.datetime.fromtimestamp(path.stat().st_mtime, dt.UTC).date())
    except SystemExit as exc:
        print(f"figures: error: {exc}", file=sys.stderr)
        return 2
    shown = f"\nthe bench table ({len(rows)} figures)\n{block}"
    try:
        print(shown + (f"\nwritten into {args.readme}" if args.readme else ""))
    except BrokenPipeError:  # a reader that stopped early (| head): quiet as in jobs.cli, but exit 0 (all was done)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's final flush must not fail again
    return 0


if __name__ == "__main__":
    sys.exit(main())
