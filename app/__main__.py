"""``python -m app`` runs the ``misstriage`` command line."""

from app.cli import main

main()
