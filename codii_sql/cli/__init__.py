"""The ``codii-sql`` command line: click commands over the service, and their output."""

from .main import cli, main

__all__ = ["cli", "main"]
