"""The manylinux wheel (scripts/manylinux/build.sh writes it to
dist/manylinux/) on an older Linux than it was built for: a fresh Debian 11
root (glibc 2.31, none of the build's -dev packages) made by
scripts/manylinux/try_root.sh, the wheel in a fresh virtual environment
beside the CPU torch wheel and pyarrow. There: auditwheel's verdict, the
command on a reference pipeline, the service in dispatcher and worker
processes, and Python with sluice, pyarrow and torch in one process, values
checked with numpy; and the C++ package (the -dev archive beside the wheel)
building and running examples/cpp_trainer and examples/plugin_op there with
Debian 11's compiler. Skips, saying why, without root, debootstrap or a built
wheel (building it takes about half an hour: `make manylinux`)."""

import glob
import json
import os
import re
import shutil
import subprocess
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The root runs CPython 3.11 (scripts/manylinux/try_root.sh).
WHEELS = sorted(glob.glob(os.path.join(ROOT, "dist", "manylinux", "sluice-*-cp311-*manylinux*.whl")))
BUILD_ROOT = os.environ.get("SLUICE_MANYLINUX_ROOT", os.path.join(ROOT, "build", "manylinux-root"))

if os.geteuid() != 0:
    pytest.skip("a Debian 11 root needs root (debootstrap, chroot)", allow_module_level=True)
if shutil.which("debootstrap") is None:
    pytest.skip("debootstrap is not installed (scripts/install_deps.sh installs it)", allow_module_level=True)
if not WHEELS:
    pytest.skip("no manylinux wheel in dist/manylinux/ (`make manylinux` builds it, about half an hour)",
                allow_module_level=True)
CHROOT = shutil.which("chroot") or "/usr/sbin/chroot"
WHEEL = WHEELS[-1]
CUDA_WHEELS = sorted(glob.glob(os.path.join(ROOT, "dist", "manylinux", "sluice_cu13-*-cp311-*manylinux*.whl")))
CPYTHON_EXT = "cpython-311-x86_64-linux-gnu.so"
DEV_ARCHIVES = sorted(glob.glob(os.path.join(ROOT, "dist", "manylinux", "sluice-dev-*-manylinux*.tar.gz")))


