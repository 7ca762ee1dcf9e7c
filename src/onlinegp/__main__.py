"""``python -m onlinegp`` runs the command-line interface."""

from .cli import app

app()
