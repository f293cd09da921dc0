"""Fixtures: small datasets written by the `sluice` command in the real formats."""

import subprocess

import pytest


@pytest.fixture(scope="session")
def mnist_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("mnist")
    subprocess.run(["sluice", "make-data", "mnist", "--out", str(out), "--count", "600"],
                   check=True, capture_output=True)
    return out / "MNIST" / "raw"


@pytest.fixture(scope="session")
def cifar_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("cifar")
    subprocess.run(["sluice", "make-data", "cifar10", "--out", str(out), "--count", "300",
                    "--files", "3"], check=True, capture_output=True)
    return out


def start_server(args, **popen):
    """Starts `sluice ARGS` (a dispatcher or worker) and returns (process,
    port) once it listens; `popen` goes to Popen (env, cwd)."""
    process = subprocess.Popen(["sluice", *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               **popen)
    line = process.stdout.readline()
    assert "listening on port" in line, line
    return process, int(line.split()[-1])
