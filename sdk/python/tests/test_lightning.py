"""convoy.lightning: what its callback reports, from a stand-in trainer everywhere and, where
Lightning is installed, from a real Trainer fitting a tiny model for 2 epochs, then resuming from
the checkpoint it reported."""

import importlib.util
import logging
import os
import tempfile
import types
import unittest
import warnings

import support
from support import Recorder

import convoy
import convoy.lightning

HAVE_LIGHTNING = bool(importlib.util.find_spec("lightning") or importlib.util.find_spec("pytorch_lightning"))


class WithoutLightningTest(unittest.TestCase):
    def test_imports_and_names_the_package_to_install(self):
        module = support.import_without("convoy.lightning", "lightning", "pytorch_lightning")
        with self.assertRaises(ImportError) as caught:
            module.ConvoyCallback(metric_names={"val_acc": "accuracy"})
        self.assertIn("pip install lightning", str(caught.exception))
        support.set_environ(self, CONVOY_RESUME_FROM=None)
        self.assertIsNone(module.resume_path())

    def test_resume_path(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "epoch=0-step=4.ckpt")
            open(path, "w").close()
            support.set_environ(self, CONVOY_RESUME_FROM=path)
            self.assertEqual(convoy.lightning.resume_path(), path)
            os.environ["CONVOY_RESUME_FROM"] = "file://" + path
            self.assertEqual(convoy.lightning.resume_path(), path)
            os.environ["CONVOY_RESUME_FROM"] = os.path.join(tmp, "gone.ckpt")
            with self.assertLogs("convoy", logging.WARNING):
                self.assertIsNone(convoy.lightning.resume_path())
            del os.environ["CONVOY_RESUME_FROM"]
            self.assertIsNone(convoy.lightning.resume_path())


