"""Run one example DAG with ``dag.test()`` in its own process (as a worker would), optionally killed mid-write.

Usage: ``python run_dag_process.py DAGS_FOLDER DAG_ID [--logical-date ISO] [--kill-extract-of CAPTURE_INSTANCE]``:
the child of :func:`~airflow_provider_sqlserver_cdc.testing.dag_runs.run_dag_test` plus one fault. With
``--kill-extract-of`` the process sends itself SIGKILL right after the extract task of that capture
instance has written its first Parquet batch: the part file is left without its footer and the
window has no manifest, as when a worker dies.

``python run_dag_process.py --serve SOCKET`` is the warm form (see warm_dag_runs.py): it imports Airflow
and the provider and builds ``dag.test()``'s in-process execution API once (about 6 s of every run),
then forks one process per DAG run that a client asks for on the Unix socket ``SOCKET``, as a
LocalExecutor worker forks from its warm parent. Each run is still a process of its own, with the
run's environment, working directory and output files, killed by whatever kills a cold one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import signal
import socket
import sys

from airflow_provider_sqlserver_cdc.testing import dag_runs


def kill_after_first_batch(capture_instance: str) -> None:
    """Make the window writer of ``capture_instance`` kill this process after its first batch."""
    from airflow_provider_sqlserver_cdc.parquet import window_writer

    original = window_writer.ParquetWindowWriter.write_batch

    def write_then_die(self, batch, *args, **kwargs):  # type: ignore[no-untyped-def]
        result = original(self, batch, *args, **kwargs)
        if f"/{capture_instance}/" in self.window_dir:
            print(f"KILLING extract of {capture_instance} mid-write", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    window_writer.ParquetWindowWriter.write_batch = write_then_die  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--kill-extract-of")
    parser.add_argument("--serve")
    args, dag_run_args = parser.parse_known_args(argv)
    if args.serve:
        return serve(args.serve)
    if args.kill_extract_of:
        kill_after_first_batch(args.kill_extract_of)
    return dag_runs.main(dag_run_args)


# ----------------------------------------------------------------- the warm form


def warm_up() -> None:
    """Import what every run imports and build the in-process execution API (no thread, no DB connection)."""
    import airflow.models  # noqa: F401
    from airflow.dag_processing.dagbag import BundleDagBag  # noqa: F401
    from airflow.sdk.execution_time.supervisor import in_process_api_server

    import airflow_provider_sqlserver_cdc.pipeline  # noqa: F401

    app = in_process_api_server().app
    # Cadwyn builds the versioned routes on the app's first request (about 4 s): build them here.
    if not getattr(app, "_cadwyn_initialized", True):
        app._cadwyn_initialize()


def serve(socket_path: str) -> int:
    """Warm up, then fork a handler per connection on ``socket_path`` until stdin closes (the test process ends)."""
    warm_up()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(socket_path)
    server.listen()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the handlers are reaped by the kernel
    print("READY", flush=True)
    while True:
        ready, _, _ = select.select([server, sys.stdin], [], [])
        if sys.stdin in ready and not os.read(sys.stdin.fileno(), 1024):
            return 0
        if server in ready:
            conn, _ = server.accept()
            sys.stdout.flush()
            sys.stderr.flush()
            if os.fork() == 0:
                server.close()
                os._exit(handle(conn))
            conn.close()


def handle(conn: socket.socket) -> int:
    """Run the requested DAG run in a child process; answer its exit status (negative: the killing signal).

    Should the client go away first (killed on a timeout), the run's process group is killed.
    """
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    received, fds, _, _ = socket.recv_fds(conn, 1 << 16, 2)
    size, received = int.from_bytes(received[:8], "big"), received[8:]
    while len(received) < size:
        received += conn.recv(size - len(received))
    request = json.loads(received)
    pid = os.fork()
    if pid == 0:
        conn.close()
        os.setpgid(0, 0)
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = [__file__, *request["argv"]]
        from airflow.models.crypto import get_fernet

        get_fernet.cache_clear()  # the run's own AIRFLOW__CORE__FERNET_KEY
        try:
            code = main(request["argv"])
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    for fd in fds:
        os.close(fd)
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        readable, _, _ = select.select([conn], [], [], 0.2)
        if readable and not conn.recv(1):  # the client is gone: so goes its run
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return 1
    # What the run left behind in its process group (a listener's forked helper still reading a pipe that
    # this warm server keeps open) ends with it, as it would when a cold run's process exits.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
