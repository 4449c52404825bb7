#!/usr/bin/env python3
"""The oracle server: PyTorch's side of the tests with torch imported once, not once per process.

    .venv/bin/python scripts/dev/oracle_server.py serve SOCKET       (scripts/run-tests.sh starts it)
    .venv/bin/python -IS scripts/dev/oracle_server.py client REAL_PYTHON SOCKET [ARGS...]

Every parity test runs a script of tests/oracle/ with the venv's Python, and every such process
imported torch and torchvision again: 3-7 s each on 2 cores, over a hundred times a run. `serve`
imports them once, runs no tensor operation, and answers each request by forking: the child takes
the request's environment (all of it: thread counts, seeds, paths), working directory, argument
list and its caller's own stdin, stdout and stderr (passed over the socket, so pipes and files
behave as with a process of its own), then runs the script as `python SCRIPT ARGS...` would, as
`__main__`, and exits with its status. What a script computes depends only on torch's kernels and
its thread count, and both are those of a fresh process: the child sets the thread count from
the request's environment as a fresh process does (tests/tooling/oracle_server.rs compares what a
fresh process and a forked child report, and the parity tests' bit-for-bit assertions run
through it).

`client` is what the tests start as "python" while the server runs (`common::venv_bin("python")`
returns target/oracle-server/python, a two-line shell script that runs it, when
TRAINBOOK_ORACLE_PYTHON names it). It forwards only a script of tests/oracle/ given as the first
argument; anything else (the launchers, `-c` snippets, data scripts) it replaces itself with the
real Python, untouched, as it does when the server does not answer. A signal it receives (a
test's deadline) goes to the child; if the client dies, the server kills the child.
"""
import json
import os
import signal
import socket
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ORACLES = os.path.join(ROOT, "tests", "oracle")


def send_message(sock, obj, fds=()):
    data = json.dumps(obj).encode()
    header = struct.pack("!I", len(data))
    if fds:
        socket.send_fds(sock, [header + data], list(fds))
    else:
        sock.sendall(header + data)


def recv_exact(sock, n, first=b""):
    data = first
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError("connection closed")
        data += chunk
    return data


def recv_message(sock, with_fds=0):
    """One length-prefixed JSON message (and up to `with_fds` file descriptors with its first bytes)."""
    fds = []
    if with_fds:
        first, fds, _flags, _addr = socket.recv_fds(sock, 65536, with_fds)
        if not first:
            raise EOFError("connection closed")
    else:
        first = sock.recv(4)
        if not first:
            raise EOFError("connection closed")
    head = recv_exact(sock, 4, first[:4]) if len(first) < 4 else first[:4]
    (length,) = struct.unpack("!I", head)
    body = recv_exact(sock, length, first[4:])
    return json.loads(body[:length]), fds


# ---------------------------------------------------------------------------------------------
# server


def run_request(request, fds):
    """In the forked child: become `python SCRIPT ARGS...` for the request, then exit."""
    code = 1
    try:
        os.setpgid(0, 0)  # its own group: the server can end it and whatever it started
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL if sig != signal.SIGINT else signal.default_int_handler)
        for target, fd in zip((0, 1, 2), fds):
            os.dup2(fd, target)
            os.close(fd)
        sys.stdin = open(0, "r", closefd=False)
        sys.stdout = open(1, "w", closefd=False)
        sys.stderr = open(2, "w", closefd=False)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        argv = request["argv"]
        script = os.path.abspath(argv[0])
        extra = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[:] = [os.path.dirname(script)] + extra + BASE_PATH
        sys.argv = list(argv)
        sys._trainbook_oracle_fork = True  # for the accounting of `make test-timings` only
        fresh_process_state(request["env"])
        import runpy

        try:
            runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if e.code is not None and not isinstance(e.code, int):
                print(e.code, file=sys.stderr)
        except KeyboardInterrupt:
            code = 128 + signal.SIGINT
            import traceback

            traceback.print_exc()
        except BaseException:  # noqa: BLE001 - as the interpreter would: the traceback, status 1
            import traceback

            traceback.print_exc()
            code = 1
        import atexit

        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def fresh_process_state(env):
    """What a fresh interpreter would have that a fork of the server does not: the thread count
    its environment asks for (libgomp read OMP_NUM_THREADS when the server loaded it, so the
    child applies the request's value, or the server's default where it sets none), and its
    random generators seeded anew: torch's default generator (a fresh `import torch` seeds it
    from the system's entropy: `torch.initial_seed()` differs from process to process), Python's
    and NumPy's."""
    import random

    random.seed()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()
    torch = sys.modules["torch"]
    torch.seed()
    wanted = env.get("OMP_NUM_THREADS", "").strip()
    torch.set_num_threads(int(wanted) if wanted.isdigit() and int(wanted) > 0 else DEFAULT_THREADS)


