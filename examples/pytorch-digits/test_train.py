"""Runs train.py as a gang of 2 processes on 127.0.0.1 with the variables Convoy sets, reporting to a
local stand-in for the operator's progress endpoint: it trains, reports, checkpoints, resumes after
a worker is killed, and exits promptly on SIGTERM.

    /usr/bin/python3 -m unittest discover -s examples/pytorch-digits -v

It needs torch and scikit-learn in the interpreter that runs it (Debian: python3-torch,
python3-sklearn) and fails, saying so, without them. It uses the convoy package from sdk/python/src
when run in the repository, else the installed one.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "train.py")
SDK = os.path.join(HERE, "..", "..", "sdk", "python", "src")
EPOCHS = 3
TIMEOUT = 180  # seconds for a gang: starting torch takes seconds on a busy machine


def epoch_lines(log, rank):
    """{epoch: (loss, accuracy)} from lines like `rank=0 epoch=3/20 loss=0.4123 accuracy=0.9012`."""
    pattern = r"^rank=%d epoch=(\d+)/%d loss=(\d+\.\d{4}) accuracy=(\d\.\d{4})$" % (rank, EPOCHS)
    return {int(e): (float(l), float(a)) for e, l, a in re.findall(pattern, log, re.M)}


class Endpoint:
    """Records the JSON bodies posted to .../progress and .../checkpoint, answering 204."""

    def __init__(self):
        self.posts = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                endpoint.posts.append((self.path.rsplit("/", 1)[1], self.headers.get("Authorization"), body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d/v1/namespaces/ns/trainingjobs/digits" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def bodies(self, kind):
        return [body for k, _, body in list(self.posts) if k == kind]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Gang:
    """The processes of one run of the gang, one per rank, logging to files."""

    def __init__(self, tmp, env, ranks=(0, 1)):
        self.logs = {}
        self.procs = {}
        port = free_port()
        for rank in ranks:
            self.logs[rank] = os.path.join(tmp, "rank%d-%s.log" % (rank, time.monotonic_ns()))
            with open(self.logs[rank], "w") as out:
                self.procs[rank] = subprocess.Popen(
                    [sys.executable, TRAIN],
                    env=dict(env, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2", RANK=str(rank)),
                    stdout=out, stderr=subprocess.STDOUT)
        self.port = port

    def log(self, rank):
        with open(self.logs[rank]) as f:
            return f.read()

    def wait(self, timeout=TIMEOUT):
        deadline = time.monotonic() + timeout
        try:
            return {rank: p.wait(max(deadline - time.monotonic(), 0.1)) for rank, p in self.procs.items()}
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError("the gang ran past %ds:\n%s" % (timeout, self.dump()))

    def wait_for(self, what, timeout=TIMEOUT):
        """Waits until what() is true."""
        deadline = time.monotonic() + timeout
        while not what():
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError("timed out waiting:\n" + self.dump())
            time.sleep(0.05)

    def kill(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()

    def dump(self):
        return "\n".join("--- rank %d:\n%s" % (rank, self.log(rank)[-3000:]) for rank in self.procs)


def require_torch(failure):
    missing = []
    for module in ("torch", "sklearn"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise failure(
            "%s cannot import %s: run this test with a Python that has PyTorch and scikit-learn "
            "(Debian: apt-get install python3-torch python3-sklearn; then /usr/bin/python3 -m unittest)"
            % (sys.executable, " and ".join(missing)))


def pod_env(tmp, endpoint, checkpoints, **extra):
    """The variables a pod of a job with 3 epochs and checkpoints on a pvc gets, less the rank's."""
    token = os.path.join(tmp, "token")
    with open(token, "w") as f:
        f.write("projected-token")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONVOY_", "PET_", "TORCHELASTIC_")) and k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    if os.path.isdir(SDK):
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.abspath(SDK), env.get("PYTHONPATH")]))
    env.update(EPOCHS=str(EPOCHS), LEARNING_RATE="0.01", BATCH_SIZE="64",
               CONVOY_CHECKPOINT_URI=checkpoints, CONVOY_CHECKPOINT_FREQUENCY="1",
               CONVOY_PROGRESS_URL=endpoint.url, CONVOY_PROGRESS_TOKEN_FILE=token)
    env.update(extra)
    return env


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class TrainTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_torch(cls.failureException)
        cls.tmp = tempfile.mkdtemp(prefix="convoy-digits-")
        # One uninterrupted run that the tests look at and compare with.
        cls.endpoint = Endpoint()
        cls.checkpoints = os.path.join(cls.tmp, "uninterrupted", "ns", "digits")
        try:
            cls.gang = Gang(cls.tmp, cls.env(cls.endpoint, cls.checkpoints))
            cls.codes = cls.gang.wait()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.endpoint.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def env(cls, endpoint, checkpoints, **extra):
        return pod_env(cls.tmp, endpoint, checkpoints, **extra)

    def test_trains(self):
        self.assertEqual(self.codes, {0: 0, 1: 0}, self.gang.dump())
        for rank in (0, 1):
            log = self.gang.log(rank)
            epochs = epoch_lines(log, rank)
            self.assertEqual(sorted(epochs), [1, 2, 3], log)
            self.assertLess(epochs[3][0], epochs[1][0], "the loss does not fall:\n" + log)
            final = re.search(r"^rank=%d final accuracy=(\d\.\d{4})$" % rank, log, re.M)
            self.assertIsNotNone(final, log)
            self.assertEqual(float(final.group(1)), epochs[3][1])
            self.assertGreaterEqual(epochs[3][1], 0.85, log)
            self.assertNotIn("resumed", log)
        # Both ranks agree: the model is the same everywhere.
        self.assertEqual(epoch_lines(self.gang.log(0), 0), epoch_lines(self.gang.log(1), 1))

    def test_reports_from_rank_zero(self):
        progress = self.endpoint.bodies("progress")
        # The first report goes at once, later ones at most every 5 s, the final one always: one
        # of each, so rank 1 reported nothing.
        self.assertEqual(progress[0]["epoch"], 1)
        self.assertEqual([p["epoch"] for p in progress].count(1), 1, progress)
        final = progress[-1]
        self.assertEqual((final["epoch"], final["totalEpochs"], sorted(final["metrics"])), (3, 3, ["accuracy", "loss"]))
        self.assertEqual(round(final["metrics"]["accuracy"], 4), epoch_lines(self.gang.log(0), 0)[3][1])
        self.assertEqual({auth for _, auth, _ in self.endpoint.posts}, {"Bearer projected-token"})
        # A checkpoint every epoch (CONVOY_CHECKPOINT_FREQUENCY=1), written completely.
        checkpoints = self.endpoint.bodies("checkpoint")
        self.assertEqual(checkpoints, [{"path": os.path.join(self.checkpoints, "epoch-%d.pt" % e), "epoch": e} for e in (1, 2, 3)])
        # The SDK lists the checkpoints it was told of, for the retention.
        self.assertEqual(sorted(os.listdir(self.checkpoints)), [".convoy-checkpoints.json", "epoch-1.pt", "epoch-2.pt", "epoch-3.pt"])

    def test_resumes_after_a_worker_is_killed(self):
        endpoint = Endpoint()
        self.addCleanup(endpoint.close)
        checkpoints = os.path.join(self.tmp, "killed", "ns", "digits")
        gang = Gang(self.tmp, self.env(endpoint, checkpoints, CONVOY_EXAMPLE_EPOCH_SLEEP="1", CONVOY_CHECKPOINT_RETENTION="1"))
        self.addCleanup(gang.kill)
        gang.wait_for(lambda: endpoint.bodies("checkpoint"))
        gang.procs[1].kill()
        self.assertEqual(gang.procs[1].wait(TIMEOUT), -signal.SIGKILL)
        # Rank 0's next collective fails; it waits for the gang to be stopped, as the operator does.
        gang.wait_for(lambda: "rank=0 training failed" in gang.log(0))
        gang.procs[0].send_signal(signal.SIGTERM)
        self.assertEqual(gang.procs[0].wait(10), 128 + signal.SIGTERM, gang.dump())
        self.assertNotIn("epoch=3/", gang.log(0), "the kill came too late to test a resume")

        # The operator restarts the gang with CONVOY_RESUME_FROM, the latest checkpoint reported.
        latest = endpoint.bodies("checkpoint")[-1]
        self.assertEqual(sorted(os.listdir(checkpoints)), [".convoy-checkpoints.json", os.path.basename(latest["path"])])
        restarted = Gang(self.tmp, self.env(endpoint, checkpoints, CONVOY_RESUME_FROM=latest["path"], CONVOY_CHECKPOINT_RETENTION="1"))
        self.addCleanup(restarted.kill)
        self.assertEqual(restarted.wait(), {0: 0, 1: 0}, restarted.dump())
        uninterrupted = epoch_lines(self.gang.log(0), 0)
        for rank in (0, 1):
            log = restarted.log(rank)
            self.assertIn("rank=%d resumed from epoch %d\n" % (rank, latest["epoch"]), log)
            epochs = epoch_lines(log, rank)
            self.assertEqual(sorted(epochs), list(range(latest["epoch"] + 1, EPOCHS + 1)), log)
            # Model, optimizer and data order resume exactly: the same numbers as without the kill.
            self.assertEqual(epochs, {e: uninterrupted[e] for e in epochs}, log)
        # CONVOY_CHECKPOINT_RETENTION=1: the newest checkpoint, and the one resumed from.
        self.assertEqual(sorted(os.listdir(checkpoints)), sorted([".convoy-checkpoints.json", os.path.basename(latest["path"]), "epoch-%d.pt" % EPOCHS]))

    def test_resumes_from_the_newest_checkpoint_without_resume_from(self):
        checkpoints = os.path.join(self.tmp, "newest", "ns", "digits")
        os.makedirs(checkpoints)
        for e in (1, 2):
            shutil.copy(os.path.join(self.checkpoints, "epoch-%d.pt" % e), checkpoints)
        endpoint = Endpoint()
        self.addCleanup(endpoint.close)
        gang = Gang(self.tmp, self.env(endpoint, checkpoints))
        self.addCleanup(gang.kill)
        self.assertEqual(gang.wait(), {0: 0, 1: 0}, gang.dump())
        self.assertIn("rank=0 resumed from epoch 2\n", gang.log(0))
        self.assertEqual(sorted(epoch_lines(gang.log(0), 0)), [3])

    def test_resumes_from_the_last_epoch_and_exits(self):
        # Nothing left to train: both ranks print the checkpoint's accuracy and exit 0 at once. (With
        # PyTorch 1.13 this is where freeing the process group in the wrong order hung at exit.)
        endpoint = Endpoint()
        self.addCleanup(endpoint.close)
        last = os.path.join(self.checkpoints, "epoch-%d.pt" % EPOCHS)
        gang = Gang(self.tmp, self.env(endpoint, os.path.join(self.tmp, "last"), CONVOY_RESUME_FROM=last))
        self.addCleanup(gang.kill)
        self.assertEqual(gang.wait(), {0: 0, 1: 0}, gang.dump())
        for rank in (0, 1):
            self.assertIn("rank=%d resumed from epoch %d\n" % (rank, EPOCHS), gang.log(rank))
            self.assertEqual(epoch_lines(gang.log(rank), rank), {})
            self.assertIn("rank=%d final accuracy=%.4f\n" % (rank, epoch_lines(self.gang.log(0), 0)[EPOCHS][1]), gang.log(rank))
        self.assertEqual(endpoint.bodies("progress")[-1]["epoch"], EPOCHS)

    def test_sigterm_while_waiting_for_the_other_rank(self):
        endpoint = Endpoint()
        self.addCleanup(endpoint.close)
        gang = Gang(self.tmp, self.env(endpoint, os.path.join(self.tmp, "alone")), ranks=(0,))
        self.addCleanup(gang.kill)

        def listening():
            try:
                socket.create_connection(("127.0.0.1", gang.port), timeout=1).close()
                return True
            except OSError:
                return False

        gang.wait_for(listening)  # rank 0 waits for rank 1, which never comes
        time.sleep(1)
        gang.procs[0].send_signal(signal.SIGTERM)
        self.assertEqual(gang.procs[0].wait(10), 128 + signal.SIGTERM, gang.dump())
        self.assertIn("rank=0 SIGTERM: exiting", gang.log(0))


