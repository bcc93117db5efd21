"""The real servers the distributed grading tests and `make bench` start for themselves: a throwaway
PostgreSQL (Debian's `postgresql` package, `make postgres`) in a folder of its own, reached over a
Unix socket there, and a Dask `LocalCluster` of worker processes.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["PG_BIN", "PostgresServer", "local_cluster"]

PG_BIN = next(iter(sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)), None)


class PostgresServer:
    """A PostgreSQL server of its own in a new folder, started on construction; `stop()` ends it and
    removes the folder. As root it runs as the `postgres` user (initdb refuses root).

    Raises:
        RuntimeError: no PostgreSQL server is installed (`make postgres` installs Debian's).
    """

    def __init__(self) -> None:
        if PG_BIN is None or not (PG_BIN / "initdb").exists():
            raise RuntimeError("no PostgreSQL in /usr/lib/postgresql: run `make postgres` (installs Debian's)")
        self.folder = Path(tempfile.mkdtemp(prefix="book-postgres-"))
        self.port = 20000 + secrets.randbelow(20000)
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.folder, user.pw_uid, user.pw_gid)
            self._as_user = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"]
        data = self.folder / "data"
        self._run(PG_BIN / "initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
        options = f"-k {self.folder} -p {self.port} -c listen_addresses='' -c fsync=off -c max_connections=200"
        self._run(PG_BIN / "pg_ctl", "-D", data, "-o", options, "-l", self.folder / "log", "-w", "start")

    def _run(self, *args) -> None:
        done = subprocess.run([*self._as_user, *map(str, args)], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{args[0]} failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")

    def create_database(self, name: str) -> str:
        """A new, empty database `name` on this server; its URL (`postgresql://` for `make course DB=`)."""
        self._run(PG_BIN / "createdb", "-h", self.folder, "-p", self.port, "-U", "postgres", name)
        return f"postgresql://postgres@/{name}?host={self.folder}&port={self.port}"

    def stop(self) -> None:
        self._run(PG_BIN / "pg_ctl", "-D", self.folder / "data", "-m", "immediate", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)


@contextlib.contextmanager
def local_cluster(n_workers: int = 2) -> Iterator[str]:
    """A Dask `LocalCluster` of `n_workers` processes, one thread each (one submission at a time, as
    `dask worker --nthreads 1` grades); yields the scheduler's address."""
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=40
    ) as cluster:
        yield cluster.scheduler_address
