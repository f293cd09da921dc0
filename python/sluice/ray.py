"""sluice workers as Ray actors: Ray places, restarts and scales them, the
dispatcher hands them splits like any worker's.

    import ray
    import sluice.ray

    ray.init()                                       # or ray.init(address="auto")
    workers = sluice.ray.start_workers(4, "10.0.0.5:5000", resources={"CPU": 4})
    pipe = (...).distribute("10.0.0.5:5000", job_name="train").batch(256)
    for batch in pipe:
        ...
        workers.autoscale(job_name="train", max_workers=16)   # now and then
    workers.stop()

Each actor runs the `sluice worker` command of the installed package as its
child, which dies with the actor (`--exit-with`); a worker that exits makes
its actor exit, so Ray restarts both. A worker Ray restarts registers as a
new worker; the dispatcher runs the dead one's splits again, so every sample
still arrives exactly once. The nodes need this package installed (in their
image, or through a runtime_env), and the files named by token and TLS
arguments at the same paths.
"""

import ipaddress
import math
import os
import signal
import subprocess
import sys
import threading

import ray

from sluice import SluiceError
from sluice.service import dispatcher_status

_BINARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "sluice")


class _Worker:
    """A Ray actor that lives and dies with one `sluice worker` process."""

    def __init__(self, args, host, niceness):
        # Clients dial what the worker advertises: its node's IP when it
        # listens on every interface.
        advertise = ray.util.get_node_ip_address() if host == "0.0.0.0" else host
        self._stopping = False
        self._niceness = self._set_niceness(niceness)
        self._process = subprocess.Popen(
            [_BINARY, "worker", *args, "--host", host, "--advertise", advertise, "--exit-with", str(os.getpid())],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._address, self._metrics_port, self._error = None, None, None
        line = self._process.stdout.readline()
        if "listening on port" not in line:
            # Said by info(), not raised: Ray would retry and print the
            # creation task's traceback around the worker's own words.
            log = self._process.stderr.read().strip()
            self._error = f"sluice worker exited with status {self._process.wait()} before listening: {log}"
            return
        self._address = f"{advertise}:{int(line.split()[-1])}"
        if "--metrics-port" in args:
            self._metrics_port = int(self._process.stdout.readline().split()[-1])
        threading.Thread(target=self._forward_log, daemon=True).start()
        threading.Thread(target=self._watch, daemon=True).start()

    @staticmethod
    def _set_niceness(niceness):
        """Sets this thread's niceness, which the worker forked from it
        inherits (Linux's is per thread); returns what it is."""
        try:
            os.setpriority(os.PRIO_PROCESS, 0, niceness)
        except OSError as e:  # lowering it needs CAP_SYS_NICE or RLIMIT_NICE
            sys.stderr.write(f"sluice worker: cannot set niceness {niceness} ({e.strerror}): it runs at "
                             f"{os.getpriority(os.PRIO_PROCESS, 0)}\n")
        return os.getpriority(os.PRIO_PROCESS, 0)

    def _forward_log(self):
        for line in self._process.stderr:
            sys.stderr.write(line)
            sys.stderr.flush()

    def _watch(self):
        code = self._process.wait()
        if not self._stopping:
            sys.stderr.write(f"sluice worker {self._address} exited with status {code}: "
                             "its actor exits too, for Ray to restart both\n")
            sys.stderr.flush()
            os._exit(1)

    def info(self):
        """Where the worker listens, its pid, node, niceness and metrics
        port; or why it did not start ("error")."""
        return {"address": self._address, "pid": self._process.pid, "metrics_port": self._metrics_port,
                "node_id": ray.get_runtime_context().get_node_id(), "niceness": self._niceness,
                "error": self._error}

    def stop(self, drain_timeout_s):
        """SIGTERM: the worker finishes the splits in hand, then exits; its exit status."""
        self._stopping = True
        self._process.send_signal(signal.SIGTERM)
        try:
            return self._process.wait(timeout=drain_timeout_s + 10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            return self._process.wait()


def _loopback(address):
    host = address.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _actor_options(resources, max_restarts):
    options = {"max_restarts": max_restarts, "max_task_retries": 3, "resources": {}}
    for key, value in resources.items():
        if key == "CPU":
            options["num_cpus"] = value
        elif key == "GPU":
            options["num_gpus"] = value
        elif key == "memory":
            options["memory"] = value
        else:
            options["resources"][key] = value
    return options


def workers_wanted(status, current, *, job_name=None, min_workers=1, max_workers=None):
    """How many workers a group of `current` should have, from a dispatcher
    status (sluice.dispatcher_status): the most any job (or the job named)
    needs by the autoscaling signal, less the dispatcher's live workers
    outside the group, within [min_workers, max_workers]. Without a job to
    go by, the group stays as it is. The signal never asks for fewer workers
    than a job has: scale down with scale()."""
    jobs = [j for j in status.get("jobs", []) if job_name is None or j.get("job_name") == job_name]
    wanted = current
    if jobs:
        others = len(status.get("workers", [])) - current
        wanted = max(int(j.get("workers_needed", 0)) for j in jobs) - max(others, 0)
    wanted = max(wanted, min_workers)
    return wanted if max_workers is None else min(wanted, max_workers)


class WorkerGroup:
    """sluice workers running as Ray actors for one dispatcher."""

    def __init__(self, dispatcher, args, host, niceness, resources, max_restarts, drain_timeout_s, credentials):
        self._dispatcher = dispatcher
        self._args = args
        self._host = host
        self._niceness = niceness
        self._resources = resources
        self._drain_timeout_s = drain_timeout_s
        self._credentials = credentials
        self._actor_class = ray.remote(_Worker).options(**_actor_options(resources, max_restarts))
        self._actors = []

    def __len__(self):
        return len(self._actors)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    @property
    def actors(self):
        """The Ray actor handles, oldest first (ray.kill one to test a fault)."""
        return list(self._actors)

    def workers(self):
        """Each worker's info: address, pid, node_id, metrics_port. Waits for
        actors that Ray is restarting."""
        return ray.get([a.info.remote() for a in self._actors])

    def scale(self, n):
        """Starts or stops workers until the group has `n`; stopping drains
        the newest ones (they finish the splits in hand)."""
        if n < 0:
            raise ValueError(f"scale: n must be >= 0, got {n}")
        if n > len(self._actors):
            started = [self._actor_class.remote(self._args, self._host, self._niceness)
                       for _ in range(n - len(self._actors))]
            errors = [info["error"] for info in ray.get([a.info.remote() for a in started]) if info["error"]]
            if errors:
                for a in started:
                    ray.kill(a, no_restart=True)
                raise SluiceError(f"a sluice worker for dispatcher {self._dispatcher} did not start on Ray: "
                                  f"{errors[0]}")
            self._actors += started
        while len(self._actors) > n:
            self._stop(self._actors.pop())

    def autoscale(self, *, job_name=None, min_workers=1, max_workers=None):
        """One step of autoscaling on the dispatcher's signal: asks Ray's
        autoscaler for the resources of as many workers as the jobs need
        (ray.autoscaler.sdk.request_resources: on a cluster with an
        autoscaler, nodes come up for them), then scales the group to that
        number (see workers_wanted). Returns the group's new size."""
        from ray.autoscaler.sdk import request_resources

        status = dispatcher_status(self._dispatcher, **self._credentials)
        n = workers_wanted(status, len(self._actors), job_name=job_name, min_workers=min_workers,
                           max_workers=max_workers)
        request_resources(bundles=[dict(self._resources)] * n)
        self.scale(n)
        return n

    def stop(self, drain_timeout_s=None):
        """Drains and stops every worker, then their actors."""
        while self._actors:
            self._stop(self._actors.pop(), drain_timeout_s)

    def _stop(self, actor, drain_timeout_s=None):
        timeout = self._drain_timeout_s if drain_timeout_s is None else drain_timeout_s
        try:
            ray.get(actor.stop.remote(timeout))
        except ray.exceptions.RayActorError:
            pass  # it died on its own: nothing left to drain
        ray.kill(actor, no_restart=True)


def start_workers(n, dispatcher, *, resources=None, threads=None, niceness=0, host=None, insecure=False,
                  token_file=None, tls_cert_file=None, tls_key_file=None, tls_ca_file=None, metrics_port=None,
                  plugins=(), drain_timeout_s=30, max_restarts=-1):
    """Starts `n` sluice workers for the dispatcher at "host:port" as Ray
    actors on the cluster `ray.init()` joined; returns their WorkerGroup
    once all listen.

    `resources` are each actor's Ray resources ("CPU", "GPU", "memory" in
    bytes, or custom ones; default {"CPU": 1}); the worker computes with as
    many threads as its CPUs unless `threads` says. Workers listen on
    127.0.0.1 when the dispatcher is on loopback, else on every interface
    (`host` "0.0.0.0"), advertising their node's IP: that needs TLS and a
    token (`tls_cert_file`, `tls_key_file`, `tls_ca_file`, `token_file`), or
    `insecure=True` on a network you trust. `metrics_port` 0 serves each
    worker's Prometheus metrics on a free port (see workers()). Ray restarts
    a worker that dies, up to `max_restarts` times (-1: always). A worker
    that cannot start raises SluiceError with its error."""
    resources = dict(resources or {"CPU": 1})
    if n < 0:
        raise ValueError(f"start_workers: n must be >= 0, got {n}")
    host = host or ("127.0.0.1" if _loopback(dispatcher) else "0.0.0.0")
    threads = threads or max(1, math.ceil(resources.get("CPU", 1)))
    args = ["--dispatcher", dispatcher, "--threads", str(threads),
            "--drain-timeout", str(drain_timeout_s)]
    credentials = {"token_file": token_file, "tls_ca_file": tls_ca_file, "tls_cert_file": tls_cert_file,
                   "tls_key_file": tls_key_file}
    flags = {"--token-file": token_file, "--tls-ca": tls_ca_file, "--tls-cert": tls_cert_file,
             "--tls-key": tls_key_file, "--metrics-port": metrics_port}
    for flag, value in flags.items():
        if value is not None:
            args += [flag, str(value)]
    for plugin in plugins:
        args += ["--plugin", str(plugin)]
    if insecure:
        args.append("--insecure")
    group = WorkerGroup(dispatcher, args, host, niceness, resources, max_restarts, drain_timeout_s, credentials)
    group.scale(n)
    return group