class StandInTrainerTest(unittest.TestCase):
    """The hooks called in Lightning's order by hand, with a trainer of the attributes they read."""

    def setUp(self):
        self.server = Recorder()
        self.addCleanup(self.server.close)
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = tmp.name
        support.set_environ(self, CONVOY_PROGRESS_URL=self.server.url, CONVOY_CHECKPOINT_URI=self.dir,
                            CONVOY_CHECKPOINT_RETENTION=None, CONVOY_RESUME_FROM=None, **dict.fromkeys(support.RANK_VARS))
        convoy.configure(min_interval=0)
        self.addCleanup(convoy.configure)
        self.sigterm = support.watch_sigterm(self)

    def trainer(self, **kwargs):
        values = dict(global_rank=0, world_size=1, current_epoch=0, max_epochs=2, global_step=0, callback_metrics={},
                      checkpoint_callback=types.SimpleNamespace(last_model_path="", best_model_path="", dirpath=self.dir))
        values.update(kwargs)
        trainer = types.SimpleNamespace(**values)

        def save_checkpoint(path):  # Trainer.save_checkpoint, on every rank; rank 0 writes
            trainer.saved.append(path)
            if trainer.global_rank == 0:
                with open(path, "w") as f:
                    f.write("step %d" % trainer.global_step)

        trainer.saved = []
        trainer.save_checkpoint = save_checkpoint
        return trainer

    def save(self, trainer, name):
        """What ModelCheckpoint does in its on_train_epoch_end, after the other callbacks'."""
        path = os.path.join(self.dir, name)
        open(path, "w").close()
        trainer.checkpoint_callback.best_model_path = path
        return path

    def epoch(self, callback, trainer, metrics, sigterm_after=None):
        callback.on_train_epoch_start(trainer, None)
        for batch in range(4):
            trainer.global_step += 1
            if batch == sigterm_after:
                self.sigterm()
            callback.on_train_batch_end(trainer, None, {"loss": 0.5}, None, batch)
        trainer.callback_metrics = metrics
        callback.on_train_epoch_end(trainer, None)

    def test_reports_each_epoch_its_checkpoint_and_the_end(self):
        callback = convoy.lightning._Reporting(metric_names={"val_acc": "accuracy"})
        trainer = self.trainer()
        callback.on_train_start(trainer, None)
        self.epoch(callback, trainer, {"loss": 0.9, "val_acc": 0.5, "lr": 0.1, "hist": [1, 2]})
        first = self.save(trainer, "epoch=0-step=4.ckpt")
        trainer.current_epoch = 1
        self.epoch(callback, trainer, {"loss": 0.7, "val_acc": 0.75, "lr": 0.1, "hist": [1, 2]})
        second = self.save(trainer, "epoch=1-step=8.ckpt")
        trainer.current_epoch = 2
        callback.on_train_end(trainer, None)
        self.assertEqual(self.server.bodies("progress"), [
            {"epoch": 1, "totalEpochs": 2, "step": 4, "metrics": {"loss": 0.9, "accuracy": 0.5, "lr": 0.1}},
            {"epoch": 2, "totalEpochs": 2, "step": 8, "metrics": {"loss": 0.7, "accuracy": 0.75, "lr": 0.1}},
            {"epoch": 2, "totalEpochs": 2, "step": 8, "metrics": {"loss": 0.7, "accuracy": 0.75, "lr": 0.1}},
        ])
        self.assertEqual(self.server.bodies("checkpoint"), [{"path": first, "epoch": 1}, {"path": second, "epoch": 2}])

    def test_resumed_epoch_end_and_its_checkpoint_are_not_reported_again(self):
        callback = convoy.lightning._Reporting()
        trainer = self.trainer(current_epoch=1, global_step=4)
        self.save(trainer, "epoch=0-step=4.ckpt")  # restored with the checkpoint fit resumed from
        callback.on_train_start(trainer, None)
        trainer.current_epoch = 0
        callback.on_train_epoch_end(trainer, None)  # the restored epoch's end, no batch trained
        trainer.current_epoch = 1
        self.epoch(callback, trainer, {"loss": 0.7})
        trainer.current_epoch = 2
        callback.on_train_end(trainer, None)
        self.assertEqual([b["epoch"] for b in self.server.bodies("progress")], [2, 2])
        self.assertEqual(self.server.bodies("checkpoint"), [])

    def test_a_rewritten_last_checkpoint_is_reported_again(self):
        callback = convoy.lightning._Reporting()
        trainer = self.trainer()
        last = os.path.join(self.dir, "last.ckpt")
        callback.on_train_start(trainer, None)
        for epoch in (0, 1):
            trainer.current_epoch = epoch
            self.epoch(callback, trainer, {"loss": 0.7})
            with open(last, "w") as f:
                f.write(str(epoch))
            os.utime(last, ns=(epoch * 10**9, epoch * 10**9))
            trainer.checkpoint_callback.last_model_path = last
        trainer.current_epoch = 2
        callback.on_train_end(trainer, None)
        self.assertEqual(self.server.bodies("checkpoint"), [{"path": last, "epoch": 1}, {"path": last, "epoch": 2}])

    def test_reports_the_epochs_training_samples_per_second(self):
        class Tensor:
            def __init__(self, *shape):
                self.shape = shape

        clock = support.FakeClock()
        callback = convoy.lightning._Reporting()
        callback._throughput.clock = clock
        trainer = self.trainer(world_size=2, strategy=types.SimpleNamespace(reduce_boolean_decision=lambda decision, all: decision))
        callback.on_train_start(trainer, None)
        clock.now += 30  # starting up is not training
        for epoch, batch, seconds in [(0, (Tensor(8, 64), Tensor(8)), 0.5), (1, {"x": Tensor(4, 64)}, 1.0), (2, "unknown", 1.0)]:
            trainer.current_epoch = epoch
            callback.on_train_epoch_start(trainer, None)
            for i in range(4):
                clock.now += seconds
                trainer.global_step += 1
                callback.on_train_batch_end(trainer, None, None, batch, i)
            callback.on_train_epoch_end(trainer, None)
            clock.now += 10  # validation is not training
        callback.on_train_end(trainer, None)
        # 4 batches of 8 on each of 2 ranks in 2 s, then of 4 in 4 s; none for batches of unknown size.
        self.assertEqual([b.get("samplesPerSecond") for b in self.server.bodies("progress")], [32.0, 8.0, None, None])

    def test_only_global_rank_zero_reports(self):
        callback = convoy.lightning._Reporting()
        trainer = self.trainer(global_rank=1)
        callback.on_train_start(trainer, None)
        self.epoch(callback, trainer, {"loss": 0.7})
        self.save(trainer, "epoch=0-step=4.ckpt")
        callback.on_train_end(trainer, None)
        self.assertEqual(self.server.requests, [])


    def test_on_sigterm_saves_reports_and_exits_at_the_end_of_the_batch(self):
        os.environ["CONVOY_CHECKPOINT_RETENTION"] = "1"
        callback = convoy.lightning._Reporting()
        trainer = self.trainer()
        callback.on_train_start(trainer, None)
        self.epoch(callback, trainer, {"loss": 0.9})
        best = self.save(trainer, "epoch=0-step=4.ckpt")
        trainer.current_epoch = 1
        with self.assertRaises(SystemExit) as caught:
            self.epoch(callback, trainer, {"loss": 0.7}, sigterm_after=1)
        self.assertEqual(caught.exception.code, 143)
        last = os.path.join(self.dir, "convoy-epoch=1-step=6.ckpt")
        self.assertEqual(trainer.saved, [last])
        self.assertEqual(self.server.bodies("checkpoint"), [{"path": best, "epoch": 1}, {"path": last, "epoch": 1}])
        # Retention 1: the last checkpoint, and the ModelCheckpoint's best, never deleted.
        self.assertEqual(sorted(os.listdir(self.dir)), [".convoy-checkpoints.json", "convoy-epoch=1-step=6.ckpt", "epoch=0-step=4.ckpt"])
        # Lightning then tears down: on_exception leaves the exit code as it is.
        callback.on_exception(trainer, None, caught.exception)
        self.assertEqual((caught.exception.code, trainer.saved), (143, [last]))

    def test_every_rank_saves_and_only_rank_zero_reports(self):
        trainer = self.trainer(global_rank=1)
        callback = convoy.lightning._Reporting()
        with self.assertRaises(SystemExit):
            self.epoch(callback, trainer, {"loss": 0.7}, sigterm_after=0)
        self.assertEqual(trainer.saved, [os.path.join(self.dir, "convoy-epoch=0-step=1.ckpt")])
        self.assertEqual(self.server.requests, [])

    def test_ranks_agree_on_what_to_do(self):
        """A rank that has not seen SIGTERM saves and exits with the rank that has."""
        decisions = []

        def reduce_boolean_decision(decision, all=True):  # the other rank was sent SIGTERM
            decisions.append((decision, all))
            return True

        trainer = self.trainer(world_size=2, strategy=types.SimpleNamespace(reduce_boolean_decision=reduce_boolean_decision))
        with self.assertRaises(SystemExit) as caught:
            convoy.lightning._Reporting().on_train_batch_end(trainer, None, None, None, 0)
        self.assertEqual(caught.exception.code, 143)
        self.assertEqual(decisions, [(False, False), (False, False)])
        self.assertEqual(len(trainer.saved), 1)

    def test_a_checkpoint_request_saves_and_training_goes_on(self):
        callback = convoy.lightning._Reporting()
        trainer = self.trainer()
        callback.on_train_start(trainer, None)
        convoy._preempt.request_checkpoint()  # as a reply of the operator's would
        self.epoch(callback, trainer, {"loss": 0.9})
        path = os.path.join(self.dir, "convoy-epoch=0-step=1.ckpt")
        self.assertEqual((trainer.saved, self.server.bodies("checkpoint")), ([path], [{"path": path, "epoch": 0}]))
        self.assertFalse(convoy.should_checkpoint())

    def test_saves_at_the_batch_end_an_interval_after_the_latest_checkpoint(self):
        clock = support.checkpoint_interval(self, 60)
        callback = convoy.lightning._Reporting()
        trainer = self.trainer()
        callback.on_train_start(trainer, None)
        batch_end = callback.on_train_batch_end

        def fifteen_seconds_a_batch(*args):
            clock.now += 15
            batch_end(*args)

        callback.on_train_batch_end = fifteen_seconds_a_batch
        self.epoch(callback, trainer, {"loss": 0.9})  # batches end at 15 (the interval starts), 30, 45, 60 s
        epoch_end = self.save(trainer, "epoch=0-step=4.ckpt")  # reported at 60 s: the interval starts again
        trainer.current_epoch = 1
        self.epoch(callback, trainer, {"loss": 0.8})  # 75, 90, 105, 120 s: an interval since 60 s
        path = os.path.join(self.dir, "convoy-epoch=1-step=8.ckpt")
        self.assertEqual(trainer.saved, [path])
        self.assertEqual(self.server.bodies("checkpoint"), [{"path": epoch_end, "epoch": 1}, {"path": path, "epoch": 1}])

    def test_lightnings_own_sigterm_exit_saves_and_exits_143(self):
        """Lightning raises SIGTERMException (a SystemExit of code None, exit status 0) after a
        validation that SIGTERM came during: on_exception saves and makes it 143."""
        callback = convoy.lightning._Reporting()
        trainer = self.trainer(global_step=4)
        self.sigterm()
        exception = SystemExit()
        callback.on_exception(trainer, None, exception)
        self.assertEqual(exception.code, 143)
        self.assertEqual(trainer.saved, [os.path.join(self.dir, "convoy-epoch=0-step=4.ckpt")])
        other = ValueError("not a stop")
        callback.on_exception(trainer, None, other)
        self.assertEqual(len(trainer.saved), 1)


