"""Pages rendered from verified reports.

* :mod:`.html`: the self-contained HTML page of one report (``mibspec html``);
* :mod:`.figures`: its figures (matplotlib, optional);
* :mod:`.leaderboard`: a leaderboard over many reports (``mibspec leaderboard``).

Nothing is imported with the package: each command imports the module it runs.
"""

__all__: list[str] = []
