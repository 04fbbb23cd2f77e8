"""A real multi-node Ray cluster on this one machine, for tests.

Each node is started as a user starts one on a real cluster, ``ray start``
(``--block``, so the node lives exactly as long as its process group), with
its own temporary directory and its own ports.  Nothing
here touches another Ray cluster on the machine: no global ``ray stop``, no
``RAY_ADDRESS`` in this process's environment, and ``ray start
--temp-dir`` writes the cluster's address into that directory, not into
``/tmp/ray`` where a plain ``ray.init()`` would find it.  :meth:`kill` ends
one node the hard way (SIGKILL to its process group), as a machine failure
would; :meth:`stop` ends every process of the cluster, found by process
group and by the cluster's temporary directories in their command lines.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import ray

RAY = str(Path(sys.executable).with_name("ray"))
HOST = "127.0.0.1"
#: Object store per node: the Ray minimum is 75 MB; the test runs move little data.
OBJECT_STORE_BYTES = 150 * 2**20


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


class LocalRayCluster:
    """Nodes by name; the head is ``"head"``.  Use as a context manager."""

    def __init__(self) -> None:
        # Short: Ray's socket paths under the temp dir must stay below 108 bytes.
        self.root = Path(tempfile.mkdtemp(prefix="sgsrc", dir="/tmp"))
        self.nodes: dict[str, subprocess.Popen] = {}
        self.ports: dict[str, int] = {}  # node name -> its node manager's port, which Ray reports per node
        self.address: str | None = None
        self.env = {key: value for key, value in os.environ.items() if key != "RAY_ADDRESS"}
        self.env.setdefault("RAY_AUTH_MODE", "disabled")
        # A node waits this long for its raylet to register (default 60 s: too short on a busy machine).
        self.env.setdefault("RAY_raylet_start_wait_time_s", "300")

    def start_head(self, *flags: str) -> str:
        port = free_port()
        # Ray binds a dashboard port even without the dashboard; 8265 may be another cluster's.
        self._start("head", "--head", f"--port={port}", "--include-dashboard=false", f"--dashboard-port={free_port()}",
                    f"--ray-client-server-port={free_port()}", *flags)
        self.address = f"{HOST}:{port}"
        self.wait_for(1)  # a worker node started before its head is up gives up
        return self.address

    def add_node(self, name: str, *flags: str) -> None:
        """Start a worker node with ``flags`` (e.g. ``--num-gpus=4``, ``--resources={...}``)."""
        self._start(name, f"--address={self.address}", *flags)

    def wait_for(self, count: int, timeout: float = 300.0) -> list[dict]:
        """Block until ``count`` nodes are alive (asked from a short-lived driver); returns them."""
        code = ("import json, ray; ray.init(address=%r, logging_level='ERROR'); "
                "print(json.dumps([n for n in ray.nodes() if n['Alive']], default=str))" % self.address)
        deadline = time.monotonic() + timeout
        while True:
            for name, node in self.nodes.items():
                if node.poll() is not None:
                    log = (self.root / f"{name}.log").read_text()[-2000:]
                    raise RuntimeError(f"Ray node {name!r} exited with status {node.returncode}: {log}")
            proc = subprocess.run([sys.executable, "-c", code], env=self.env, capture_output=True, text=True,
                                  timeout=timeout)
            alive = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else []
            if len(alive) >= count:
                return alive
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(alive)} of {count} Ray nodes came up: {proc.stderr[-2000:]}")
            time.sleep(2)

    def name_of(self, node: dict) -> str:
        """The name of a node as ``ray.nodes()`` describes it."""
        return next(name for name, port in self.ports.items() if port == node["NodeManagerPort"])

    def node_running(self, title: str) -> str | None:
        """The name of a node one of whose processes has ``title`` in its command line (Ray
        titles an actor's worker process ``ray::<class name>``), or None."""
        for name, node in self.nodes.items():
            try:
                for process in psutil.Process(node.pid).children(recursive=True):
                    if title in " ".join(process.cmdline()):
                        return name
            except psutil.Error:
                continue  # a process ended while we looked
        return None

    def kill(self, name: str) -> None:
        """End node ``name`` abruptly, every process of it at once, as a machine failure would.

        Its processes are the ``ray start`` process and all it started: the GCS and raylet in its
        process group, and the raylet's workers, which run in process groups of their own (and
        would outlive a signal to the group until they noticed the raylet gone)."""
        node = self.nodes.pop(name)
        try:
            tree = [node.pid, *(child.pid for child in psutil.Process(node.pid).children(recursive=True))]
        except psutil.NoSuchProcess:
            tree = []  # the node had ended already
        _kill(tree)
        node.wait()

    def stop(self) -> None:
        for name in list(self.nodes):
            self.kill(name)
        _kill(self.leftover_pids())
        shutil.rmtree(self.root, ignore_errors=True)

    def leftover_pids(self) -> list[int]:
        """Processes whose command line names this cluster's directory (the GCS, raylets and
        agents do; workers rename themselves, which is why :meth:`kill` follows the process tree)."""
        mine = str(self.root).encode()
        pids = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != os.getpid():
                try:
                    if mine in (entry / "cmdline").read_bytes():
                        pids.append(int(entry.name))
                except OSError:
                    continue
        return pids

    def __enter__(self) -> LocalRayCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _start(self, name: str, *flags: str) -> None:
        temp_dir = self.root / name
        temp_dir.mkdir()
        self.ports[name] = free_port()
        command = [RAY, "start", "--block", f"--temp-dir={temp_dir}",
                   f"--node-manager-port={self.ports[name]}", f"--object-manager-port={free_port()}",
                   f"--metrics-export-port={free_port()}", f"--dashboard-agent-listen-port={free_port()}",
                   f"--dashboard-agent-grpc-port={free_port()}", f"--runtime-env-agent-port={free_port()}",
                   f"--object-store-memory={OBJECT_STORE_BYTES}", "--disable-usage-stats", *flags]
        log = open(self.root / f"{name}.log", "w")
        self.nodes[name] = subprocess.Popen(command, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def default_address_file_names(address: str) -> bool:
    """Whether the address file a plain ``ray.init()`` reads (``/tmp/ray``) names ``address``."""
    found = ray._private.utils.read_ray_address(None)
    return found is not None and found.endswith(address.rsplit(":", 1)[-1])
