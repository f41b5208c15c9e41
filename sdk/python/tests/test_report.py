"""convoy.Reporter against a real HTTP(S) server on 127.0.0.1."""

import logging
import os
import tempfile
import time
import unittest

import support
from support import FakeClock, Recorder

import convoy


def reporter(env, **kwargs):
    sleeps = []
    kwargs.setdefault("clock", FakeClock())
    r = convoy.Reporter(env=env, sleep=sleeps.append, **kwargs)
    return r, sleeps


class ReportTest(unittest.TestCase):
    def setUp(self):
        self.server = Recorder()
        self.addCleanup(self.server.close)
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.token_file = os.path.join(self.tmp.name, "token")
        with open(self.token_file, "w") as f:
            f.write("token-1\n")
        self.env = {"CONVOY_PROGRESS_URL": self.server.url, "CONVOY_PROGRESS_TOKEN_FILE": self.token_file, "RANK": "0"}

    def test_posts_progress_and_checkpoint(self):
        r, _ = reporter(self.env)
        self.assertTrue(r.report(epoch=3, total_epochs=10, step=1200, metrics={"loss": 0.41, "accuracy": 0.87}))
        self.assertTrue(r.checkpoint_saved("/checkpoints/ns/job/epoch-3.pt", 3))
        path, headers, body = self.server.requests[0]
        self.assertEqual(path, "/v1/namespaces/ns/trainingjobs/job/progress")
        self.assertEqual(headers["Authorization"], "Bearer token-1")
        self.assertEqual(headers["Content-Type"], "application/json")
        self.assertEqual(body, {"epoch": 3, "totalEpochs": 10, "step": 1200, "metrics": {"loss": 0.41, "accuracy": 0.87}})
        path, _, body = self.server.requests[1]
        self.assertEqual(path, "/v1/namespaces/ns/trainingjobs/job/checkpoint")
        self.assertEqual(body, {"path": "/checkpoints/ns/job/epoch-3.pt", "epoch": 3})

    def test_leaves_out_what_is_not_given(self):
        r, _ = reporter(self.env)
        with self.assertLogs("convoy", logging.WARNING) as logs:
            r.report(metrics={"loss": 1, "bad": float("nan"), "worse": float("inf"), "odd": "x"})
        self.assertEqual(len(logs.output), 3)
        self.assertEqual(self.server.bodies("progress"), [{"metrics": {"loss": 1.0}}])

    def test_checkpoint_with_metrics_reports_them_first(self):
        r, _ = reporter(self.env)
        r.checkpoint_saved("/c/epoch-2.pt", 2, metrics={"accuracy": 0.5})
        self.assertEqual([p.rsplit("/", 1)[1] for p, _, _ in self.server.requests], ["progress", "checkpoint"])
        self.assertEqual(self.server.bodies("progress"), [{"epoch": 2, "metrics": {"accuracy": 0.5}}])

    def test_only_rank_zero_reports(self):
        for rank, all_ranks, posted in [("0", False, True), ("1", False, False), ("1", True, True)]:
            with self.subTest(rank=rank, all_ranks=all_ranks):
                self.server.requests.clear()
                r, _ = reporter(dict(self.env, RANK=rank))
                self.assertEqual(r.report(epoch=1, all_ranks=all_ranks), posted)
                self.assertEqual(r.checkpoint_saved("/c/epoch-1.pt", 1, all_ranks=all_ranks), posted)
                self.assertEqual(len(self.server.requests), 2 if posted else 0)

    def test_rank_variables(self):
        self.assertEqual(convoy.rank({}), 0)
        self.assertEqual(convoy.rank({"RANK": "2"}), 2)
        self.assertEqual(convoy.rank({"JAX_PROCESS_ID": "3"}), 3)
        self.assertEqual(convoy.rank({"RANK": "0", "OMPI_COMM_WORLD_RANK": "5"}), 5)

    def test_throttles_all_but_final(self):
        clock = FakeClock()
        r, _ = reporter(self.env, min_interval=5, clock=clock)
        self.assertTrue(r.report(epoch=1))
        clock.now += 1
        self.assertFalse(r.report(epoch=2))  # within 5 s: dropped
        self.assertTrue(r.checkpoint_saved("/c/epoch-2.pt", 2))  # checkpoints are never dropped
        clock.now += 4.5
        self.assertTrue(r.report(epoch=3))
        clock.now += 0.1
        self.assertTrue(r.report(epoch=4, total_epochs=4, final=True))
        self.assertEqual([b.get("epoch") for b in self.server.bodies("progress")], [1, 3, 4])

    def test_reports_samples_per_second(self):
        r, _ = reporter(self.env, min_interval=0)
        self.assertTrue(r.report(epoch=1, samples_per_second=1234))
        with self.assertLogs("convoy", logging.WARNING) as logs:
            for bad in (float("nan"), float("inf"), -1.0, "fast"):
                self.assertTrue(r.report(epoch=2, samples_per_second=bad))
        self.assertEqual(len(logs.output), 4)
        self.assertEqual(self.server.bodies("progress"), [{"epoch": 1, "samplesPerSecond": 1234.0}] + [{"epoch": 2}] * 4)
        self.assertIsInstance(self.server.bodies("progress")[0]["samplesPerSecond"], float)

    def test_an_operator_without_samples_per_second_gets_the_rest(self):
        # What an operator older than the field answers (operator/pkg/progress/server.go).
        refusal = b'the body is not a report: json: unknown field "samplesPerSecond"; see the protocol in the operator\'s README\n'
        self.server.answers = [(400, refusal)]
        r, _ = reporter(self.env, min_interval=0)
        with self.assertLogs("convoy", logging.WARNING) as logs:
            self.assertTrue(r.report(epoch=1, metrics={"loss": 0.5}, samples_per_second=100.0))
        self.assertIn("older than this SDK", logs.output[0])
        self.assertTrue(r.report(epoch=2, samples_per_second=100.0))  # left out from then on, without a warning
        self.assertEqual(self.server.bodies("progress"), [
            {"epoch": 1, "metrics": {"loss": 0.5}, "samplesPerSecond": 100.0},
            {"epoch": 1, "metrics": {"loss": 0.5}},
            {"epoch": 2},
        ])
        # Another 400 is not a reason to post again.
        self.server.answers = [(400, b"epoch must not be negative")]
        with self.assertLogs("convoy", logging.WARNING):
            self.assertFalse(reporter(self.env)[0].report(epoch=3, samples_per_second=1.0))
        self.assertEqual(len(self.server.bodies("progress")), 4)

    def test_rereads_the_token(self):
        clock = FakeClock()
        r, _ = reporter(self.env, clock=clock)
        r.report(epoch=1)
        with open(self.token_file, "w") as f:
            f.write("token-2")
        clock.now += 60
        r.report(epoch=2)
        self.assertEqual([h["Authorization"] for _, h, _ in self.server.requests], ["Bearer token-1", "Bearer token-2"])

    def test_retries_5xx_with_backoff_then_succeeds(self):
        self.server.answers = [503, 500]
        r, sleeps = reporter(self.env, backoff=0.5)
        with self.assertLogs("convoy", logging.WARNING):
            self.assertTrue(r.report(epoch=1))
        self.assertEqual(len(self.server.requests), 3)
        self.assertEqual(sleeps, [0.5, 1.0])

    def test_gives_up_after_retries(self):
        self.server.answers = [503] * 10
        r, sleeps = reporter(self.env, retries=2)
        with self.assertLogs("convoy", logging.WARNING) as logs:
            self.assertFalse(r.checkpoint_saved("/c/epoch-1.pt", 1))
        self.assertEqual(len(self.server.requests), 3)
        self.assertEqual(len(sleeps), 2)
        self.assertIn("gave up", logs.output[-1])

    def test_does_not_retry_4xx(self):
        for code in (400, 401, 403, 404, 409):
            with self.subTest(code=code):
                self.server.requests.clear()
                self.server.answers = [code]
                r, sleeps = reporter(self.env)
                with self.assertLogs("convoy", logging.WARNING):
                    self.assertFalse(r.report(epoch=1))
                self.assertEqual((len(self.server.requests), sleeps), (1, []))

    def test_connection_refused_does_not_raise(self):
        env = dict(self.env, CONVOY_PROGRESS_URL="http://127.0.0.1:%d/v1/namespaces/ns/trainingjobs/job" % support.closed_port())
        r, sleeps = reporter(env, retries=3)
        with self.assertLogs("convoy", logging.WARNING):
            self.assertFalse(r.report(epoch=1))
            self.assertFalse(r.checkpoint_saved("/c/epoch-1.pt", 1))
        self.assertEqual(sleeps, [0.5, 1.0, 2.0] * 2)

    def test_real_backoff_is_bounded(self):
        env = dict(self.env, CONVOY_PROGRESS_URL="http://127.0.0.1:%d/x" % support.closed_port())
        r = convoy.Reporter(env=env, retries=2, backoff=0.05)
        start = time.monotonic()
        with self.assertLogs("convoy", logging.WARNING):
            self.assertFalse(r.report(epoch=1))
        self.assertLess(time.monotonic() - start, 2)

    def test_unreadable_token_does_not_raise(self):
        r, _ = reporter(dict(self.env, CONVOY_PROGRESS_TOKEN_FILE=os.path.join(self.tmp.name, "missing")))
        with self.assertLogs("convoy", logging.WARNING):
            self.assertFalse(r.report(epoch=1))
        self.assertEqual(self.server.requests, [])

    def test_nothing_without_url(self):
        r, _ = reporter({"RANK": "0"})
        self.assertFalse(r.report(epoch=1, final=True))
        self.assertFalse(r.checkpoint_saved("/c/epoch-1.pt", 1))
        env = dict(os.environ)
        os.environ.pop("CONVOY_PROGRESS_URL", None)
        try:
            self.assertFalse(convoy.report(epoch=1))
            self.assertFalse(convoy.checkpoint_saved("/c/epoch-1.pt", 1))
        finally:
            os.environ.clear()
            os.environ.update(env)

    def test_bad_arguments_do_not_raise(self):
        with self.assertLogs("convoy", logging.WARNING):
            self.assertFalse(reporter(self.env)[0].report(epoch="three"))
        with self.assertLogs("convoy", logging.WARNING):
            self.assertFalse(reporter(self.env)[0].report(epoch=1, metrics=["not", "a", "mapping"]))
        with self.assertLogs("convoy", logging.WARNING):
            self.assertFalse(reporter(self.env)[0].checkpoint_saved("/c/epoch-x.pt", "x"))
        with self.assertLogs("convoy", logging.WARNING):
            self.assertFalse(convoy.Reporter(env=dict(self.env, CONVOY_PROGRESS_URL="nonsense")).report(epoch=1))

    def test_module_functions_read_the_environment(self):
        env = dict(os.environ)
        os.environ.update(self.env)
        try:
            convoy.configure(min_interval=0)
            self.assertTrue(convoy.report(epoch=1, metrics={"loss": 2.0}))
            self.assertTrue(convoy.checkpoint_saved("/c/epoch-1.pt", 1))
        finally:
            os.environ.clear()
            os.environ.update(env)
            convoy.configure()
        self.assertEqual(len(self.server.requests), 2)