class ElasticTest(unittest.TestCase):
    """Two torchrun agents on 127.0.0.1 with the variables Convoy gives an elastic job's pods
    (PET_NNODES=1:2, c10d rendezvous): one starts alone, a second joins, then is stopped (SIGTERM,
    as when the operator shrinks the job), and the first completes the run. Every epoch is trained
    and checkpointed once, in order, whatever the world: each rendezvous resumes from the latest
    checkpoint."""

    EPOCHS = 4

    def setUp(self):
        require_torch(self.failureException)

    def test_grows_and_shrinks_and_the_epochs_continue(self):
        tmp = tempfile.mkdtemp(prefix="convoy-elastic-")
        self.addCleanup(shutil.rmtree, tmp, True)
        endpoint = Endpoint()
        self.addCleanup(endpoint.close)
        checkpoints = os.path.join(tmp, "ns", "digits")
        # Rank 0 waits after each epoch while the hold file is there: each change of the world
        # comes after the epochs the test waits for, before the run ends.
        hold = os.path.join(tmp, "hold")
        open(hold, "w").close()
        env = pod_env(tmp, endpoint, checkpoints, EPOCHS=str(self.EPOCHS), CONVOY_EXAMPLE_HOLD_FILE=hold,
                      PET_NNODES="1:2", PET_RDZV_BACKEND="c10d", PET_RDZV_ENDPOINT="127.0.0.1:%d" % free_port(),
                      PET_RDZV_ID="digits-uid", PET_MAX_RESTARTS="100", TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1",
                      # Start without waiting 30 s for more nodes; see new ones within 1 s.
                      PET_RDZV_CONF="last_call_timeout=1", PET_MONITOR_INTERVAL="1")
        agents = []
        for name in ("first", "second"):
            log = os.path.join(tmp, name + ".log")
            open(log, "w").close()
            agents.append((name, log))

        def logs():
            out = ""
            for name, log in agents:
                with open(log) as f:
                    out += "--- %s agent:\n%s\n" % (name, f.read())
            return out

        def start(name):
            with open(dict(agents)[name], "w") as out:
                proc = subprocess.Popen([sys.executable, TRAIN], env=env, stdout=out, stderr=subprocess.STDOUT)
            self.addCleanup(lambda: proc.poll() is None and (proc.kill(), proc.wait()))
            return proc

        def wait_for(what, why):
            deadline = time.monotonic() + TIMEOUT
            while not what():
                if time.monotonic() > deadline or first.poll() is not None:
                    raise AssertionError("waiting for %s:\n%s" % (why, logs()))
                time.sleep(0.1)

        def starts():
            """(world, epoch) of each rendezvous, from rank 0's lines."""
            return [(int(w), int(e)) for w, e in re.findall(r"^rank=0 world=(\d) starts at epoch (\d+)$", logs(), re.M)]

        def checkpointed():
            return [c["epoch"] for c in endpoint.bodies("checkpoint")]

        first = start("first")
        wait_for(lambda: checkpointed() == [1], "epoch 1 on one worker")
        second = start("second")
        wait_for(lambda: len(starts()) == 2, "the second worker to join")
        grown = starts()[1][1]
        wait_for(lambda: checkpointed()[-1:] == [grown], "an epoch on two workers")
        second.send_signal(signal.SIGTERM)
        try:
            self.assertEqual(second.wait(TIMEOUT), 128 + signal.SIGTERM, logs())
            os.remove(hold)
            self.assertEqual(first.wait(TIMEOUT), 0, logs())
        except subprocess.TimeoutExpired:
            raise AssertionError("an agent did not end:\n" + logs())

        # One worker, then two, then one: each rendezvous after the first resumed from the latest
        # checkpoint, and every epoch was trained and checkpointed once, in order.
        self.assertEqual(starts(), [(1, 1), (2, grown), (1, grown + 1)], logs())
        self.assertEqual(checkpointed(), list(range(1, self.EPOCHS + 1)), logs())
        self.assertRegex(logs(), r"rank=0 final accuracy=\d\.\d{4}\n")
        progress = endpoint.bodies("progress")
        self.assertEqual((progress[-1]["epoch"], progress[-1]["totalEpochs"]), (self.EPOCHS, self.EPOCHS))
        rates = [p["samplesPerSecond"] for p in progress if "samplesPerSecond" in p]
        self.assertTrue(rates and all(r > 0 for r in rates), progress)

if __name__ == "__main__":
    unittest.main()
