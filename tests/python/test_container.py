"""The image's root filesystem, built by the Containerfile's own step
(deploy/container/install.sh) on a fresh Debian 12 by
scripts/container_rootfs.sh, runs sluice as the image does: as the non-root
user `sluice`, the command (`sluice worker --help`, a W2 pipeline on
CIFAR-10 TFRecords it writes), and Python (`import sluice` beside pyarrow, a
pipeline's values checked with numpy). The wheel is the manylinux one
where it was built, as the Containerfile takes, else the Debian 12 build's.
Skips, saying why, without root or debootstrap."""

import glob
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

if os.geteuid() != 0:
    pytest.skip("building a root filesystem needs root (debootstrap, chroot)", allow_module_level=True)
if shutil.which("debootstrap") is None:
    pytest.skip("debootstrap is not installed (scripts/install_deps.sh installs it)", allow_module_level=True)
CHROOT = shutil.which("chroot") or "/usr/sbin/chroot"


def image_wheel():
    """The wheel the Containerfile takes: the manylinux one where it was built
    (`make manylinux`), else this checkout's Debian 12 build's."""
    manylinux = sorted(glob.glob(os.path.join(ROOT, "dist", "manylinux", "sluice-*-cp311-*manylinux*.whl")))
    if manylinux:
        return manylinux[-1]
    out = subprocess.run([os.path.join(ROOT, "scripts", "build_wheel.sh")], check=True, capture_output=True,
                         text=True).stdout
    return out.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def rootfs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("container")
    wheel = image_wheel()
    path = str(tmp / "rootfs")
    subprocess.run([os.path.join(ROOT, "scripts", "container_rootfs.sh"), path, wheel], check=True, timeout=1200)
    subprocess.run(["mount", "-t", "proc", "proc", os.path.join(path, "proc")], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", os.path.join(path, "proc")], check=False)


def as_user(rootfs, *command, timeout=300):
    """`command` in the root filesystem as the image's user (uid 10001),
    with the environment a container gets."""
    env = {"HOME": "/home/sluice", "PATH": "/opt/sluice/bin:/usr/local/bin:/usr/bin:/bin"}
    return subprocess.run([CHROOT, "--userspec=10001:10001", rootfs, *command], env=env, capture_output=True,
                          text=True, timeout=timeout, cwd="/")


def test_the_image_runs_sluice_worker_help_as_its_non_root_user(rootfs):
    r = as_user(rootfs, "sh", "-c", "id -u && sluice worker --help")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "10001"
    assert "--dispatcher" in r.stdout


def test_the_image_runs_a_pipeline_as_its_non_root_user(rootfs):
    spec = json.load(open(os.path.join(ROOT, "pipelines", "w2_cifar10.json")))
    with open(os.path.join(rootfs, "home", "sluice", "w2.json"), "w") as f:
        json.dump(spec, f)
    r = as_user(rootfs, "sh", "-c",
                "cd /home/sluice && sluice make-data cifar10 --out data/cifar10 --count 4096 "
                "&& sluice run w2.json --epochs 2 --json --quiet")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["samples"] == 2 * 4 * 1024  # 4 batches of 1024 each epoch (the partial one dropped)


def test_the_images_python_imports_sluice_beside_pyarrow(rootfs):
    script = ("import numpy as np, pyarrow, sluice\n"
              "from sluice import ops\n"
              "x = np.arange(24, dtype=np.float32).reshape(6, 4)\n"
              "pipe = sluice.arrays({'image': x}).map(ops.rescale(scale=0.5)).batch(3)\n"
              "got = np.concatenate([b['image'] for b in pipe])\n"
              "print(pyarrow.__version__, got.sum())\n")
    r = as_user(rootfs, "python3", "-c", script)
    assert r.returncode == 0, r.stderr
    pyarrow_version, total = r.stdout.split()
    assert pyarrow_version.startswith("26.")
    assert float(total) == pytest.approx(np.arange(24).sum() * 0.5)
