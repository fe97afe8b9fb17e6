"""``python -m correlator`` runs the rankscope command line."""

from correlator.cli import entry

entry()
