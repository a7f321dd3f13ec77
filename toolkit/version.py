"""The toolkit's version: the package's (pyproject.toml reads it from here), recorded in checkpoints and
results."""

__version__ = "0.1.0"
