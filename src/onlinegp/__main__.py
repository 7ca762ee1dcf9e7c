"""``python -m onlinegp`` runs the command-line interface (or says which extra to install)."""

from .experiments.entry import main

main()
