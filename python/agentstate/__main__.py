"""``python -m agentstate``: the same command line as the ``agentstate`` console script."""

import shlex
import sys

from ._cli import main

main(program=f"{shlex.quote(sys.executable)} -m agentstate")
