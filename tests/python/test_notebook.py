"""sluice in a real Jupyter kernel (ipykernel, driven by jupyter_client as
a notebook front end drives it): cells define a transform object and a
dataset class, build a pipeline with ops.python and from_dataset, iterate
it through sluice.torch, are interrupted mid-iteration (the kernel's
interrupt, as the stop button sends it), and iterate again."""

import queue
import textwrap

import pytest
from jupyter_client.manager import start_new_kernel

_DEFINE = """
import numpy as np
import sluice, sluice.torch
from sluice import ops

class Halve:
    def __call__(self, sample):
        return {"x": sample["x"] // 2}

class Squares:
    def __len__(self):
        return 64
    def __getitem__(self, i):
        return {"x": np.array([i * i], np.int64)}

pipe = sluice.from_dataset(Squares(), processes=2).map(ops.python(Halve(), processes=2)).batch(8)
loader = sluice.torch.TorchIterable(pipe)
"""
_SUM = "print('sum', int(sum(int(b['x'].sum()) for b in loader)))"
_FOREVER = "n = 0\nwhile True:\n    for b in loader:\n        n += 1\n        if n == 5:\n            print('running', flush=True)"


@pytest.fixture
def kernel():
    manager, client = start_new_kernel(kernel_name="python3", startup_timeout=120)
    yield manager, client
    client.stop_channels()
    manager.shutdown_kernel(now=True)


def execute(client, code, on_output=None, timeout=120):
    """Runs a cell; returns (status, its stdout, the error's name)."""
    msg_id = client.execute(textwrap.dedent(code))
    out, error = [], None
    while True:
        try:
            msg = client.get_iopub_msg(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"the cell gave nothing for {timeout} s; so far: {''.join(out)}") from None
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            out.append(content["text"])
            if on_output:
                on_output("".join(out))
        elif kind == "error":
            error = content["ename"]
        elif kind == "status" and content["execution_state"] == "idle":
            break
    reply = client.get_shell_msg(timeout=timeout)
    # The reply names the error too: the one to trust, as an iopub message
    # may come after the kernel says it is idle.
    return reply["content"]["status"], "".join(out), reply["content"].get("ename", error)


def test_a_notebook_defines_iterates_is_interrupted_and_iterates_again(kernel):
    manager, client = kernel
    want = f"sum {sum(i * i // 2 for i in range(64))}\n"
    status, out, error = execute(client, _DEFINE)
    assert status == "ok", error
    assert execute(client, _SUM)[1] == want
    interrupted = []

    def interrupt_once_running(out):
        if "running" in out and not interrupted:
            interrupted.append(True)
            manager.interrupt_kernel()

    status, _, error = execute(client, _FOREVER, on_output=interrupt_once_running)
    # The endless cell ended, with KeyboardInterrupt. (Once in some dozen runs
    # the kernel's reply says "ok" while its error message names the
    # interrupt: the error is what the cell met.)
    assert error == "KeyboardInterrupt", (status, error)
    assert execute(client, _SUM)[1] == want, "iterating after the interrupt"
