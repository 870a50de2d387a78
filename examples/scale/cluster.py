"""The processes of the scale-out demo, on loopback: example servers and nginx in front of them.

Every server is ``examples/http/server.py`` under uvicorn, an independent process that shares
nothing with the others but (optionally) the key ring file. nginx is Debian's package, run in
the foreground with its own prefix, configuration, pid file and logs in a temporary directory,
as a plain round-robin balancer (no sticky sessions); it adds ``X-Upstream`` to every answer,
naming the process that gave it. Linux only (process memory is read from ``/proc``).
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

__all__ = [
    "NGINX_MISSING",
    "Cluster",
    "ClusterError",
    "Server",
    "cluster",
    "cpu_seconds",
    "find_nginx",
    "find_redis",
    "nginx_config",
    "rss_bytes",
    "served_here",
    "start_redis",
    "start_server",
    "stop",
    "write_ring",
]

SERVER_SCRIPT = Path(__file__).resolve().parents[1] / "http" / "server.py"
#: The line the example server logs once it seals and unseals with a reloaded ring.
RELOADED = "state key ring reloaded"
NOT_RELOADED = "state key ring NOT reloaded"
NGINX_MISSING = (
    "nginx is not installed. It comes from Debian's packages; as root: "
    "apt-get update && apt-get install -y nginx"
)
REDIS_MISSING = (
    "redis-server is not installed. It comes from Debian's packages; as root: "
    "apt-get update && apt-get install -y redis-server"
)
_TEMP_PATH_MODULES = ("proxy", "fastcgi", "uwsgi", "scgi")


class ClusterError(RuntimeError):
    """A process did not start, stopped early or did not do what it was told."""


@contextlib.asynccontextmanager
async def served_here(app: Any) -> AsyncIterator[str]:
    """``app`` (ASGI) under uvicorn in the running event loop, on a free loopback port; yields
    its ``/mcp`` URL and stops the server on exit. For a test or a benchmark that wants client
    and server in one process, unlike :func:`start_server`."""
    import anyio
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # uvicorn leaves Nagle on for the connections a socket handed over accepts: without this,
    # every response waits out the client's delayed ACK (about 40 ms a call on loopback).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="off"))
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            with anyio.fail_after(10):
                while not server.started:
                    await anyio.sleep(0.01)
            try:
                yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
            finally:
                server.should_exit = True
    finally:
        sock.close()


def free_port() -> int:
    """A TCP port free on loopback right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_listening(port: int, proc: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    """Return once something accepts connections on ``port``; fail if ``proc`` exits first."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise ClusterError(f"{proc.args!r} exited with {proc.returncode}: {_tail(log)}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        if time.monotonic() > deadline:
            raise ClusterError(f"nothing listens on port {port} after {timeout} s: {_tail(log)}")
        time.sleep(0.05)


def _tail(log: Path, lines: int = 5) -> str:
    try:
        return " | ".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def write_ring(path: Path, keys: Sequence[bytes]) -> None:
    """Write the key ring file (base64, one key a line, the sealing key first) atomically and
    readable by its owner only."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write("# requestState key ring: the first key seals, every key unseals\n")
        f.writelines(base64.b64encode(key).decode("ascii") + "\n" for key in keys)
    os.replace(tmp, path)


def rss_bytes(pid: int) -> int:
    """Resident memory of process ``pid`` (``VmRSS`` of ``/proc/<pid>/status``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise ClusterError(f"no VmRSS for process {pid}")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time process ``pid`` has used (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@attrs.define
class Server:
    """One example server process."""

    port: int
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def address(self) -> str:
        """How nginx names it in ``X-Upstream``."""
        return f"127.0.0.1:{self.port}"

    def reloads(self) -> int:
        """How many times it has reloaded its key ring (lines in its log); raises if a reload
        failed."""
        text = self.log.read_text(errors="replace")
        if NOT_RELOADED in text:
            raise ClusterError(f"{self.address} could not reload its key ring: {_tail(self.log)}")
        return text.count(RELOADED)

    def rss(self) -> int:
        return rss_bytes(self.proc.pid)

    def cpu(self) -> float:
        return cpu_seconds(self.proc.pid)


def start_server(
    workdir: Path,
    name: str,
    *,
    keys_file: Path | None,
    ttl: float,
    timeout: float = 20.0,
    extra: Sequence[str] = (),
) -> Server:
    """Start ``examples/http/server.py`` on a free loopback port and wait until it listens;
    ``extra`` are more of its options (``--tasks-db PATH``)."""
    port = free_port()
    log = workdir / f"{name}.log"
    argv = [sys.executable, str(SERVER_SCRIPT), "--port", str(port), "--state-ttl", str(ttl)]
    if keys_file is not None:
        argv += ["--state-keys-file", str(keys_file)]
    argv += list(extra)
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
    server = Server(port, proc, log)
    try:
        wait_listening(port, proc, log, timeout)
    except BaseException:
        stop(proc)
        raise
    return server


def stop(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """Stop a process we started: SIGTERM, then SIGKILL if it does not exit in time."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def find_redis() -> str | None:
    """The redis-server binary (Debian's package puts it in /usr/bin)."""
    return shutil.which("redis-server") or shutil.which("redis-server", path="/usr/sbin:/usr/bin")


def start_redis(workdir: Path, timeout: float = 20.0) -> tuple[str, subprocess.Popen[bytes]]:
    """Start a redis-server on a free loopback port, keeping nothing on disk (no snapshots, no
    append-only file); its URL and process. Raises :class:`ClusterError` without redis-server."""
    binary = find_redis()
    if binary is None:
        raise ClusterError(REDIS_MISSING)
    port = free_port()
    log = workdir / "redis.log"
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
            "no", "--dir", str(workdir), "--protected-mode", "yes"]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
    try:
        wait_listening(port, proc, log, timeout)
    except BaseException:
        stop(proc)
        raise
    return f"redis://127.0.0.1:{port}/0", proc


