"""The image, built by podman from deploy/container/Containerfile where it
runs, and its root filesystem built by the Containerfile's own step
(deploy/container/install.sh) on a fresh Debian 12 by
scripts/container_rootfs.sh, each run sluice as the image does: as the non-root
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


def debootstrapped(tmp):
    """The image's root filesystem made by scripts/container_rootfs.sh."""
    path = str(tmp / "rootfs")
    subprocess.run([os.path.join(ROOT, "scripts", "container_rootfs.sh"), path, image_wheel()], check=True,
                   timeout=1200)
    yield path


# No registry is reachable here, so the Containerfile's base, debian:12-slim,
# is Debian 12 minbase made by debootstrap and imported under that name; the
# build reaches Debian's mirror and PyPI as a user's does. This machine lets
# no OCI runtime run (crun may not set rlimits), so podman builds with
# chroot isolation and the tests run in a container's mounted filesystem.
BASE_IMAGE = "docker.io/library/debian:12-slim"
HOST_CA = "/etc/ssl/certs/ca-certificates.crt"


def podman(*args, timeout=900):
    r = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"podman {args[0]}: {r.stderr[-3000:]}"
    return r.stdout.strip()


def import_base_image(tmp):
    if subprocess.run(["podman", "image", "exists", BASE_IMAGE]).returncode == 0:
        return
    mirror = subprocess.run(["bash", "-c", "source scripts/lib/debian_mirror.sh && debian_mirror"], cwd=ROOT,
                            check=True, capture_output=True, text=True).stdout.strip()
    base = str(tmp / "debian12")
    subprocess.run(["debootstrap", "--variant=minbase", "bookworm", base, mirror], check=True, capture_output=True,
                   timeout=1200)
    tar = subprocess.Popen(["tar", "-C", base, "-c", "."], stdout=subprocess.PIPE)
    subprocess.run(["podman", "import", "-", BASE_IMAGE], stdin=tar.stdout, check=True, capture_output=True)
    assert tar.wait() == 0


def built_by_podman(tmp):
    """The image podman builds from deploy/container/Containerfile: a
    container of it, its file system mounted."""
    if shutil.which("podman") is None:
        pytest.skip("no container builder (podman) here: the debootstrapped root stands in for it")
    import_base_image(tmp)
    context = tmp / "context"
    shutil.copytree(os.path.join(ROOT, "deploy", "container"), context / "deploy" / "container")
    os.makedirs(context / "wheels")
    shutil.copy(image_wheel(), context / "wheels")
    import sluice

    tag = f"localhost/sluice-test:{sluice.__version__}"
    # The host's CA bundle, for pip behind a TLS-inspecting proxy as here.
    podman("build", "--isolation=chroot", "--network=host", "--pull=never", "-v", f"{HOST_CA}:/run/host-ca.crt:ro",
           "--build-arg", "WHEELS=wheels", "--build-arg", "PIP_OPTIONS=--cert /run/host-ca.crt",
           "-f", str(context / "deploy" / "container" / "Containerfile"), "-t", tag, str(context), timeout=1800)
    assert podman("image", "inspect", "--format", "{{.Config.User}}", tag) == "10001"
    container = podman("create", tag)
    try:
        yield podman("mount", container)
    finally:
        podman("umount", container)
        podman("rm", container)
        podman("rmi", tag)


@pytest.fixture(scope="module", params=["debootstrap", "podman"])
def rootfs(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(request.param)
    make = debootstrapped if request.param == "debootstrap" else built_by_podman
    for path in make(tmp):
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

