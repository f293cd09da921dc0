"""The `sluice` command of an installed package: the native CLI shipped
inside it (sluice/bin/sluice, beside the library it links)."""

import os
import sys


def main():
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "sluice")
    # A worker's Python ops and datasets run in this interpreter, which has
    # this package (a `python3` on PATH may be another one, without it).
    os.environ.setdefault("SLUICE_PYTHON", sys.executable)
    os.execv(exe, [exe] + sys.argv[1:])
