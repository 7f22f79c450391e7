"""The version of the mibspec package (the project metadata repeats it)."""

__version__ = "0.1.0"
