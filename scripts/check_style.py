#!/usr/bin/env python3
"""Fails when a C++ or CUDA file is not as clang-format writes it
(.clang-format), or when a function runs past MAX_LINES lines.

    scripts/check_style.py [ROOT]

Uses the clang-format and lizard pinned in scripts/python_env.sh (found on
PATH or beside this interpreter): another clang-format release formats a
few constructs differently. Names each file and function, with the fix.
"""

import os
import pathlib
import shutil
import subprocess
import sys

# Past this a function is split at its natural seams (docs/cpp.md).
MAX_LINES = 80
FOLDERS = ("src", "include", "python/src", "tests", "bench", "examples")
SUFFIXES = {".h", ".cc", ".cu", ".cuh"}


def tool(name):
    """`name` beside this Python (the project's .venv), else on PATH."""
    beside = pathlib.Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        sys.exit(f"check_style: {name} not found: run scripts/python_env.sh (it installs the pinned one into .venv)")
    return found


def sources(root):
    return sorted(str(p) for d in FOLDERS for p in (root / d).rglob("*")
                  if p.suffix in SUFFIXES and p.is_file() and "corpus" not in p.parts)


def format_violations(root, files):
    found = []
    for start in range(0, len(files), 100):
        out = subprocess.run([tool("clang-format"), "--dry-run", "--style=file", *files[start:start + 100]],
                             cwd=root, capture_output=True, text=True)
        for line in out.stderr.splitlines():
            if ": warning:" in line or ": error:" in line:
                path = line.split(":", 1)[0]
                entry = f"{os.path.relpath(path, root)}: not formatted (clang-format -i {os.path.relpath(path, root)})"
                if entry not in found:
                    found.append(entry)
    return found


def length_violations(root, files):
    out = subprocess.run([tool("lizard"), "-l", "cpp", "-l", "cuda", "-L", str(MAX_LINES), "-C", "100000",
                          "-a", "100", "-w", *files], cwd=root, capture_output=True, text=True)
    found = []
    for line in out.stdout.splitlines():
        if ": warning:" in line:
            where, what = line.split(": warning: ", 1)
            name, _, rest = what.partition(" has ")
            length = rest.split(" length")[0].rsplit(", ", 1)[-1]
            found.append(f"{os.path.relpath(where.rsplit(':', 1)[0], root)}:{where.rsplit(':', 1)[1]}: {name} is "
                         f"{length} lines (at most {MAX_LINES}: split it at its seams)")
    return found


def violations(root):
    root = pathlib.Path(root).resolve()
    files = sources(root)
    return format_violations(root, files) + length_violations(root, files)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent
    found = violations(root)
    for v in found:
        print(v)
    print(f"check_style: {len(found)} problem(s)" if found else "check_style: every file formatted, no function "
          f"over {MAX_LINES} lines")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
