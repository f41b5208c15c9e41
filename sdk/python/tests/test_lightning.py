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
        support.set_environ(self, CONVOY_PROGRESS_URL=self.server.url, **dict.fromkeys(support.RANK_VARS))
        convoy.configure(min_interval=0)
        self.addCleanup(convoy.configure)

    def trainer(self, **kwargs):
        values = dict(global_rank=0, current_epoch=0, max_epochs=2, global_step=0, callback_metrics={},
                      checkpoint_callback=types.SimpleNamespace(last_model_path="", best_model_path=""))
        values.update(kwargs)
        return types.SimpleNamespace(**values)

    def save(self, trainer, name):
        """What ModelCheckpoint does in its on_train_epoch_end, after the other callbacks'."""
        path = os.path.join(self.dir, name)
        open(path, "w").close()
        trainer.checkpoint_callback.best_model_path = path
        return path

    def epoch(self, callback, trainer, metrics):
        callback.on_train_epoch_start(trainer, None)
        for _ in range(4):
            callback.on_train_batch_end(trainer, None, {"loss": 0.5}, None, 0)
            trainer.global_step += 1
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

    def test_only_global_rank_zero_reports(self):
        callback = convoy.lightning._Reporting()
        trainer = self.trainer(global_rank=1)
        callback.on_train_start(trainer, None)
        self.epoch(callback, trainer, {"loss": 0.7})
        self.save(trainer, "epoch=0-step=4.ckpt")
        callback.on_train_end(trainer, None)
        self.assertEqual(self.server.requests, [])


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