BASE_PATH = []
DEFAULT_THREADS = 1


def serve(path):
    global BASE_PATH, DEFAULT_THREADS
    import selectors

    # What every oracle imports; no tensor operation runs here, so no thread pool starts
    # before a fork.
    import numpy  # noqa: F401
    import torch  # noqa: F401
    import torchvision  # noqa: F401

    # A fresh process's intra-op thread count without OMP_NUM_THREADS, read without running an
    # operation: what OpenMP's runtime reports (at::get_num_threads on first use).
    DEFAULT_THREADS = default_thread_count()
    here = os.path.dirname(os.path.abspath(__file__))
    server_pythonpath = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    BASE_PATH = [p for p in sys.path[1:] if p not in server_pythonpath and p != here]

    if os.path.exists(path):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, None)
    children = {}  # pid -> connection
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(True))
    print(f"oracle server: ready on {path} (pid {os.getpid()}, {DEFAULT_THREADS} threads by default)", flush=True)
    while not stopping:
        for key, _ in sel.select(timeout=0.05):
            if key.data is None:
                conn, _ = listener.accept()
                try:
                    request, fds = recv_message(conn, with_fds=3)
                except (EOFError, OSError, ValueError):
                    conn.close()
                    continue
                if len(fds) != 3:
                    for fd in fds:
                        os.close(fd)
                    conn.close()
                    continue
                pid = os.fork()
                if pid == 0:
                    sel.close()
                    listener.close()
                    for other in children.values():
                        other.close()
                    conn.close()
                    run_request(request, fds)
                for fd in fds:
                    os.close(fd)
                children[pid] = conn
                try:
                    send_message(conn, {"pid": pid})
                except OSError:
                    pass
                sel.register(conn, selectors.EVENT_READ, pid)
            else:
                # The client went away (killed at a deadline): end its child.
                try:
                    gone = not key.fileobj.recv(1)
                except OSError:
                    gone = True
                if gone:
                    sel.unregister(key.fileobj)
                    try:
                        os.killpg(key.data, signal.SIGKILL)
                    except OSError:
                        pass
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = children.pop(pid, None)
            if conn is None:
                continue
            try:
                sel.unregister(conn)
            except (KeyError, ValueError):
                pass
            try:
                send_message(conn, {"exit": os.waitstatus_to_exitcode(status)})
            except OSError:
                pass
            conn.close()
    for pid in list(children):
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
    os.unlink(path)


def default_thread_count():
    """The intra-op thread count a fresh process starts with when OMP_NUM_THREADS is unset:
    asked of a fresh interpreter once (running an operation here would start the pool)."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
                         env=env, capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


# ---------------------------------------------------------------------------------------------
# client


def client(real_python, path, args):
    def fallback():
        os.execv(real_python, [real_python] + args)

    script = args[0] if args else ""
    if not (script.endswith(".py") and os.path.dirname(os.path.abspath(script)) == ORACLES):
        fallback()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
        send_message(sock, {"argv": args, "env": dict(os.environ), "cwd": os.getcwd()}, fds=(0, 1, 2))
        started, _ = recv_message(sock)
    except (OSError, EOFError, ValueError):
        sock.close()
        fallback()
    pid = started["pid"]

    def forward(sig, _frame):
        try:
            os.killpg(pid, sig)
        except OSError:
            pass

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, forward)
    try:
        ended, _ = recv_message(sock)
        code = ended["exit"]
    except (OSError, EOFError, ValueError):
        print("oracle server: the connection closed before the script's end", file=sys.stderr)
        code = 1
    if code < 0:  # ended by a signal: end the same way
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        code = 128 - code
    sys.exit(code)


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "serve":
        serve(sys.argv[2])
        return 0
    if len(sys.argv) >= 4 and sys.argv[1] == "client":
        client(sys.argv[2], sys.argv[3], sys.argv[4:])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
