"""Build the ``--py-files`` zip for spark-submit: jobs/, assigners/, schemas/ (sources only)."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

PACKAGES = ("jobs", "assigners", "schemas")
ROOT = Path(__file__).resolve().parent.parent


def build_zip(out: str | Path) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for package in PACKAGES:
            for path in sorted((ROOT / package).rglob("*.py")):
                archive.write(path, path.relative_to(ROOT).as_posix())
    return out


if __name__ == "__main__":
    print(build_zip(sys.argv[1] if len(sys.argv) > 1 else "dist/partition_planner.zip"))
