"""``python -m mibspec``: the command line.

The working directory, which ``python -m`` puts first on ``sys.path``, was dropped when the
package was imported (see ``mibspec/__init__.py``): nothing is imported from it.
"""

from mibspec.cli import main

main()