class ThroughputTest(unittest.TestCase):
    def test_samples_over_the_seconds_since_the_window_began(self):
        clock = FakeClock()
        meter = convoy.Throughput(clock=clock)
        self.assertIsNone(meter.rate())  # no samples yet
        clock.now += 2
        meter.add(64)
        meter.add(None)  # a batch of unknown size
        meter.add(64)
        self.assertEqual(meter.rate(), 64.0)
        clock.now += 10  # an evaluation, left out by start()
        meter.start()
        clock.now += 0.5
        meter.add(200)
        self.assertEqual(meter.rate(), 400.0)
        self.assertIsNone(meter.rate())  # no time has passed, nothing was added

    def test_batch_size(self):
        class Tensor:
            def __init__(self, *shape):
                self.shape = shape

        batch_size = convoy._throughput.batch_size
        for batch, want in [(Tensor(32, 64), 32), ((Tensor(8, 3), Tensor(8)), 8), ([Tensor(5)], 5),
                            ({"input_ids": Tensor(16, 128), "labels": Tensor(16)}, 16), (Tensor(), None),
                            (None, None), ([], None), ("text", None), ([[Tensor(4)]], 4)]:
            with self.subTest(batch=batch):
                self.assertEqual(batch_size(batch), want)


class TLSTest(unittest.TestCase):
    """HTTPS with the CA in CONVOY_PROGRESS_CA_FILE, as the operator serves it."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        if not support.make_certs(cls.tmp.name):
            cls.tmp.cleanup()
            raise unittest.SkipTest("the openssl CLI is not installed: cannot make a certificate")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def setUp(self):
        self.server = Recorder(tls_context=support.server_tls_context(self.tmp.name))
        self.addCleanup(self.server.close)

    def test_trusts_the_ca_file(self):
        r, _ = reporter({"CONVOY_PROGRESS_URL": self.server.url, "CONVOY_PROGRESS_CA_FILE": os.path.join(self.tmp.name, "ca.crt")})
        self.assertTrue(r.report(epoch=1, metrics={"accuracy": 0.5}))
        self.assertTrue(r.checkpoint_saved("/c/epoch-1.pt", 1))
        self.assertEqual(self.server.bodies("checkpoint"), [{"path": "/c/epoch-1.pt", "epoch": 1}])

    def test_refuses_an_unknown_ca_without_retrying(self):
        r, sleeps = reporter({"CONVOY_PROGRESS_URL": self.server.url})  # the system's CAs only
        with self.assertLogs("convoy", logging.WARNING) as logs:
            self.assertFalse(r.report(epoch=1))
        self.assertEqual(sleeps, [])
        self.assertIn("CONVOY_PROGRESS_CA_FILE", logs.output[0])
        self.assertEqual(self.server.requests, [])

    def test_missing_ca_file_does_not_raise(self):
        r, _ = reporter({"CONVOY_PROGRESS_URL": self.server.url, "CONVOY_PROGRESS_CA_FILE": os.path.join(self.tmp.name, "none.crt")})
        with self.assertLogs("convoy", logging.WARNING):
            self.assertFalse(r.report(epoch=1))


if __name__ == "__main__":
    unittest.main()
