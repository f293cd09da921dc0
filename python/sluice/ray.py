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

import collections
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


def _worker_environment():
    """The actor's environment, with its interpreter and import path for the
    worker's Python ops and datasets unless set (the native binary, started
    bare, ran them under the `python3` on PATH, which may lack sluice)."""
    env = dict(os.environ)
    env.setdefault("SLUICE_PYTHON", sys.executable)
    env.setdefault("SLUICE_PYTHONPATH", os.pathsep.join(p for p in sys.path if p))
    return env


class _Worker:
    """A Ray actor that lives and dies with one `sluice worker` process."""

    def __init__(self, args, host, niceness):
        # Clients dial what the worker advertises: its node's IP when it
        # listens on every interface.
        advertise = ray.util.get_node_ip_address() if host in ("0.0.0.0", "::") else host
        self._stopping = False
        self._niceness = self._set_niceness(niceness)
        self._address, self._metrics_port, self._error, self._process = None, None, None, None
        self._log_tail = collections.deque(maxlen=20)
        try:
            self._process = subprocess.Popen(
                [_BINARY, "worker", *args, "--host", host, "--advertise", advertise, "--exit-with", str(os.getpid())],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_worker_environment())
        except OSError as e:  # not installed on this node
            self._fail(f"cannot run {_BINARY}: {e}")
            return
        # Both pipes are read for the worker's whole life: a full pipe would
        # block it.
        log = threading.Thread(target=self._forward, args=(self._process.stderr, True), daemon=True)
        log.start()
        port = None
        for line in self._process.stdout:
            if line.startswith("worker listening on port"):
                port = int(line.split()[-1])
            elif line.startswith("metrics on port"):
                self._metrics_port = int(line.split()[-1])
            else:
                sys.stdout.write(line)  # a plugin's own words
            if port is not None and (self._metrics_port is not None or "--metrics-port" not in args):
                break
        if port is None:
            code = self._process.wait()
            log.join()
            self._fail(f"sluice worker exited with status {code} before listening: {''.join(self._log_tail).strip()}")
            return
        self._address = f"[{advertise}]:{port}" if ":" in advertise else f"{advertise}:{port}"
        threading.Thread(target=self._forward, args=(self._process.stdout, False), daemon=True).start()
        threading.Thread(target=self._watch, daemon=True).start()

    def _fail(self, error):
        """A worker that cannot start. A restarted actor exits, for Ray to
        try again (the node may be short of something for a while); a new
        one says why through info(), which start_workers raises: an actor
        whose creation raised would be dead for good, and Ray would print
        its traceback around the worker's words."""
        if ray.get_runtime_context().was_current_actor_reconstructed:
            sys.stderr.write(f"{error}; the actor exits for Ray to restart it\n")
            sys.stderr.flush()
            os._exit(1)
        self._error = error

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

    def _forward(self, pipe, is_log):
        out = sys.stderr if is_log else sys.stdout
        for line in pipe:
            if is_log:
                self._log_tail.append(line)
            out.write(line)
            out.flush()

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
        return {"address": self._address, "pid": self._process.pid if self._process else None,
                "metrics_port": self._metrics_port, "node_id": ray.get_runtime_context().get_node_id(),
                "niceness": self._niceness, "error": self._error}

    def stop(self, drain_timeout_s):
        """SIGTERM: the worker finishes the splits in hand, then exits; its exit status."""
        self._stopping = True
        if self._process is None or self._process.poll() is not None:
            return None if self._process is None else self._process.returncode
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
    status (sluice.dispatcher_status): `current` plus the most workers any
    job (or the job named) needs by the autoscaling signal beyond those
    that serve it now, within [min_workers, max_workers]. The signal never
    asks for fewer workers than serve a job, so this shrinks the group only
    to max_workers: scale down with scale()."""
    jobs = [j for j in status.get("jobs", []) if job_name is None or j.get("job_name") == job_name]
    missing = max((int(j.get("workers_needed", 0)) - int(j.get("workers", 0)) for j in jobs), default=0)
    wanted = max(current + max(missing, 0), min_workers)
    return wanted if max_workers is None else min(wanted, max_workers)


class WorkerGroup:
    """sluice workers running as Ray actors for one dispatcher. Its methods
    may be called from several threads (one autoscaling, say)."""

    def __init__(self, dispatcher, args, host, niceness, resources, max_restarts, drain_timeout_s,
                 start_timeout_s, credentials):
        self._dispatcher = dispatcher
        self._args = args
        self._host = host
        self._niceness = niceness
        self._resources = resources
        self._drain_timeout_s = drain_timeout_s
        self._start_timeout_s = start_timeout_s
        self._credentials = credentials
        self._actor_class = ray.remote(_Worker).options(**_actor_options(resources, max_restarts))
        self._actors = []
        self._requested = False  # whether autoscale asked Ray's autoscaler for resources
        self._lock = threading.RLock()

    def __len__(self):
        return len(self._actors)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    @property
    def actors(self):
        """The Ray actor handles, oldest first (ray.kill one to test a fault)."""
        with self._lock:
            return list(self._actors)

    def workers(self, timeout_s=60):
        """Each worker's info: address, pid, node_id, niceness,
        metrics_port, and "error": why it did not start, or that its actor
        is dead or did not answer within `timeout_s` (Ray restarting it)."""
        infos = []
        for ref in [a.info.remote() for a in self.actors]:
            try:
                infos.append(ray.get(ref, timeout=timeout_s))
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as e:
                infos.append({"address": None, "pid": None, "metrics_port": None, "node_id": None,
                              "niceness": None, "error": f"its actor does not answer: {e}"})
        return infos

    def scale(self, n):
        """Starts or stops workers until the group has `n`; stopping drains
        the newest ones (they finish the splits in hand). Workers that do
        not all start raise SluiceError, and none of them stays."""
        if n < 0:
            raise ValueError(f"scale: n must be >= 0, got {n}")
        with self._lock:
            if n > len(self._actors):
                self._actors += self._start(n - len(self._actors))
            if n < len(self._actors):
                stopping, self._actors = self._actors[n:], self._actors[:n]
                self._stop(stopping)

    def autoscale(self, *, job_name=None, min_workers=1, max_workers=None, token_file=None):
        """One step of autoscaling on the dispatcher's signal: asks Ray's
        autoscaler for the resources of as many workers as the jobs need
        (ray.autoscaler.sdk.request_resources: on a cluster with an
        autoscaler, nodes come up for them; the request replaces any earlier
        one, this group's or another's), then scales the group to that
        number (see workers_wanted). Returns the group's new size. A
        dispatcher with --callers shows a job only to its tenant and to
        admins: give `token_file` of one (default: the workers' token)."""
        from ray.autoscaler.sdk import request_resources

        credentials = dict(self._credentials, **({"token_file": token_file} if token_file else {}))
        status = dispatcher_status(self._dispatcher, **credentials)
        with self._lock:
            n = workers_wanted(status, len(self._actors), job_name=job_name, min_workers=min_workers,
                               max_workers=max_workers)
            request_resources(bundles=[dict(self._resources)] * n)
            self._requested = True
            self.scale(n)
            return n

    def stop(self, drain_timeout_s=None):
        """Drains and stops every worker, side by side, then their actors;
        withdraws autoscale's request for resources."""
        with self._lock:
            stopping, self._actors = self._actors, []
            if not ray.is_initialized():  # ray.shutdown() ended the actors and their workers
                self._requested = False
                return
            self._stop(stopping, drain_timeout_s)
            if self._requested:
                from ray.autoscaler.sdk import request_resources

                request_resources(bundles=[])
                self._requested = False

    def _start(self, n):
        started = [self._actor_class.remote(self._args, self._host, self._niceness) for _ in range(n)]
        try:
            infos = ray.get([a.info.remote() for a in started], timeout=self._start_timeout_s)
            error = next((info["error"] for info in infos if info["error"]), None)
        except ray.exceptions.GetTimeoutError:
            error = (f"not all {n} started within {self._start_timeout_s} s: does the cluster have "
                     f"{self._resources} free for each?")
        except ray.exceptions.RayActorError as e:
            error = str(e)
        if error is not None:
            for a in started:
                ray.kill(a, no_restart=True)
            raise SluiceError(f"a sluice worker for dispatcher {self._dispatcher} did not start on Ray: {error}")
        return started

    def _stop(self, actors, drain_timeout_s=None):
        timeout = self._drain_timeout_s if drain_timeout_s is None else drain_timeout_s
        refs = [a.stop.remote(timeout) for a in actors]
        try:
            for ref in refs:
                try:
                    ray.get(ref, timeout=timeout + 15)
                except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                    pass  # dead, or restarting where it cannot be placed: nothing left to drain
        finally:
            for a in actors:
                ray.kill(a, no_restart=True)


def start_workers(n, dispatcher, *, resources=None, threads=None, niceness=0, host=None, insecure=False,
                  token_file=None, tls_cert_file=None, tls_key_file=None, tls_ca_file=None, metrics_port=None,
                  plugins=(), drain_timeout_s=30, start_timeout_s=300, max_restarts=-1):
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
    worker's Prometheus metrics on a free port (see workers()), on the
    address the worker listens on, without TLS or a token. Ray restarts a
    worker that dies, up to `max_restarts` times (-1: always). A worker that
    cannot start, or workers that are not all listening within
    `start_timeout_s` (Ray found no room for them), raise SluiceError."""
    resources = dict(resources or {"CPU": 1})
    if n < 0:
        raise ValueError(f"start_workers: n must be >= 0, got {n}")
    host = host or ("127.0.0.1" if _loopback(dispatcher) else "0.0.0.0")
    threads = threads if threads is not None else max(1, math.ceil(resources.get("CPU", 1)))
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
    group = WorkerGroup(dispatcher, args, host, niceness, resources, max_restarts, drain_timeout_s, start_timeout_s,
                        credentials)
    group.scale(n)
    return group
