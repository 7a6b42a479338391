"""`python -m pipeline.cli`: a command run here, never in the warm service."""

import sys

from pipeline.cli import main
from pipeline.exiting import LONG_RUNNING, begin, leave

begin(sys.argv[1:])
status = main()
if not any(arg in LONG_RUNNING for arg in sys.argv[1:]):
    leave(status)  # as `gamebatch` ends: an interrupted run once died of its SIGINT here
sys.exit(status)
