"""One version everywhere: CMakeLists.txt's project() is the source, and the
package's metadata, `sluice.__version__` (the loaded libsluice) and
`sluice --version` (the installed command) all say it."""

import importlib.metadata
import pathlib
import re
import subprocess
import sys

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


def test_a_fresh_interpreter_imports_sluice_then_hashlib_and_ssl():
    # pyarrow's Arrow libraries, which libsluice links, carry a copy of
    # OpenSSL's symbols: the system's libcrypto must win, or hashlib,
    # loading after sluice, crashes the process.
    code = "import sluice, hashlib, ssl; print(hashlib.sha256(b'sluice').hexdigest()[:8], ssl.OPENSSL_VERSION)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("0f5aec3c")


def test_the_kubernetes_manifests_run_the_image_of_the_project_version():
    version = project_version()
    tags = [m.group(1) for path in sorted((ROOT / "deploy" / "kubernetes").glob("*.yaml"))
            for m in re.finditer(r"image:\s*\S+/sluice:(\S+)", path.read_text())]
    assert tags and set(tags) == {version}, tags
