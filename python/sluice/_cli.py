"""The `sluice` command of an installed package: the native CLI shipped
inside it (sluice/bin/sluice, beside the library it links)."""

import os
import sys


def main():
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "sluice")
    os.execv(exe, [exe] + sys.argv[1:])
