"""convoy.transformers: what its callback reports, from stand-in Trainer state everywhere and,
where transformers and PyTorch are installed, from a real Trainer training a tiny randomly
initialised BERT (nothing downloaded) for 2 epochs, then resuming from the checkpoint it reported."""

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
import convoy.transformers

HAVE_TRANSFORMERS = all(importlib.util.find_spec(name) for name in ("transformers", "torch", "accelerate"))


class WithoutTransformersTest(unittest.TestCase):
    def test_imports_and_names_the_package_to_install(self):
        module = support.import_without("convoy.transformers", "transformers")
        with self.assertRaises(ImportError) as caught:
            module.ConvoyCallback()
        self.assertIn("pip install transformers", str(caught.exception))
        support.set_environ(self, CONVOY_RESUME_FROM=None, CONVOY_CHECKPOINT_URI=None)
        self.assertIsNone(module.resume_path())
        self.assertIsNone(module.output_dir())

    def test_output_dir_and_resume_path(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "ns", "job")
            support.set_environ(self, CONVOY_CHECKPOINT_URI=out, CONVOY_RESUME_FROM=os.path.join(out, "checkpoint-4"))
            with self.assertLogs("convoy", logging.WARNING):
                self.assertIsNone(convoy.transformers.resume_path())  # not there
            self.assertEqual(convoy.transformers.output_dir(), out)
            self.assertTrue(os.path.isdir(out))
            os.mkdir(os.path.join(out, "checkpoint-4"))
            self.assertEqual(convoy.transformers.resume_path(), os.path.join(out, "checkpoint-4"))
            os.environ["CONVOY_CHECKPOINT_URI"] = "s3://bucket/ns/job"
            self.assertIsNone(convoy.transformers.output_dir())


