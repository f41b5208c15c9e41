"""convoy.keras: what its callback reports, from stand-in calls everywhere and, where Keras is
installed with a backend, from model.fit training a tiny model for 2 epochs."""

import importlib.util
import os
import tempfile
import types
import unittest

import support
from support import Recorder

import convoy
import convoy.keras

HAVE_KERAS = bool(importlib.util.find_spec("keras") or importlib.util.find_spec("tensorflow"))


class WithoutKerasTest(unittest.TestCase):
    def test_imports_and_names_the_package_to_install(self):
        module = support.import_without("convoy.keras", "keras", "tensorflow")
        with self.assertRaises(ImportError) as caught:
            module.ConvoyCallback()
        self.assertIn("pip install keras", str(caught.exception))


class ReportingTest(unittest.TestCase):
    def setUp(self):
        self.server = Recorder()
        self.addCleanup(self.server.close)
        support.set_environ(self, CONVOY_PROGRESS_URL=self.server.url, **dict.fromkeys(support.RANK_VARS))
        convoy.configure(min_interval=0)  # every report posted, to see them all
        self.addCleanup(convoy.configure)
        self.sigterm = support.watch_sigterm(self)

    def test_stand_in_fit(self):
        """The hooks called as model.fit(epochs=2, validation_data=...) calls them."""
        callback = convoy.keras._Reporting()
        callback.params = {"epochs": 2, "steps": 4, "verbose": 0}
        callback.on_epoch_end(0, {"loss": 0.9, "accuracy": 0.5, "val_loss": 1.0, "val_accuracy": 0.4, "lr": 0.01})
        callback.on_epoch_end(1, {"loss": 0.8, "accuracy": 0.6, "val_loss": 0.95, "val_accuracy": 0.5, "lr": 0.01})
        callback.on_train_end({"loss": 0.8, "accuracy": 0.6, "val_loss": 0.95, "val_accuracy": 0.5, "lr": 0.01})
        self.assertEqual(self.server.bodies("progress"), [
            {"epoch": 1, "totalEpochs": 2, "metrics": {"loss": 1.0, "accuracy": 0.4, "lr": 0.01}},
            {"epoch": 2, "totalEpochs": 2, "metrics": {"loss": 0.95, "accuracy": 0.5, "lr": 0.01}},
            {"epoch": 2, "totalEpochs": 2, "metrics": {"loss": 0.95, "accuracy": 0.5, "lr": 0.01}},
        ])

    def test_without_validation_the_training_metrics(self):
        callback = convoy.keras._Reporting()
        callback.params = {"epochs": 1}
        callback.on_epoch_end(0, {"loss": 0.9, "accuracy": 0.5})
        self.assertEqual(self.server.bodies("progress"), [{"epoch": 1, "totalEpochs": 1, "metrics": {"loss": 0.9, "accuracy": 0.5}}])

    def fit_until_sigterm(self, callback):
        """model.fit's hooks for 2 epochs of 4 batches, SIGTERM during the second batch of epoch 2;
        what model.save was given goes in self.saved."""
        self.saved = []
        callback.model = types.SimpleNamespace(stop_training=False, save=self.saved.append)
        callback.params = {"epochs": 2, "steps": 4}
        for epoch in range(2):
            callback.on_epoch_begin(epoch)
            for batch in range(4):
                if (epoch, batch) == (1, 1):
                    self.sigterm()
                callback.on_train_batch_end(batch, {"loss": 0.5})
            callback.on_epoch_end(epoch, {"loss": 0.5})

    def test_on_sigterm_saves_reports_and_exits_at_the_end_of_the_batch(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        os.environ["CONVOY_CHECKPOINT_URI"] = tmp.name
        callback = convoy.keras._Reporting()
        with self.assertRaises(SystemExit) as caught:
            self.fit_until_sigterm(callback)
        self.assertEqual(caught.exception.code, 143)
        path = os.path.join(tmp.name, "convoy-epoch=1-batch=1.keras")
        self.assertEqual(self.saved, [path])
        self.assertEqual(self.server.bodies("checkpoint"), [{"path": path, "epoch": 1}])
        self.assertTrue(callback.model.stop_training)
        self.assertEqual([b["epoch"] for b in self.server.bodies("progress")], [1])

    def test_saves_at_the_batch_end_an_interval_after_the_latest_checkpoint(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        os.environ["CONVOY_CHECKPOINT_URI"] = tmp.name
        clock = support.checkpoint_interval(self, 60)
        callback, saved = convoy.keras._Reporting(), []
        callback.model = types.SimpleNamespace(stop_training=False, save=saved.append)
        callback.params = {"epochs": 2, "steps": 4}
        for epoch in range(2):
            callback.on_epoch_begin(epoch)
            for batch in range(4):  # batches end every 20 s; the interval starts at the first
                clock.now += 20
                callback.on_train_batch_end(batch, {"loss": 0.5})
            callback.on_epoch_end(epoch, {"loss": 0.5})
        self.assertEqual(saved, [os.path.join(tmp.name, n) for n in ("convoy-epoch=0-batch=3.keras", "convoy-epoch=1-batch=2.keras")])
        self.assertFalse(callback.model.stop_training)

    def test_without_a_checkpoint_directory_it_only_exits(self):
        os.environ.pop("CONVOY_CHECKPOINT_URI", None)
        with self.assertRaises(SystemExit), self.assertLogs("convoy") as logs:
            self.fit_until_sigterm(convoy.keras._Reporting())
        self.assertIn("not saving", "\n".join(logs.output))
        self.assertEqual(self.server.bodies("checkpoint"), [])

    def test_only_rank_zero_reports(self):
        os.environ["RANK"] = "1"
        convoy.keras._Reporting().on_epoch_end(0, {"loss": 0.9})
        self.assertEqual(self.server.requests, [])

    @unittest.skipUnless(HAVE_KERAS, "needs Keras with a backend (pip install keras, and tensorflow, jax or torch)")
    def test_fit(self):
        try:
            import keras
        except Exception:
            try:
                from tensorflow import keras
            except Exception as e:
                self.skipTest("Keras does not import: %s" % e)
        import numpy as np

        rng = np.random.default_rng(0)
        x = rng.normal(size=(64, 4)).astype("float32")
        y = (x[:, 0] > 0).astype("int64")
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, activation="softmax")])
        model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        model.fit(x, y, epochs=2, batch_size=16, validation_data=(x[:32], y[:32]), verbose=0,
                  callbacks=[convoy.keras.ConvoyCallback()])
        progress = self.server.bodies("progress")
        self.assertEqual([(b["epoch"], b["totalEpochs"]) for b in progress], [(1, 2), (2, 2), (2, 2)])
        for body in progress:
            self.assertIsInstance(body["metrics"]["loss"], float)
            self.assertIsInstance(body["metrics"]["accuracy"], float)


if __name__ == "__main__":
    unittest.main()