@pytest.fixture(scope="module")
def debian11(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("manylinux") / "debian11")
    subprocess.run([os.path.join(ROOT, "scripts", "manylinux", "try_root.sh"), path, WHEEL, BUILD_ROOT],
                   check=True, timeout=1800)
    subprocess.run(["mount", "-t", "proc", "proc", os.path.join(path, "proc")], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", os.path.join(path, "proc")], check=False)


@pytest.fixture(scope="module")
def cuda_venv(debian11):
    """The CUDA wheel in a virtual environment of its own in the same root,
    with NVIDIA's runtime and nvJPEG wheels it depends on."""
    if not CUDA_WHEELS:
        pytest.skip("no CUDA wheel in dist/manylinux/ (`scripts/manylinux/build.sh --cuda` builds it)")
    wheel = CUDA_WHEELS[-1]
    shutil.copy(wheel, os.path.join(debian11, "wheels"))
    subprocess.run(["bash", "-c", 'source scripts/lib/manylinux_pip.sh && manylinux_download 3.11 "$@"', "bash",
                    os.path.join(debian11, "wheels"), wheel, "pytest"], cwd=ROOT, check=True, timeout=600)
    run(debian11, "sh", "-c", "/opt/python3.11/bin/python3 -m venv /venv-cu13 && /venv-cu13/bin/pip install -q "
        f"--no-index --find-links /wheels /wheels/{os.path.basename(wheel)} torch pytest", timeout=900)
    return "/venv-cu13"


def run(root, *command, timeout=300, venv="/venv"):
    """`command` in the Debian 11 root, a virtual environment first on PATH,
    in a clean environment."""
    env = {"HOME": "/root", "PATH": f"{venv}/bin:/usr/bin:/bin"}
    r = subprocess.run([CHROOT, root, *command], env=env, capture_output=True, text=True, timeout=timeout, cwd="/")
    assert r.returncode == 0, f"{command}: {r.stderr[-3000:]}"
    return r.stdout


def python(root, script, timeout=300, venv="/venv"):
    return run(root, f"{venv}/bin/python", "-c", textwrap.dedent(script), timeout=timeout, venv=venv)


def test_the_root_is_debian_11_with_glibc_2_31(debian11):
    assert run(debian11, "cat", "/etc/debian_version").startswith("11.")
    assert "2.31" in run(debian11, "ldd", "--version").splitlines()[0]


def test_auditwheel_finds_no_library_outside_the_policy_but_pyarrows(debian11):
    name = os.path.basename(WHEEL)
    tag = name.rsplit("-", 1)[1].removesuffix(".whl")
    assert tag.startswith("manylinux_2_") and int(tag.split("_")[2]) <= 31, tag
    report = json.loads(run(debian11, "/venv/bin/python", "-m", "auditwheel", "show", "--json", "/wheels/" + name))
    assert report["sym_tag"] == tag  # no symbol of a newer glibc or libstdc++
    # Outside the wheel and the policy's system libraries: only the Arrow
    # libraries of the pyarrow the wheel depends on.
    assert report["external_libs"], "auditwheel saw no Arrow: is the report what this test reads?"
    assert all(re.fullmatch(r"lib(arrow|arrow_s3|parquet)\.so\.\d+", lib) for lib in report["external_libs"]), \
        report["external_libs"]
    # Installed, every library the module and the command load resolves.
    installed = python(debian11, "import os, sluice; print(os.path.dirname(sluice.__file__))").strip()
    for elf in ("lib/libsluice.so.0.1", "bin/sluice", f"_sluice.{CPYTHON_EXT}"):
        ldd = run(debian11, "ldd", f"{installed}/{elf}")
        assert "not found" not in ldd, ldd


def test_the_command_runs_a_reference_pipeline(debian11):
    version = run(debian11, "sluice", "--version").split()[-1]
    assert os.path.basename(WHEEL).split("-")[1] == version
    spec = json.load(open(os.path.join(ROOT, "pipelines", "w2_cifar10.json")))
    os.makedirs(os.path.join(debian11, "work"), exist_ok=True)
    with open(os.path.join(debian11, "work", "w2.json"), "w") as f:
        json.dump(spec, f)
    out = run(debian11, "sh", "-c", "cd /work && sluice make-data cifar10 --out data/cifar10 --count 4096 "
              "&& sluice run w2.json --epochs 2 --json --quiet")
    result = json.loads(out.strip().splitlines()[-1])
    assert result["samples"] == 2 * 4 * 1024  # 4 batches of 1024 each epoch (the partial one dropped)


def test_sluice_pyarrow_and_torch_share_one_process(debian11):
    out = python(debian11, """
        import numpy as np, pyarrow as pa, pyarrow.parquet as pq, torch
        import sluice
        from sluice import ops
        from sluice.torch import TorchIterable

        ids = np.arange(500, dtype=np.int64)
        emb = np.random.default_rng(0).standard_normal((500, 3)).astype(np.float32)
        pq.write_table(pa.table({"id": ids, "emb": pa.FixedSizeListArray.from_arrays(pa.array(emb.ravel()), 3)}),
                       "/tmp/t.parquet", row_group_size=64)
        got = {int(i): e for b in sluice.parquet("/tmp/t.parquet").batch(50) for i, e in zip(b["id"], b["emb"])}
        assert sorted(got) == list(range(500))
        assert np.array_equal(np.stack([got[i] for i in range(500)]), emb)

        x = np.arange(24, dtype=np.float32).reshape(6, 4)
        pipe = sluice.arrays({"image": x}).map(ops.rescale(scale=0.5)).batch(3)
        batches = list(TorchIterable(pipe, rank=0, world_size=1, quiet=True))
        assert all(isinstance(b["image"], torch.Tensor) for b in batches)
        assert np.array_equal(torch.cat([b["image"] for b in batches]).numpy(), x * 0.5)
        print(pa.__version__, torch.__version__, sluice.__version__)
        """)
    pyarrow_version, torch_version, _ = out.split()
    assert pyarrow_version.startswith("26.") and torch_version.startswith("2.13")


def test_the_service_runs_in_dispatcher_and_worker_processes(debian11):
    out = python(debian11, """
        import signal, subprocess
        import numpy as np
        import sluice

        def start(*args):
            process = subprocess.Popen(["sluice", *args], stdout=subprocess.PIPE, text=True)
            line = process.stdout.readline()
            assert "listening on port" in line, line
            return process, int(line.split()[-1])

        dispatcher, port = start("dispatcher", "--host", "127.0.0.1", "--port", "0")
        address = f"127.0.0.1:{port}"
        worker, _ = start("worker", "--dispatcher", address, "--host", "127.0.0.1", "--threads", "2")
        try:
            pipe = (sluice.arrays({"id": np.arange(3000, dtype=np.int64)}, split_records=100)
                    .distribute(address, connect_timeout_s=30).batch(64))
            ids = sorted(int(i) for batch in pipe for i in batch["id"])
            assert ids == list(range(3000)), len(ids)
            print(len(ids))
        finally:
            for process in (worker, dispatcher):
                process.send_signal(signal.SIGTERM)
                assert process.wait(timeout=30) == 0
        """)
    assert out.split() == ["3000"]


@pytest.fixture(scope="module")
def dev_prefix(debian11):
    """The -dev archive unpacked in the root, with Debian 11's g++ and the
    cmake and ninja wheels: a C++ developer's machine without one of the
    build's libraries."""
    if not DEV_ARCHIVES:
        pytest.skip("no -dev archive in dist/manylinux/ (`make manylinux` builds it)")
    archive = DEV_ARCHIVES[-1]
    subprocess.run(["tar", "-C", os.path.join(debian11, "opt"), "-xzf", archive], check=True)
    subprocess.run(["bash", "-c", 'source scripts/lib/manylinux_pip.sh && manylinux_download 3.11 "$@"', "bash",
                    os.path.join(debian11, "wheels"), "cmake==3.31.10", "ninja"], cwd=ROOT, check=True, timeout=600)
    run(debian11, "sh", "-c", "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends g++ && "
        "/venv/bin/pip install -q --no-index --find-links /wheels cmake ninja", timeout=900)
    shutil.copytree(os.path.join(ROOT, "examples"), os.path.join(debian11, "src", "examples"), dirs_exist_ok=True)
    return "/opt/" + os.path.basename(archive).removesuffix(".tar.gz")


def build_example(root, prefix, name):
    """examples/NAME configured with only PREFIX to find sluice in."""
    build = f"/src/build/{name}"
    run(root, "cmake", "-S", f"/src/examples/{name}", "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
        f"-DCMAKE_PREFIX_PATH={prefix}", "-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF", timeout=300)
    run(root, "cmake", "--build", build, timeout=900)
    return build


def test_the_dev_archive_builds_a_cpp_trainer_that_trains_on_another_linux(debian11, dev_prefix):
    version = os.path.basename(WHEEL).split("-")[1]
    assert f"sluice-dev-{version}-" in dev_prefix  # one version: the wheel's and the archive's
    assert run(debian11, f"{dev_prefix}/bin/sluice", "--version").split()[-1] == version
    trainer = build_example(debian11, dev_prefix, "cpp_trainer") + "/cpp_trainer"
    # Every library it loads is the archive's, or glibc's and GCC's runtime.
    for line in run(debian11, "ldd", trainer).splitlines():
        assert "not found" not in line, line
        if "=>" in line and "/" in line:
            soname, path = line.split()[0], line.split("=>")[1].split()[0]
            assert path.startswith(dev_prefix + "/lib/") or re.match(r"lib(c|m|stdc\+\+|gcc_s|pthread|dl|rt)\.so",
                                                                        soname), line
    run(debian11, f"{dev_prefix}/bin/sluice", "make-data", "mnist", "--out", "/src/mnist", "--count", "3000")
    out = run(debian11, trainer, "--mnist", "/src/mnist", "--epochs", "2")
    assert re.search(r"epoch 1: 3000 samples", out), out
    # Its front on a local worker process: the archive's command, found beside its library.
    out = run(debian11, trainer, "--mnist", "/src/mnist", "--epochs", "1", "--workers", "1", timeout=600)
    assert re.search(r"epoch 0: 3000 samples", out), out


def test_the_dev_archive_builds_an_op_plugin_its_command_runs(debian11, dev_prefix):
    plugin = build_example(debian11, dev_prefix, "plugin_op") + "/libsluice_cutout.so"
    doc = run(debian11, f"{dev_prefix}/bin/sluice", "ops", "random_cutout", "--plugin", plugin)
    assert doc.startswith("random_cutout") and f"from {plugin}" in doc, doc
    run(debian11, f"{dev_prefix}/bin/sluice", "make-data", "mnist", "--out", "/src/cutout", "--count", "1000")
    spec = {"name": "cutout", "seed": 0, "nodes": [
        {"source": {"mnist": {"images": "/src/cutout/MNIST/raw/train-images-idx3-ubyte",
                              "labels": "/src/cutout/MNIST/raw/train-labels-idx1-ubyte"}}},
        {"map": {"ops": [{"op": "random_cutout", "attrs": {"size": [4, 4], "value": 255}}]}},
        {"batch": {"size": 100}}]}
    with open(os.path.join(debian11, "src", "cutout.json"), "w") as f:
        json.dump(spec, f)
    out = run(debian11, f"{dev_prefix}/bin/sluice", "run", "/src/cutout.json", "--epochs", "2", "--json", "--quiet",
              "--plugin", plugin)
    assert json.loads(out.strip().splitlines()[-1])["samples"] == 2000


def test_the_dev_archive_links_beside_a_system_abseil_of_the_same_soname(tmp_path):
    """On this host (Debian 12) the system's abseil has the archive's sonames
    (libabsl_*.so.20220623) in another namespace: the trainer must link and
    load the archive's alone."""
    system_absl = glob.glob("/usr/lib/x86_64-linux-gnu/libabsl_raw_hash_set.so.20220623")
    if not DEV_ARCHIVES or not system_absl:
        pytest.skip("needs the -dev archive and a system abseil 20220623 (Debian 12's libabsl20220623)")
    subprocess.run(["tar", "-C", str(tmp_path), "-xzf", DEV_ARCHIVES[-1]], check=True)
    prefix = str(tmp_path / os.path.basename(DEV_ARCHIVES[-1]).removesuffix(".tar.gz"))
    build = str(tmp_path / "trainer")
    subprocess.run(["cmake", "-S", os.path.join(ROOT, "examples", "cpp_trainer"), "-B", build,
                    "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_PREFIX_PATH={prefix}",
                    "-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF"], check=True, capture_output=True, timeout=300)
    r = subprocess.run(["cmake", "--build", build], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:]
    ldd = subprocess.run(["ldd", os.path.join(build, "cpp_trainer")], capture_output=True, text=True).stdout
    assert "libabsl" in ldd and "/usr/lib/x86_64-linux-gnu/libabsl" not in ldd, ldd
    subprocess.run([os.path.join(prefix, "bin", "sluice"), "make-data", "mnist", "--out", str(tmp_path / "mnist"),
                    "--count", "1000"], check=True, capture_output=True, timeout=300)
    out = subprocess.run([os.path.join(build, "cpp_trainer"), "--mnist", str(tmp_path / "mnist"), "--epochs", "1"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "epoch 0: 1000 samples" in out.stdout, out.stdout + out.stderr


def test_the_cuda_wheel_loads_nvidias_runtime_and_nvjpeg_from_their_wheels(debian11, cuda_venv):
    installed = python(debian11, "import os, sluice; print(os.path.dirname(sluice.__file__))", venv=cuda_venv).strip()
    ldd = run(debian11, "ldd", f"{installed}/lib/libsluice.so.0.1")
    for library in ("libcudart.so.13", "libnvjpeg.so.13"):
        line = next(line for line in ldd.splitlines() if library in line)
        found = os.path.normpath(line.split("=>")[1].split("(")[0].strip())
        assert found == f"/venv-cu13/lib/python3.11/site-packages/nvidia/cu13/lib/{library}", line
    out = python(debian11, """
        import numpy as np
        import sluice
        from sluice import ops
        backends = {o["name"]: o["backends"] for o in sluice._sluice.ops()}
        print(" ".join(sorted(name for name, b in backends.items() if "cuda" in b)))
        x = np.arange(24, dtype=np.float32).reshape(6, 4)
        got = np.concatenate([b["image"] for b in sluice.arrays({"image": x}).map(ops.rescale(scale=0.5)).batch(3)])
        assert np.array_equal(got, x * 0.5)
        try:
            list(sluice.arrays({"image": x}).map(ops.rescale(scale=0.5), device="cuda").batch(3))
            print("ran on a GPU")
        except sluice.SluiceError as e:
            print("error:", e)
        """, venv=cuda_venv)
    cuda_ops, outcome = out.splitlines()[0].split(), out.splitlines()[-1]
    assert {"rescale", "decode_image"} <= set(cuda_ops), cuda_ops
    if outcome != "ran on a GPU":  # this machine has no GPU: the error says so, naming CUDA
        assert "cuda" in outcome.lower(), outcome


def test_the_cuda_wheels_gpu_tests_skip_without_a_gpu(debian11, cuda_venv):
    shutil.copy(os.path.join(ROOT, "tests", "python", "test_torch_cuda.py"), os.path.join(debian11, "tmp"))
    r = subprocess.run([CHROOT, debian11, f"{cuda_venv}/bin/python", "-m", "pytest", "-q", "-rs",
                        "/tmp/test_torch_cuda.py"], env={"HOME": "/root", "PATH": f"{cuda_venv}/bin:/usr/bin:/bin"},
                       capture_output=True, text=True, timeout=300, cwd="/")
    if "passed" in r.stdout:  # a GPU is there: its tests ran
        assert r.returncode == 0, r.stdout[-3000:]
    else:
        assert "no CUDA device" in r.stdout, r.stdout[-3000:]