class StandInTrainerTest(unittest.TestCase):
    """The hooks called in the Trainer's order by hand, with args and state of the attributes they
    read: logging every 2 steps, 4 steps an epoch, evaluating and saving each epoch."""

    def setUp(self):
        self.server = Recorder()
        self.addCleanup(self.server.close)
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.args = types.SimpleNamespace(output_dir=tmp.name, num_train_epochs=2.0)
        support.set_environ(self, CONVOY_PROGRESS_URL=self.server.url, CONVOY_CHECKPOINT_URI=tmp.name,
                            CONVOY_CHECKPOINT_RETENTION=None, CONVOY_RESUME_FROM=None, **dict.fromkeys(support.RANK_VARS))
        convoy.configure(min_interval=0)
        self.addCleanup(convoy.configure)
        self.sigterm = support.watch_sigterm(self)

    def step(self, callback, state, control=None):
        """The end of a training step: on_step_end, then the save it asked for, as the Trainer does."""
        control = control or types.SimpleNamespace(should_save=False)
        callback.on_step_end(self.args, state, control)
        if control.should_save:
            os.makedirs(os.path.join(self.args.output_dir, "checkpoint-%d" % state.global_step), exist_ok=True)
            callback.on_save(self.args, state, control)

    def train(self, callback, state, save=True, sigterm_at=None):
        args = self.args
        for epoch, (step_loss, loss, eval_loss, eval_accuracy) in enumerate([(0.88, 0.8, 1.1, 0.6), (0.84, 0.7, 1.0, 0.7)]):
            callback.on_epoch_begin(args, state, None)
            for step in range(1, 5):
                state.global_step += 1
                state.epoch = epoch + step / 4
                if state.global_step == sigterm_at:
                    self.sigterm()
                self.step(callback, state)
                if step == 2:
                    callback.on_log(args, state, None, logs={"loss": step_loss, "learning_rate": 0.001, "epoch": state.epoch})
            callback.on_epoch_end(args, state, None)
            callback.on_log(args, state, None, logs={"loss": loss, "grad_norm": 1.5, "epoch": state.epoch})
            callback.on_log(args, state, None, logs={"eval_loss": eval_loss, "eval_accuracy": eval_accuracy, "epoch": state.epoch})
            if save:
                os.mkdir(os.path.join(args.output_dir, "checkpoint-%d" % state.global_step))
            callback.on_save(args, state, None)
        callback.on_log(args, state, None, logs={"train_runtime": 1.0, "train_loss": 0.75, "epoch": state.epoch})
        callback.on_train_end(args, state, None)

    def state(self, **kwargs):
        values = dict(epoch=0.0, global_step=0, num_train_epochs=2, is_world_process_zero=True)
        values.update(kwargs)
        return types.SimpleNamespace(**values)

    def test_reports_logs_epochs_checkpoints_and_the_end(self):
        callback, state = convoy.transformers._Reporting(), self.state()
        self.train(callback, state)
        callback.on_save(self.args, state, None)  # saved again at the same step: not reported again
        progress = [(b["epoch"], b["totalEpochs"], b["step"], b["metrics"]) for b in self.server.bodies("progress")]
        self.assertEqual(progress, [
            (0, 2, 2, {"loss": 0.88, "learning_rate": 0.001}),
            # Epoch 1's logs, evaluation and checkpoint, reported when epoch 2 begins: the
            # evaluation loss is "loss" from then on.
            (1, 2, 4, {"loss": 1.1, "accuracy": 0.6, "learning_rate": 0.001, "grad_norm": 1.5}),
            (1, 2, 6, {"loss": 1.1, "accuracy": 0.6, "learning_rate": 0.001, "grad_norm": 1.5}),
            (2, 2, 8, {"loss": 1.0, "accuracy": 0.7, "learning_rate": 0.001, "grad_norm": 1.5,
                       "train_runtime": 1.0, "train_loss": 0.75}),
        ])
        self.assertEqual(self.server.bodies("checkpoint"), [
            {"path": os.path.join(self.args.output_dir, "checkpoint-4"), "epoch": 1},
            {"path": os.path.join(self.args.output_dir, "checkpoint-8"), "epoch": 2},
        ])

    def test_reports_samples_per_second_of_the_training_steps(self):
        clock = support.FakeClock()
        callback, state = convoy.transformers._Reporting(), self.state()
        callback._throughput.clock = clock
        # 8 a device, 2 processes, 2 micro-batches a step: 32 samples a step.
        self.args.per_device_train_batch_size, self.args.world_size, self.args.gradient_accumulation_steps = 8, 2, 2
        step, begin = callback.on_step_end, callback.on_epoch_begin

        def timed_step(*args):
            clock.now += 0.5
            step(*args)

        def after_evaluation(*args):
            clock.now += 10
            begin(*args)

        callback.on_step_end, callback.on_epoch_begin = timed_step, after_evaluation
        self.train(callback, state)
        # Steps of 0.5 s: 64 samples a second between logs and to each epoch's end, evaluation left out.
        self.assertEqual([b.get("samplesPerSecond") for b in self.server.bodies("progress")], [64.0, 64.0, 64.0, None])

    def test_metric_names_replace_the_default(self):
        self.train(convoy.transformers._Reporting(metric_names={"eval_accuracy": "accuracy"}), self.state(), save=False)
        final = self.server.bodies("progress")[-1]["metrics"]
        self.assertEqual((final["loss"], final["accuracy"], final["eval_loss"]), (0.7, 0.7, 1.0))
        self.assertEqual(self.server.bodies("checkpoint"), [])  # no checkpoint-<step> directory

    def test_only_the_main_process_reports(self):
        self.train(convoy.transformers._Reporting(), self.state(is_world_process_zero=False))
        self.assertEqual(self.server.requests, [])


    def test_on_sigterm_saves_reports_and_exits_at_the_end_of_the_step(self):
        os.environ["CONVOY_CHECKPOINT_RETENTION"] = "1"
        callback, state = convoy.transformers._Reporting(), self.state()
        with self.assertRaises(SystemExit) as caught:
            self.train(callback, state, sigterm_at=6)
        self.assertEqual(caught.exception.code, 143)
        self.assertEqual(state.global_step, 6)
        self.assertEqual(self.server.bodies("checkpoint"), [
            {"path": os.path.join(self.args.output_dir, "checkpoint-4"), "epoch": 1},
            {"path": os.path.join(self.args.output_dir, "checkpoint-6"), "epoch": 1},
        ])
        self.assertEqual(sorted(os.listdir(self.args.output_dir)), [".convoy-checkpoints.json", "checkpoint-6"])

    def test_retention_keeps_the_best_checkpoint(self):
        os.environ["CONVOY_CHECKPOINT_RETENTION"] = "1"
        state = self.state(best_model_checkpoint=os.path.join(self.args.output_dir, "checkpoint-4"))
        self.train(convoy.transformers._Reporting(), state)
        self.assertEqual(sorted(os.listdir(self.args.output_dir)), [".convoy-checkpoints.json", "checkpoint-4", "checkpoint-8"])

    def test_every_process_exits_and_only_the_main_one_reports(self):
        with self.assertRaises(SystemExit):
            self.train(convoy.transformers._Reporting(), self.state(is_world_process_zero=False), sigterm_at=1)
        self.assertTrue(os.path.isdir(os.path.join(self.args.output_dir, "checkpoint-1")))  # the Trainer saved
        self.assertEqual(self.server.requests, [])

    def test_a_checkpoint_request_saves_and_training_goes_on(self):
        callback, state = convoy.transformers._Reporting(), self.state()
        convoy._preempt.request_checkpoint()  # as a reply of the operator's would
        self.train(callback, state)
        self.assertEqual([c["path"] for c in self.server.bodies("checkpoint")],
                         [os.path.join(self.args.output_dir, "checkpoint-%d" % s) for s in (1, 4, 8)])
        self.assertEqual(self.server.bodies("progress")[-1]["epoch"], 2)

    def test_saves_at_the_step_end_an_interval_after_the_latest_checkpoint(self):
        clock = support.checkpoint_interval(self, 60)
        callback, state = convoy.transformers._Reporting(), self.state()
        for step in range(1, 9):  # steps end every 20 s; the interval starts at the first
            clock.now += 20
            state.global_step, state.epoch = step, step / 4
            self.step(callback, state)
        self.assertEqual([c["path"] for c in self.server.bodies("checkpoint")],
                         [os.path.join(self.args.output_dir, "checkpoint-%d" % s) for s in (4, 7)])


