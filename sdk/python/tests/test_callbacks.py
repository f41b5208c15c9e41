"""convoy._callbacks.Metrics, which turns what a framework logged into a report's metrics for the
framework callbacks."""

import unittest

import support  # noqa: F401 (import path)

from convoy._callbacks import Metrics


class Tensor:
    """Stands in for a framework's tensor: float() takes one element only."""

    def __init__(self, *values):
        self.values = values

    def __float__(self):
        if len(self.values) != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return float(self.values[0])


class MetricsTest(unittest.TestCase):
    def test_renames_converts_and_leaves_out(self):
        m = Metrics({"val_acc": "accuracy"})
        values = m.update({"loss": Tensor(0.5), "val_acc": Tensor(0.75), "hist": Tensor(1, 2), "name": "x",
                           "none": None, "epoch": 3, "step": 12, "x" * 64: 1.0, "ok": True})
        self.assertEqual(values, {"loss": 0.5, "accuracy": 0.75, "ok": 1.0})
        self.assertIsInstance(values["loss"], float)

    def test_keeps_the_latest_values(self):
        m = Metrics()
        m.update({"loss": 0.9, "lr": 0.1})
        self.assertEqual(m.update({"loss": 0.8}), {"loss": 0.8, "lr": 0.1})

    def test_a_mapped_name_wins_over_a_kept_one_and_a_later_over_an_earlier(self):
        m = Metrics({"train_loss": "loss", "val_loss": "loss", "val_acc": "accuracy"})
        self.assertEqual(m.update({"loss": 1.5, "accuracy": 0.1}), {"loss": 1.5, "accuracy": 0.1})
        self.assertEqual(m.update({"train_loss": 0.9, "loss": 1.4})["loss"], 0.9)
        self.assertEqual(m.update({"val_loss": 1.2, "val_acc": 0.5})["loss"], 1.2)
        self.assertEqual(m.update({"train_loss": 0.7, "loss": 1.3, "accuracy": 0.2}), {"loss": 1.2, "accuracy": 0.5})
        self.assertEqual(m.update({"val_loss": 1.1})["loss"], 1.1)

    def test_at_most_32_besides_loss_and_accuracy(self):
        m = Metrics()
        logged = {"m%02d" % i: float(i) for i in range(40)}
        logged.update(loss=1.0, accuracy=0.5)
        values = m.update(logged)
        self.assertEqual(len(values), 34)
        self.assertEqual((values["loss"], values["accuracy"], values["m31"]), (1.0, 0.5, 31.0))
        self.assertNotIn("m32", values)
        self.assertEqual(m.update({"m00": 7.0, "m39": 9.0})["m00"], 7.0)
        self.assertNotIn("m39", m.values)


if __name__ == "__main__":
    unittest.main()
