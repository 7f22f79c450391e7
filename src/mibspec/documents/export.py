"""Regenerate the schema files from the models: ``python -m mibspec.documents.export spec/v1/schemas``."""

from __future__ import annotations

import sys
from pathlib import Path

from . import schema_names, schema_text

USAGE = "usage: python -m mibspec.documents.export DIR  (write each kind's schema into DIR)"


def main(argv: list[str]) -> int:
    if argv in (["-h"], ["--help"]):
        print(USAGE)
        return 0
    if len(argv) != 1 or argv[0].startswith("-"):
        print(USAGE, file=sys.stderr)
        return 2
    target = Path(argv[0])
    target.mkdir(parents=True, exist_ok=True)
    for name in schema_names():
        path = target / f"{name}.schema.json"
        text = schema_text(name)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