@unittest.skipUnless(HAVE_LIGHTNING, "needs lightning (pip install lightning)")
class LightningTrainerTest(unittest.TestCase):
    """A real Trainer in a pod's environment: the operator's endpoint (the Recorder) and a checkpoint
    directory, then CONVOY_RESUME_FROM set to the checkpoint reported after epoch 1."""

    def setUp(self):
        self.server, tmp = support.pod_environment(self, lambda tmp: os.path.join(tmp, "ns", "job"))
        self.checkpoints = os.path.join(tmp, "ns", "job")
        for name in ("lightning.pytorch", "pytorch_lightning"):
            logger = logging.getLogger(name)
            self.addCleanup(logger.setLevel, logger.level)
            logger.setLevel(logging.WARNING)

    def fit(self):
        """Fits a linear classifier on 64 random samples, 4 batches an epoch, for 2 epochs, with the
        callback and a ModelCheckpoint in convoy.checkpoint_dir(), as a pod's training code would;
        returns the model, which recorded (current_epoch, global_step) at each training batch."""
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        try:
            import lightning.pytorch as pl
        except ImportError:
            import pytorch_lightning as pl

        class Classifier(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.layer = torch.nn.Linear(4, 2)
                self.batches = []

            def training_step(self, batch, batch_idx):
                x, y = batch
                loss = torch.nn.functional.cross_entropy(self.layer(x), y)
                self.log("loss", loss, on_step=False, on_epoch=True)
                self.batches.append((self.trainer.current_epoch, self.trainer.global_step))
                return loss

            def validation_step(self, batch, batch_idx):
                x, y = batch
                self.log("val_acc", (self.layer(x).argmax(1) == y).float().mean())

            def configure_optimizers(self):
                return torch.optim.SGD(self.parameters(), lr=0.1)

        torch.manual_seed(0)
        x = torch.randn(64, 4)
        y = (x[:, 0] > 0).long()
        model = Classifier()
        trainer = pl.Trainer(
            max_epochs=2, accelerator="auto", devices=1, logger=False, enable_progress_bar=False,
            enable_model_summary=False, num_sanity_val_steps=0,
            callbacks=[convoy.lightning.ConvoyCallback(metric_names={"val_acc": "accuracy"}),
                       pl.callbacks.ModelCheckpoint(dirpath=convoy.checkpoint_dir(), save_top_k=-1)],
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # few batches, no workers: Lightning's advice
            trainer.fit(model, DataLoader(TensorDataset(x, y), batch_size=16),
                        DataLoader(TensorDataset(x[:32], y[:32]), batch_size=32),
                        ckpt_path=convoy.lightning.resume_path())
        return model

    def test_reports_two_epochs_then_resumes_from_the_reported_checkpoint(self):
        model = self.fit()
        self.assertEqual([epoch for epoch, _ in model.batches], [0] * 4 + [1] * 4)
        progress = self.server.bodies("progress")
        self.assertEqual([(b["epoch"], b["totalEpochs"], b["step"]) for b in progress], [(1, 2, 4), (2, 2, 8), (2, 2, 8)])
        for body in progress:
            self.assertIsInstance(body["metrics"]["loss"], float)
            self.assertIsInstance(body["metrics"]["accuracy"], float)
            self.assertNotIn("val_acc", body["metrics"])
        checkpoints = self.server.bodies("checkpoint")
        self.assertEqual([c["epoch"] for c in checkpoints], [1, 2])
        for c in checkpoints:
            self.assertTrue(os.path.isfile(c["path"]), c["path"])
            self.assertEqual(os.path.dirname(c["path"]), os.path.realpath(self.checkpoints))
        self.assertTrue(all(h["Authorization"] == "Bearer token-1" for _, h, _ in self.server.requests))

        # The gang restarts: the operator gives back the checkpoint reported after epoch 1.
        self.server.requests.clear()
        os.environ["CONVOY_RESUME_FROM"] = checkpoints[0]["path"]
        model = self.fit()
        self.assertEqual(model.batches, [(1, 4), (1, 5), (1, 6), (1, 7)])  # epoch 2 only, from step 4
        progress = self.server.bodies("progress")
        self.assertEqual([(b["epoch"], b["totalEpochs"], b["step"]) for b in progress], [(2, 2, 8), (2, 2, 8)])
        checkpoints = self.server.bodies("checkpoint")
        self.assertEqual(checkpoints[-1]["epoch"], 2)
        self.assertTrue(os.path.isfile(checkpoints[-1]["path"]), checkpoints[-1]["path"])


if __name__ == "__main__":
    unittest.main()
