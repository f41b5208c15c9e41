"""convoy.on_preempt, should_checkpoint and preempted: SIGTERM in a training process (a subprocess
that saves a last checkpoint and exits within a grace period), the handler in this process, and the
operator's checkpoint request read from a reply of the progress endpoint."""

import logging
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest

import support
from support import Recorder

import convoy
from convoy import _preempt

GRACE = 10  # seconds a test gives a process to save and exit after SIGTERM, like terminationGracePeriodSeconds

# A training loop as the README shows it: a step every 10 ms, a last checkpoint when asked.
TRAIN = textwrap.dedent("""
    import os, signal, sys, time
    import convoy

    {before}
    convoy.on_preempt(lambda: print("callback: should_checkpoint=%s" % convoy.should_checkpoint(), flush=True))
    directory = convoy.checkpoint_dir()
    print("ready", flush=True)
    for step in range(1, 100000):
        time.sleep(0.01)  # a training step
        if convoy.should_checkpoint():
            path = os.path.join(directory, "step-%d.pt" % step)
            with open(path, "w") as f:
                f.write("weights after step %d" % step)
            convoy.checkpoint_saved(path, epoch=0)
            if convoy.preempted():
                print("saved", path, flush=True)
                sys.exit(convoy.PREEMPTED_EXIT_CODE)
    sys.exit(3)  # never reached within the test
""")


class SigtermTest(unittest.TestCase):
    def setUp(self):
        self.server, self.tmp = support.pod_environment(self, lambda tmp: os.path.join(tmp, "ns", "job"))

    def start(self, before=""):
        env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(support.HERE), "src"))
        proc = subprocess.Popen([sys.executable, "-c", TRAIN.format(before=before)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(proc.stderr.close)
        self.addCleanup(proc.stdout.close)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        self.assertEqual(proc.stdout.readline(), "ready\n")
        return proc

    def stop(self, proc):
        time.sleep(0.2)  # a few steps
        proc.send_signal(signal.SIGTERM)
        start = time.monotonic()
        try:
            code = proc.wait(GRACE)
        except subprocess.TimeoutExpired:
            proc.kill()
            self.fail("still running %ds after SIGTERM" % GRACE)
        out, err = proc.communicate()
        return code, out, err, time.monotonic() - start

    def test_saves_a_last_checkpoint_and_exits_within_the_grace_period(self):
        code, out, err, took = self.stop(self.start())
        self.assertEqual(code, 143, out + err)
        self.assertLess(took, GRACE)
        lines = out.splitlines()
        self.assertEqual(lines[0], "callback: should_checkpoint=True")
        self.assertTrue(lines[1].startswith("saved "), out)
        path = lines[1].split(" ", 1)[1]
        with open(path) as f:
            self.assertTrue(f.read().startswith("weights after step "))
        self.assertEqual(self.server.bodies("checkpoint"), [{"path": path, "epoch": 0}])
        self.assertIn("SIGTERM", err)  # the warning on the convoy logger

    def test_a_handler_installed_before_is_called_after(self):
        before = 'signal.signal(signal.SIGTERM, lambda signum, frame: print("previous handler", signum, flush=True))'
        code, out, err, _ = self.stop(self.start(before))
        self.assertEqual(code, 143, out + err)
        self.assertEqual(out.splitlines()[:2], ["callback: should_checkpoint=True", "previous handler %d" % signal.SIGTERM])

    def test_without_the_sdk_asked_sigterm_ends_the_process_as_before(self):
        # Importing convoy installs nothing: the default action ends the process at once.
        code = "import convoy, time; print('ready', flush=True); time.sleep(60)"
        env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(support.HERE), "src"))
        proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
        self.addCleanup(proc.stdout.close)
        self.assertEqual(proc.stdout.readline(), "ready\n")
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(GRACE), -signal.SIGTERM)


