"""Shared fixtures of the tensordict-distributed tests.

Tests are collected with ``--import-mode=importlib``, so helpers are fixtures here:

* ``run_ranks(scenario, world)`` runs ``rank_scenarios.py`` once per rank, as real
  processes joined by a gloo process group on 127.0.0.1 (a free port each time, so tests
  can run in parallel), and returns what each rank wrote. A hang fails the test after a
  timeout and every process is killed.
* ``redis_server`` starts a real ``redis-server`` on a free port (and a Unix socket) in a
  temporary folder and stops it afterwards. Without the binary it uses the server named
  by ``TENSORDICT_TEST_REDIS=host:port`` (CI's redis service container), and otherwise
  the tests using it skip with a clear reason, as they do without the ``redis`` package.
  ``own_redis_server`` (tests that stop and restart it) always needs the binary.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

SCENARIOS = Path(__file__).with_name("rank_scenarios.py")
JOIN_TIMEOUT = 180.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def run_ranks(tmp_path: Path) -> Callable[..., list[dict[str, Any]]]:
    def run(
        scenario: str, world: int, *, may_fail: tuple[int, ...] = (), timeout: float = JOIN_TIMEOUT
    ) -> list[dict[str, Any]]:
        port = free_port()
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        procs, logs = [], []
        for rank in range(world):
            log = open(tmp_path / f"{scenario}-log{rank}.txt", "w")  # closed below
            logs.append(log)
            cmd = [
                sys.executable,
                str(SCENARIOS),
                scenario,
                str(rank),
                str(world),
                str(port),
                str(tmp_path),
            ]
            procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env))
        deadline = time.monotonic() + timeout
        try:
            for proc in procs:
                try:
                    proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
                except subprocess.TimeoutExpired:
                    pytest.fail(f"{scenario}: the ranks did not finish in {timeout} s (hang)")
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            for log in logs:
                log.close()
        results = []
        for rank, proc in enumerate(procs):
            out = tmp_path / f"{scenario}-rank{rank}.json"
            if rank in may_fail and not out.exists():
                results.append({"exit_code": proc.returncode})
                continue
            if proc.returncode != 0 or not out.exists():
                text = (tmp_path / f"{scenario}-log{rank}.txt").read_text()
                pytest.fail(f"{scenario}: rank {rank} exited with {proc.returncode}:\n{text}")
            results.append(json.loads(out.read_text()))
        return results

    return run


# ---------------------------------------------------------------------- redis
class RedisServer:
    """A ``redis-server`` process in its own folder: ``port``, ``unix_socket``, and
    ``restart(keep_data)`` (``SHUTDOWN SAVE`` then start again, or a restart that loses
    everything)."""

    def __init__(self, binary: str, folder: Path) -> None:
        self.binary = binary
        self.folder = folder
        self.host = "127.0.0.1"
        self.port = free_port()
        # A short path: Unix socket paths are limited to about 100 bytes.
        self.unix_socket = os.path.join(tempfile.mkdtemp(prefix="rds"), "redis.sock")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, persistent: bool = True) -> None:
        cmd = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--unixsocket",
            self.unix_socket,
            "--dir",
            str(self.folder),
            "--save",
            "",
            "--appendonly",
            "no",
            "--protected-mode",
            "no",
        ]
        if not persistent:
            (self.folder / "dump.rdb").unlink(missing_ok=True)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        import redis

        client = redis.Redis(port=self.port)
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                break
            except redis.exceptions.ConnectionError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.05)
        client.close()

    def stop(self, save: bool = False) -> None:
        if self.proc is None:
            return
        if save:
            import redis

            client = redis.Redis(port=self.port)
            try:
                client.shutdown(save=True)
            except redis.exceptions.ConnectionError:
                pass  # shutting down closes the connection
        else:
            self.proc.terminate()  # SIGTERM: a quick shutdown (no save configured)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def restart(self, keep_data: bool) -> None:
        self.stop(save=keep_data)
        self.start(persistent=keep_data)


class ExternalRedis:
    """A server started by someone else (``TENSORDICT_TEST_REDIS=host:port``)."""

    unix_socket = None

    def __init__(self, address: str) -> None:
        host, _, port = address.rpartition(":")
        self.host, self.port = host or "localhost", int(port)

    def stop(self, save: bool = False) -> None:
        pass


def _start_redis(folder: Path, external_ok: bool = False) -> Any:
    pytest.importorskip(
        "redis",
        reason="the store tests need the redis client: pip install tensordict-distributed[redis]",
    )
    binary = shutil.which("redis-server")
    if binary is None:
        address = os.environ.get("TENSORDICT_TEST_REDIS")
        if external_ok and address:
            return ExternalRedis(address)
        pytest.skip(
            "no redis-server binary on PATH: the store tests need a real server "
            "(Debian: apt-get install redis-server"
            + (
                ", or set TENSORDICT_TEST_REDIS=host:port)"
                if external_ok
                else "; this test restarts it)"
            )
        )
    server = RedisServer(binary, folder)
    server.start()
    return server


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One server for the session (each store has its own td_id)."""
    server = _start_redis(tmp_path_factory.mktemp("redis"), external_ok=True)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def own_redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A server of its own, for tests that stop and restart it."""
    server = _start_redis(tmp_path)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def scenarios() -> Any:
    """The ``rank_scenarios`` module (its tensordict builders and ``dump``)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("rank_scenarios", SCENARIOS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