def find_nginx() -> str | None:
    """The nginx binary (Debian installs it in /usr/sbin, not always on a user's PATH)."""
    return shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/sbin")


def nginx_config(prefix: Path, port: int, upstreams: Sequence[str], missing: Sequence[str]) -> str:
    """An nginx configuration that balances ``upstreams`` round-robin on loopback ``port``,
    keeping every file it writes under ``prefix``; ``missing`` are the modules this nginx was
    built without (their temp path directives would be errors)."""
    temp_paths = "".join(
        f"    {module}_temp_path {prefix}/{module}_temp;\n"
        for module in _TEMP_PATH_MODULES
        if module not in missing
    )
    servers = "".join(f"        server {address};\n" for address in upstreams)
    return f"""# Written by examples/scale/cluster.py: plain round-robin, no sticky sessions.
daemon off;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{
    worker_connections 8192;
}}
http {{
    log_format upstream '$remote_addr "$request" $status upstream=$upstream_addr $request_time';
    access_log {prefix}/access.log upstream buffer=64k;
    client_body_temp_path {prefix}/client_body_temp;
{temp_paths}    client_body_buffer_size 1m;
    client_max_body_size 4m;
    upstream mcp {{
{servers}        keepalive 64;
        # Below uvicorn's 5 s: nginx drops an idle connection before the server may close it
        # under a request (a POST is never retried on another connection: that would be a 502).
        keepalive_timeout 4s;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://mcp;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_buffering off;
            proxy_read_timeout 60s;
            add_header X-Upstream $upstream_addr always;
        }}
    }}
}}
"""


def _nginx_missing_modules(nginx: str) -> list[str]:
    built = subprocess.run([nginx, "-V"], capture_output=True, text=True, check=True).stderr
    return [m for m in _TEMP_PATH_MODULES if f"--without-http_{m}_module" in built]


def start_nginx(
    nginx: str, prefix: Path, upstreams: Sequence[str], timeout: float = 10.0
) -> tuple[subprocess.Popen[bytes], int]:
    """Start nginx in the foreground in front of ``upstreams``; returns it and its port."""
    prefix.mkdir(parents=True, exist_ok=True)
    port = free_port()
    conf = prefix / "nginx.conf"
    conf.write_text(nginx_config(prefix, port, upstreams, _nginx_missing_modules(nginx)))
    log = prefix / "error.log"
    argv = [nginx, "-p", str(prefix), "-c", str(conf), "-e", str(log)]
    with (prefix / "stderr.log").open("wb") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
    try:
        wait_listening(port, proc, log, timeout)
    except BaseException:
        stop(proc)
        raise
    return proc, port


@attrs.define
class Cluster:
    """N servers behind one nginx."""

    url: str
    servers: list[Server]
    nginx: subprocess.Popen[bytes]

    def cpu(self) -> float:
        """CPU time used by all the servers so far."""
        return sum(server.cpu() for server in self.servers)

    def rotate(self, ring: Path, keys: Sequence[bytes], timeout: float = 10.0) -> float:
        """Write ``keys`` to the ring file, tell every server (SIGHUP), and wait until each
        has reloaded it; returns the seconds that took. Blocks: call it from a thread when an
        event loop must keep running."""
        started = time.monotonic()
        before = [server.reloads() for server in self.servers]
        write_ring(ring, keys)
        for server in self.servers:
            server.proc.send_signal(signal.SIGHUP)
        deadline = started + timeout
        for server, count in zip(self.servers, before, strict=True):
            while server.reloads() <= count:
                if server.proc.poll() is not None or time.monotonic() > deadline:
                    raise ClusterError(f"{server.address} did not reload: {_tail(server.log)}")
                time.sleep(0.01)
        return time.monotonic() - started


@contextlib.contextmanager
def cluster(
    workdir: Path,
    processes: int,
    *,
    keys_file: Path | None,
    ttl: float,
    nginx: str,
    extra: Sequence[str] = (),
) -> Iterator[Cluster]:
    """Start ``processes`` servers (``extra``: more of their options) and nginx in front of
    them; stop them all on exit."""
    servers: list[Server] = []
    proxy: subprocess.Popen[bytes] | None = None
    try:
        for i in range(processes):
            name = f"server-{i + 1}"
            servers.append(start_server(workdir, name, keys_file=keys_file, ttl=ttl, extra=extra))
        proxy, port = start_nginx(nginx, workdir / "nginx", [s.address for s in servers])
        yield Cluster(f"http://127.0.0.1:{port}/mcp", servers, proxy)
    finally:
        if proxy is not None:
            stop(proxy)
        for server in servers:
            stop(server.proc)
