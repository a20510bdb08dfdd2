"""``python -m agentstate``: the same command line as the ``agentstate`` console script."""

from ._cli import main

main()