class HandlerTest(unittest.TestCase):
    """The handler in this process: installed by the first call, SIGTERM sent to this process."""

    def setUp(self):
        self.addCleanup(_preempt._reset)

    def test_callbacks_run_once_and_the_flags_turn(self):
        calls = []
        self.sigterm = support.watch_sigterm(self)
        self.assertFalse(convoy.should_checkpoint())
        self.assertFalse(convoy.preempted())

        @convoy.on_preempt
        def first():
            calls.append("first")
            raise RuntimeError("a broken callback")

        convoy.on_preempt(lambda: calls.append("second"))
        with self.assertLogs("convoy", logging.WARNING) as logs:
            self.sigterm()
        self.assertEqual(calls, ["first", "second"])  # the second ran although the first raised
        self.assertTrue(any("a broken callback" in line for line in logs.output), logs.output)
        self.assertTrue(convoy.should_checkpoint())
        self.assertTrue(convoy.preempted())
        self.sigterm()  # a second SIGTERM runs nothing again
        self.assertEqual(calls, ["first", "second"])
        # Registered after SIGTERM: runs at once.
        convoy.on_preempt(lambda: calls.append("late"))
        self.assertEqual(calls, ["first", "second", "late"])
        # A checkpoint saved does not undo SIGTERM.
        convoy.checkpoint_saved("/nowhere/epoch-1.pt", 1)
        self.assertTrue(convoy.should_checkpoint())

    def test_outside_the_main_thread_it_is_not_installed(self):
        seen = []
        with self.assertLogs("convoy", logging.WARNING) as logs:
            thread = threading.Thread(target=lambda: seen.append(convoy.should_checkpoint()))
            thread.start()
            thread.join()
        self.assertEqual(seen, [False])
        self.assertIn("main thread", logs.output[0])
        self.assertEqual(signal.getsignal(signal.SIGTERM), signal.SIG_DFL)
        convoy.should_checkpoint()  # from the main thread: installed now
        self.assertIsNot(signal.getsignal(signal.SIGTERM), signal.SIG_DFL)


class CheckpointRequestTest(unittest.TestCase):
    """A reply of the progress endpoint with {"checkpointRequested": true} asks for a checkpoint. The
    operator answers 204 with no body today, which asks nothing."""

    def setUp(self):
        self.addCleanup(_preempt._reset)
        self.server = Recorder()
        self.addCleanup(self.server.close)
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        support.set_environ(self, CONVOY_PROGRESS_URL=self.server.url, CONVOY_CHECKPOINT_URI=None,
                            **dict.fromkeys(support.RANK_VARS))
        convoy.configure(min_interval=0)
        self.addCleanup(convoy.configure)

    def test_today_204_asks_nothing(self):
        self.assertTrue(convoy.report(epoch=1))
        self.assertFalse(convoy.should_checkpoint())

    def test_a_request_holds_until_the_next_checkpoint(self):
        self.server.answers = [(200, b'{"checkpointRequested": true}')]
        self.assertTrue(convoy.report(epoch=1))
        self.assertTrue(convoy.should_checkpoint())
        self.assertFalse(convoy.preempted())
        self.assertTrue(convoy.report(epoch=2))  # 204: the request still holds
        self.assertTrue(convoy.should_checkpoint())
        self.assertTrue(convoy.checkpoint_saved("/checkpoints/ns/job/epoch-2.pt", 2))
        self.assertFalse(convoy.should_checkpoint())

    def test_other_bodies_ask_nothing(self):
        for body in (b'{"checkpointRequested": false}', b'{"checkpointRequested": "yes"}', b"[true]", b"not json", b" "):
            with self.subTest(body=body):
                self.server.answers = [(200, body)]
                self.assertTrue(convoy.report(epoch=1))
                self.assertFalse(convoy.should_checkpoint())


if __name__ == "__main__":
    unittest.main()


class IntervalTest(unittest.TestCase):
    """CONVOY_CHECKPOINT_INTERVAL_SECONDS: should_checkpoint() turns True on rank 0 once the interval
    has passed since its latest checkpoint."""

    def setUp(self):
        support.set_environ(self, CONVOY_PROGRESS_URL=None, CONVOY_CHECKPOINT_URI=None, **dict.fromkeys(support.RANK_VARS))
        self.addCleanup(_preempt._reset)
        self.clock = support.checkpoint_interval(self, 60)

    def at(self, now):
        self.clock.now = now
        return convoy.should_checkpoint()

    def test_due_an_interval_after_the_first_ask_then_after_each_checkpoint(self):
        self.assertEqual([self.at(t) for t in (0, 59, 60, 61)], [False, False, True, True])
        convoy.checkpoint_saved("/nowhere/step-61", epoch=0)  # outside Convoy: no post, the clock starts again
        self.assertEqual([self.at(t) for t in (61, 120, 121)], [False, False, True])

    def test_not_on_other_ranks(self):
        os.environ["RANK"] = "1"
        self.assertEqual([self.at(t) for t in (0, 60, 6000)], [False, False, False])

    def test_unset_or_not_a_number_never(self):
        for value in ("", "0"):
            os.environ["CONVOY_CHECKPOINT_INTERVAL_SECONDS"] = value
            self.assertEqual([self.at(t) for t in (0, 60, 6000)], [False, False, False], value)
        os.environ["CONVOY_CHECKPOINT_INTERVAL_SECONDS"] = "often"
        with self.assertLogs("convoy") as logs:
            self.assertEqual([self.at(t) for t in (0, 60, 6000)], [False, False, False])
        self.assertEqual(len(logs.output), 1, logs.output)  # said once, not at every step
