"""Reference scoring: run a method on a model and a dataset and write a complete report.

One module per track; ``mibspec score <track>`` is a thin wrapper over each.
"""
