"""What the Python processes of `python` ops and Python datasets run: this
interpreter with this process's import path. Passed through the
environment, which the engine and its local worker processes inherit."""

import os
import sys


def export():
    os.environ["SLUICE_PYTHON"] = sys.executable
    os.environ["SLUICE_PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