def accuracy(prediction):
    logits = prediction.predictions[0] if isinstance(prediction.predictions, tuple) else prediction.predictions
    return {"accuracy": float((logits.argmax(-1) == prediction.label_ids).mean())}


@unittest.skipUnless(HAVE_TRANSFORMERS, "needs transformers, torch and accelerate (pip install 'transformers[torch]')")
class TransformersTrainerTest(unittest.TestCase):
    """A real Trainer in a pod's environment: the operator's endpoint (the Recorder) and a checkpoint
    directory, then CONVOY_RESUME_FROM set to the checkpoint reported after epoch 1."""

    def setUp(self):
        import transformers

        self.server, self.tmp = support.pod_environment(self, lambda tmp: os.path.join(tmp, "first"))
        verbosity = transformers.logging.get_verbosity()
        self.addCleanup(transformers.logging.set_verbosity, verbosity)
        transformers.logging.set_verbosity_error()

    def train(self):
        """Trains a one-layer BERT of 16 dimensions, randomly initialised from its config, on 64
        sequences of 8 random tokens labelled by the first token's parity, 16 a batch, for 2 epochs,
        evaluating and saving each epoch in convoy.transformers.output_dir() and resuming from
        convoy.transformers.resume_path(), as a pod's training code would. Returns the trainer and the
        global step at each training step's start."""
        import torch
        import transformers

        class Tokens(torch.utils.data.Dataset):
            def __init__(self, n):
                generator = torch.Generator().manual_seed(n)
                self.ids = torch.randint(1, 64, (n, 8), generator=generator)

            def __len__(self):
                return len(self.ids)

            def __getitem__(self, i):
                return {"input_ids": self.ids[i], "attention_mask": torch.ones(8, dtype=torch.long),
                        "labels": self.ids[i, 0] % 2}

        class Steps(transformers.TrainerCallback):
            def __init__(self):
                self.steps = []

            def on_step_begin(self, args, state, control, **kwargs):
                self.steps.append(state.global_step)

        transformers.set_seed(0)
        config = transformers.BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                         intermediate_size=32, max_position_embeddings=16, num_labels=2)
        args = transformers.TrainingArguments(
            output_dir=convoy.transformers.output_dir(), num_train_epochs=2, per_device_train_batch_size=16,
            per_device_eval_batch_size=32, learning_rate=1e-3, eval_strategy="epoch", save_strategy="epoch",
            logging_strategy="epoch", report_to="none", use_cpu=not torch.cuda.is_available(), seed=0,
            disable_tqdm=True,
        )
        steps = Steps()
        trainer = transformers.Trainer(
            model=transformers.BertForSequenceClassification(config), args=args, train_dataset=Tokens(64),
            eval_dataset=Tokens(32), compute_metrics=accuracy, callbacks=[convoy.transformers.ConvoyCallback(), steps],
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trainer.train(resume_from_checkpoint=convoy.transformers.resume_path())
        return trainer, steps.steps

    def test_reports_two_epochs_then_resumes_from_the_reported_checkpoint(self):
        trainer, steps = self.train()
        per_epoch = trainer.state.global_step // 2  # 4, on one device
        self.assertEqual(steps, list(range(2 * per_epoch)))
        progress = self.server.bodies("progress")
        self.assertEqual([(b["epoch"], b["totalEpochs"], b["step"]) for b in progress], [(1, 2, per_epoch), (2, 2, 2 * per_epoch)])
        for body in progress:
            self.assertIsInstance(body["metrics"]["loss"], float)
            self.assertIsInstance(body["metrics"]["accuracy"], float)
            self.assertNotIn("eval_loss", body["metrics"])
        first = os.path.join(self.tmp, "first")
        checkpoints = self.server.bodies("checkpoint")
        self.assertEqual(checkpoints, [
            {"path": os.path.join(first, "checkpoint-%d" % per_epoch), "epoch": 1},
            {"path": os.path.join(first, "checkpoint-%d" % (2 * per_epoch)), "epoch": 2},
        ])
        for c in checkpoints:
            self.assertTrue(os.path.isdir(c["path"]), c["path"])
        self.assertTrue(all(h["Authorization"] == "Bearer token-1" for _, h, _ in self.server.requests))

        # The gang restarts: the operator gives back the checkpoint reported after epoch 1. (A fresh
        # output directory: the first run's already holds the checkpoint of epoch 2.)
        self.server.requests.clear()
        second = os.path.join(self.tmp, "second")
        os.environ["CONVOY_CHECKPOINT_URI"] = second
        os.environ["CONVOY_RESUME_FROM"] = checkpoints[0]["path"]
        trainer, steps = self.train()
        self.assertEqual(steps, list(range(per_epoch, 2 * per_epoch)))  # epoch 2 only, from the checkpoint's step
        self.assertEqual(trainer.state.global_step, 2 * per_epoch)
        progress = self.server.bodies("progress")
        self.assertEqual([(b["epoch"], b["totalEpochs"], b["step"]) for b in progress], [(2, 2, 2 * per_epoch)])
        self.assertEqual(self.server.bodies("checkpoint"), [
            {"path": os.path.join(second, "checkpoint-%d" % (2 * per_epoch)), "epoch": 2},
        ])


if __name__ == "__main__":
    unittest.main()
