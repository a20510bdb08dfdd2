"""The ``agentstate`` console script: the Rust command line inside the extension module, so
installing this package brings the whole product (the spill daemon, the server, the demo,
the operator's commands) without a second binary."""

from __future__ import annotations

import signal
import sys
from typing import Optional, Sequence


def main(argv: Optional[Sequence[str]] = None, program: Optional[str] = None) -> None:
    """Runs ``agentstate`` with ``argv`` (default: this process' arguments) and exits with
    its code. ``program`` is how a shell runs this command again (default: the console
    script's path), which the demo prints in its hints."""
    from ._agentstate import run_cli

    # Behave as the native binary does: Ctrl-C and SIGTERM reach the command's own handlers
    # (the daemon drains and commits) or end it, and a closed pipe ends it quietly.
    for name in ("SIGINT", "SIGPIPE"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    args = list(sys.argv[1:] if argv is None else argv)
    sys.stdout.flush()
    sys.exit(run_cli([program or sys.argv[0] or "agentstate", *args]))
