"""A local stand-in for the operator's progress endpoint, for the tests: it records every POST and
answers with scripted status codes; the import path of the package under test; and the environment
of a Convoy pod."""

import importlib
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
# Test the source tree, not an installed copy.
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src"))


class Recorder:
    """An HTTP(S) server on 127.0.0.1 recording requests as (path, headers, body)."""

    def __init__(self, tls_context=None):
        self.requests = []
        self.answers = []  # status codes, or (code, body), for the next requests; 204 once they run out
        self.lock = threading.Lock()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with recorder.lock:
                    recorder.requests.append((self.path, dict(self.headers), json.loads(raw)))
                    answer = recorder.answers.pop(0) if recorder.answers else 204
                code, body = answer if isinstance(answer, tuple) else (answer, None)
                if body is not None:  # a reply with a body, as a later operator may send
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                elif code == 204:
                    self.send_response(204)
                    self.end_headers()
                else:
                    self.send_error(code, "scripted answer")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        scheme = "http"
        if tls_context is not None:
            self.server.socket = tls_context.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.base = "%s://127.0.0.1:%d" % (scheme, self.server.server_address[1])
        self.url = self.base + "/v1/namespaces/ns/trainingjobs/job"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def bodies(self, kind):
        with self.lock:
            return [body for path, _, body in self.requests if path.endswith("/" + kind)]


class FakeClock:
    """A clock that moves only when a test moves it (now += seconds)."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def closed_port():
    """A port on 127.0.0.1 that nothing listens on."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def make_certs(directory):
    """Writes tls.crt, tls.key and ca.crt with the openssl CLI, as the operator makes its own by default
    (operator/pkg/progress/certs.go): one ECDSA certificate for 127.0.0.1 that is its own CA. False
    without openssl."""
    openssl = shutil.which("openssl")
    if openssl is None:
        return False
    subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-days", "1", "-subj", "/CN=convoy-operator progress", "-keyout", "tls.key", "-out", "tls.crt",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                    "-addext", "keyUsage=digitalSignature,keyCertSign",
                    "-addext", "extendedKeyUsage=serverAuth"],
                   cwd=directory, check=True, capture_output=True)
    shutil.copy(os.path.join(directory, "tls.crt"), os.path.join(directory, "ca.crt"))
    return True


def server_tls_context(directory):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(directory, "tls.crt"), os.path.join(directory, "tls.key"))
    return ctx


# The variables convoy.rank() reads: a test that reports as rank 0 clears them.
RANK_VARS = ("OMPI_COMM_WORLD_RANK", "RANK", "JAX_PROCESS_ID", "PMI_RANK")


def set_environ(test, **values):
    """Sets os.environ as a pod's for the rest of test (None removes a variable), restoring it
    afterwards."""
    saved = dict(os.environ)

    def restore():
        os.environ.clear()
        os.environ.update(saved)

    test.addCleanup(restore)
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def watch_sigterm(test):
    """Lets test send SIGTERM to this process (the SDK's handler installed), and forgets the SDK's
    preemption state and puts the handler before it back afterwards. Returns a function that sends
    SIGTERM and lets the handler run."""
    import signal
    import time

    from convoy import _preempt

    test.addCleanup(_preempt._reset)
    _preempt.watch()

    def sigterm():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.01)  # the handler runs in the main thread at its next instruction

    return sigterm


def checkpoint_interval(test, seconds):
    """Sets CONVOY_CHECKPOINT_INTERVAL_SECONDS for the rest of test and gives the SDK a clock that
    moves only when the test moves it: returns it, its now in seconds (0 at first)."""
    import types

    from convoy import _preempt

    clock = types.SimpleNamespace(now=0.0)
    set_environ(test, CONVOY_CHECKPOINT_INTERVAL_SECONDS=str(seconds))
    real, since = _preempt._clock, _preempt._since
    _preempt._clock, _preempt._since = (lambda: clock.now), None

    def restore():
        _preempt._clock, _preempt._since = real, since

    test.addCleanup(restore)
    return clock


def subprocess_run(test, code, timeout=60):
    """Runs code in a new Python process with this environment and the package under test; fails
    test unless it exits 0. Returns the CompletedProcess (stdout and stderr as text)."""
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(HERE), "src"))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout)
    test.assertEqual(done.returncode, 0, done.stdout + done.stderr)
    return done


def import_without(module, *missing):
    """module (a convoy submodule) imported afresh as if the packages named in missing were not
    installed, their import raising ImportError. sys.modules and the convoy package are left as
    they were."""
    import convoy

    def blocked(name):
        return name == module or any(name == m or name.startswith(m + ".") for m in missing)

    removed = {name: sys.modules.pop(name) for name in list(sys.modules) if blocked(name)}
    attribute = module.rpartition(".")[2]
    had = convoy.__dict__.get(attribute)
    try:
        for name in missing:
            sys.modules[name] = None  # import raises ModuleNotFoundError
        return importlib.import_module(module)
    finally:
        for name in list(sys.modules):
            if blocked(name):
                del sys.modules[name]
        sys.modules.update(removed)
        if had is None:
            convoy.__dict__.pop(attribute, None)
        else:
            setattr(convoy, attribute, had)


def pod_environment(test, checkpoint_uri):
    """Starts a Recorder and sets the variables the operator gives a pod for it (URL, token file,
    checkpoint_uri, no resume, no rank variables), posting every report; all undone at cleanup.
    Returns the Recorder and a temporary directory for the test."""
    import convoy

    server = Recorder()
    test.addCleanup(server.close)
    tmp = tempfile.TemporaryDirectory()
    test.addCleanup(tmp.cleanup)
    token = os.path.join(tmp.name, "token")
    with open(token, "w") as f:
        f.write("token-1\n")
    set_environ(test, CONVOY_PROGRESS_URL=server.url, CONVOY_PROGRESS_TOKEN_FILE=token,
                CONVOY_CHECKPOINT_URI=checkpoint_uri(tmp.name), CONVOY_RESUME_FROM=None, **dict.fromkeys(RANK_VARS))
    convoy.configure(min_interval=0)  # every report posted, to see them all
    test.addCleanup(convoy.configure)
    return server, tmp.name
