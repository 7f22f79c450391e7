#!/usr/bin/env python3
"""Write the conformance cases of spec 1.2 under ``conformance/v1/``.

The cases are defined in the package ``builders`` beside this script, one module per
document kind (report cases: one module per track); this script is its command line.

Usage::

    python conformance/build_cases.py            # (re)write every case
    python conformance/build_cases.py --check    # exit 1 if the tree differs from a fresh build
                                                 # (floats within a relative 1e-9; --exact: bytes)
    python conformance/build_cases.py --list     # print the case ids

Running it twice on one machine gives the same bytes. Only the folders of the cases defined here
are rewritten; any other folder under ``v1/`` is left alone and listed on stderr.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "devtools"))  # mibspec_dev: not shipped

from builders import main

if __name__ == "__main__":
    sys.exit(main())
