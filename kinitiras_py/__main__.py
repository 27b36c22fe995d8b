"""``python -m kinitiras_py`` runs the command line."""

from kinitiras_py.cli.main import run

run()
