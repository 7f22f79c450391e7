"""Developer-only code of the mibspec repository, not shipped in the wheel.

* :mod:`.training`: the tokenizers and deterministic training of the tiny models under
  ``examples/models/``;
* :mod:`.compare_trees`: comparing a generated folder with a fresh build (the ``--check`` of
  ``examples/build_examples.py`` and ``conformance/build_cases.py``).

The test suite finds it through ``pythonpath`` in pyproject's pytest options; the scripts
under ``examples/`` and ``conformance/`` put ``devtools/`` on ``sys.path`` themselves.
"""
