"""deploy/kubernetes: every object checks against the Kubernetes API's
models, and the containers' command lines, run here with local hosts,
ports and paths, serve a job with TLS and a token and answer their probes."""

import os
import re
import signal
import socket
import subprocess
import urllib.request
from pathlib import Path

import numpy as np
import pytest

import sluice

yaml = pytest.importorskip("yaml")
client = pytest.importorskip("kubernetes.client")

MANIFESTS = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
MODELS = {("v1", "Service"): "V1Service", ("apps/v1", "StatefulSet"): "V1StatefulSet",
          ("apps/v1", "Deployment"): "V1Deployment",
          ("autoscaling/v2", "HorizontalPodAutoscaler"): "V2HorizontalPodAutoscaler"}


def _objects():
    for path in sorted(MANIFESTS.glob("*.yaml")):
        for obj in yaml.safe_load_all(path.read_text()):
            if obj:
                yield path.name, obj


def _check(value, kind, where):
    """Checks `value` against the client's type `kind` ("V1PodSpec",
    "List[V1Container]", "Dict[str, str]", "str", ...): unknown fields, wrong
    types and missing required fields raise, naming where."""
    if kind.lower().startswith("list["):  # "List[V1Container]"
        assert isinstance(value, list), f"{where}: a list expected"
        for i, item in enumerate(value):
            _check(item, kind[5:-1], f"{where}[{i}]")
        return
    if kind.lower().startswith(("dict[", "dict(")):  # "Dict[str, str]"
        assert isinstance(value, dict), f"{where}: a map expected"
        inner = kind[5:-1].split(", ", 1)[1]
        for key, item in value.items():
            _check(item, inner, f"{where}.{key}")
        return
    simple = {"str": str, "int": int, "bool": bool, "float": (int, float), "object": object}
    if kind in simple:
        assert isinstance(value, simple[kind]), f"{where}: {kind} expected, got {value!r}"
        return
    model = getattr(client, kind)
    assert isinstance(value, dict), f"{where}: an object ({kind}) expected"
    by_json = {json: attr for attr, json in model.attribute_map.items()}
    unknown = set(value) - set(by_json)
    assert not unknown, f"{where}: {kind} has no field(s) {sorted(unknown)}"
    for json, item in value.items():
        _check(item, model.openapi_types[by_json[json]], f"{where}.{json}")
    # The model's constructor refuses a missing required field.
    try:
        model(**{by_json[json]: item for json, item in value.items()})
    except ValueError as e:
        raise AssertionError(f"{where}: {e}") from None


def test_every_manifest_object_checks_against_the_kubernetes_models():
    seen = set()
    for name, obj in _objects():
        key = (obj.get("apiVersion"), obj.get("kind"))
        assert key in MODELS, f"{name}: no model for {key}"
        _check(obj, MODELS[key], f"{name}:{obj['kind']}/{obj['metadata']['name']}")
        seen.add(obj["kind"])
    assert {"Service", "StatefulSet", "Deployment", "HorizontalPodAutoscaler"} <= seen


def test_the_checker_refuses_what_kubernetes_would():
    bad = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"},
           "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "c", "imagee": "typo"}]}}}}
    with pytest.raises(AssertionError, match="no field.*imagee"):
        _check(bad, "V1Deployment", "bad")
    bad["spec"]["template"]["spec"]["containers"][0] = {"image": "no name"}
    with pytest.raises(AssertionError, match="name"):
        _check(bad, "V1Deployment", "bad")


def _container(kind):
    for _, obj in _objects():
        if obj["kind"] == kind:
            return obj["spec"]["template"]["spec"]["containers"][0]
    raise AssertionError(kind)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _local(args, swaps):
    """The container's args with its hosts, ports and paths swapped."""
    out = []
    for arg in args:
        for pattern, local in swaps:
            arg = re.sub(pattern, local, arg)
        out.append(arg)
    return out


def _certificates(d):
    """A CA and a certificate it signs for 127.0.0.1, as the Secret's keys."""
    subprocess.run(
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=ca 2>/dev/null && "
        "openssl req -newkey rsa:2048 -nodes -keyout tls.key -out tls.csr -subj /CN=127.0.0.1 2>/dev/null && "
        "printf 'subjectAltName=IP:127.0.0.1' > san.ext && openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key "
        "-CAcreateserial -out tls.crt -days 2 -extfile san.ext 2>/dev/null",
        shell=True, check=True, cwd=d)
    (d / "token").write_text("a-shared-secret\n")


def _probe_as_the_kubelet_does(container, local_ports):
    """Runs the container's readiness and liveness probes as the kubelet
    would, against its process here: an httpGet is a plain HTTP GET that
    must answer 200-399 (the kubelet's gRPC probe would be plaintext, which
    a TLS port refuses)."""
    for which in ("readinessProbe", "livenessProbe"):
        probe = container[which]
        assert set(probe) & {"httpGet", "grpc", "tcpSocket", "exec"} == {"httpGet"}, (which, probe)
        get = probe["httpGet"]
        port = local_ports[get["port"]] if isinstance(get["port"], str) else get["port"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{get.get('path', '/')}", timeout=10) as reply:
            assert 200 <= reply.status < 400, (which, reply.status)


def test_the_manifests_command_lines_serve_a_job(tmp_path):
    secret = tmp_path / "etc-sluice"
    secret.mkdir()
    _certificates(secret)
    grpc_port = _free_port()
    swaps = [(r"^--host=0\.0\.0\.0$", "--host=127.0.0.1"), (r"^--port=7070$", f"--port={grpc_port}"),
             (r"^--port=7071$", "--port=0"), (r"^--metrics-port=\d+$", "--metrics-port=0"),
             (r"^--work-dir=/journal$", f"--work-dir={tmp_path / 'journal'}"), (r"/etc/sluice", str(secret)),
             (r"sluice-dispatcher:7070", f"127.0.0.1:{grpc_port}"), (r"\$\(POD_IP\)", "127.0.0.1"),
             (r"^--threads=\d+$", "--threads=1")]
    processes = []
    try:
        for kind in ("StatefulSet", "Deployment"):
            c = _container(kind)
            assert c["command"] == ["sluice"]
            process = subprocess.Popen(["sluice", *_local(c["args"], swaps)], stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True)
            processes.append(process)
            line = process.stdout.readline()
            assert "listening on port" in line, (line, process.stderr.read() if process.poll() is not None else "")
            metrics = re.fullmatch(r"metrics on port (\d+)\n", process.stdout.readline())
            assert metrics, "the manifests serve metrics"
            _probe_as_the_kubelet_does(c, {"metrics": int(metrics.group(1))})
        pipe = (sluice.arrays({"id": np.arange(500, dtype=np.int64)}, split_records=50)
                .distribute(f"127.0.0.1:{grpc_port}", token_file=str(secret / "token"),
                            tls_ca_file=str(secret / "ca.crt"), connect_timeout_s=30)
                .batch(25))
        assert sorted(int(i) for b in pipe for i in b["id"]) == list(range(500))
    finally:
        for process in reversed(processes):
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)
