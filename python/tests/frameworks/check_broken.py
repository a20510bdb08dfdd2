"""Checks a run of a framework's suite against a deliberately broken stand-in:

    python check_broken.py LABEL RECORD_DIR EXIT_CODE MIN_USED MIN_FAILED LOG

The run proves the swap is live only when
  * it ended in failed tests (exit code 1), not in a crash, a usage or collection error, an
    interruption or an empty selection (pytest's 2-5; the conformance runner's 2),
  * at least MIN_USED tests used the stand-in (``RECORD_DIR/used.txt``, written by the swap
    plugin or the conformance runner): the suite still reaches the adapter as widely as it
    was measured to, so coverage cannot shrink to a few tests and stay green,
  * at least MIN_FAILED tests failed (``RECORD_DIR/failed.txt``), and every failed test is
    one that used the stand-in: the failures come from the broken stand-in, not from
    something else that happens to break in the same run.

Prints one ``ok:`` line, or the reasons on stderr and exits 1.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List


def _ids(path: Path) -> List[str]:
    return [line for line in path.read_text().splitlines() if line.strip()]


def main(argv: List[str]) -> int:
    label, folder, code, min_used, min_failed, log = argv
    folder_path = Path(folder)
    problems = []
    if int(code) != 1:
        problems.append(f"the run exited with {code}, not 1 (failed tests): a crash or a collection error proves nothing")
    used_file, failed_file = folder_path / "used.txt", folder_path / "failed.txt"
    if not used_file.exists() or not failed_file.exists():
        problems.append(f"no record of the run in {folder} (used.txt / failed.txt): the harness did not finish")
        used, failed = [], []
    else:
        used, failed = _ids(used_file), _ids(failed_file)
    if len(used) < int(min_used):
        problems.append(f"only {len(used)} tests used the broken stand-in, fewer than the {min_used} measured")
    if len(failed) < int(min_failed):
        problems.append(f"only {len(failed)} tests failed, fewer than the {min_failed} measured")
    strangers = sorted(set(failed) - set(used))
    if strangers:
        shown = "\n  ".join(strangers[:20])
        problems.append(f"{len(strangers)} failed tests never used the stand-in (their failures come from elsewhere):\n  {shown}")
    if problems:
        for p in problems:
            print(f"error: {label}'s broken run: {p} (log {log})", file=sys.stderr)
        return 1
    print(f"ok: {label}'s suite rejects the broken stand-in: {len(failed)} of the {len(used)} tests "
          f"that used it failed (at least {min_failed} of {min_used} required), none other (log {log})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
