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
