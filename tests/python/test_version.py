"""One version everywhere: CMakeLists.txt's project() is the source, and the
package's metadata, `sluice.__version__` (the loaded libsluice) and
`sluice --version` (the installed command) all say it."""

import importlib.metadata
import pathlib
import re
import subprocess

import sluice

ROOT = pathlib.Path(__file__).resolve().parents[2]


def project_version():
    text = (ROOT / "CMakeLists.txt").read_text()
    return re.search(r"project\(sluice VERSION ([0-9.]+)", text).group(1)


def test_the_package_library_and_command_say_the_project_version():
    version = project_version()
    assert importlib.metadata.version("sluice") == version
    assert sluice.__version__ == version
    out = subprocess.run(["sluice", "--version"], check=True, capture_output=True, text=True).stdout
    assert out.strip() == f"sluice {version}"
