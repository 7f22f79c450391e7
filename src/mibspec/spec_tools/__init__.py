"""Tools over the spec itself.

* :mod:`.conformance` and :mod:`.conformance_run`: running the conformance suite
  (``mibspec conformance``);
* :mod:`.coverage`: which rule checks which numbered requirement (``mibspec rules --coverage``);
* :mod:`.migrate`: moving documents to the current spec version (``mibspec migrate``);
* :mod:`.citation`: how to cite the spec (``mibspec cite``).

Nothing is imported with the package: each command imports the module it runs.
"""

__all__: list[str] = []
