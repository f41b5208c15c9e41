"""convoy.start_tracking against the operator's endpoint stand-in, with mlflow and wandb faked at
their module boundary (tests/fake_trackers.py): what the SDK asks of each tracker, and what it
reports to the operator."""

import json
import logging
import os
import unittest

import support
from fake_trackers import FakeMlflow, FakeWandb, install

import convoy

HYPERPARAMETERS = {"learningRate": 0.0003, "batchSize": 64, "epochs": 10, "optimizer": "adamw",
                   "additionalParams": {"dropout": "0.1"}}
PARAMS = {"learningRate": 0.0003, "batchSize": 64, "epochs": 10, "optimizer": "adamw", "dropout": "0.1"}


class StartTrackingTest(unittest.TestCase):
    def setUp(self):
        self.server, tmp = support.pod_environment(self, lambda tmp: os.path.join(tmp, "checkpoints"))
        hp = os.path.join(tmp, "hyperparameters.json")
        with open(hp, "w") as f:
            json.dump(HYPERPARAMETERS, f)
        support.set_environ(self, CONVOY_HYPERPARAMETERS_FILE=hp, MLFLOW_TRACKING_URI=None, MLFLOW_RUN_ID=None,
                            WANDB_PROJECT=None, WANDB_RUN_ID=None, WANDB_RESUME=None)

    def test_first_attempt_creates_the_mlflow_run_logs_params_and_reports_it(self):
        mlflow = FakeMlflow(new_run_id="3b9d0c1e", experiment_id="7")
        install(self, mlflow=mlflow)
        support.set_environ(self, MLFLOW_TRACKING_URI="http://mlflow.example:5000/")
        t = convoy.start_tracking()
        self.assertEqual(mlflow.calls, [("start_run", None), ("log_params", PARAMS)])
        self.assertEqual(t.mlflow_run_id, "3b9d0c1e")
        url = "http://mlflow.example:5000/#/experiments/7/runs/3b9d0c1e"
        self.assertEqual(t.url, url)
        self.assertEqual(self.server.bodies("tracking"), [{"mlflowRunId": "3b9d0c1e", "url": url}])

    def test_a_later_attempt_resumes_the_recorded_run_without_logging_params_again(self):
        mlflow = FakeMlflow()
        install(self, mlflow=mlflow)
        support.set_environ(self, MLFLOW_TRACKING_URI="http://mlflow:5000", MLFLOW_RUN_ID="3b9d0c1e")
        t = convoy.start_tracking()
        self.assertEqual(mlflow.calls, [("start_run", "3b9d0c1e")])
        self.assertEqual(t.mlflow_run_id, "3b9d0c1e")
        self.assertEqual(self.server.bodies("tracking")[0]["mlflowRunId"], "3b9d0c1e")

    def test_a_file_store_has_no_url(self):
        install(self, mlflow=FakeMlflow(new_run_id="r1"))
        support.set_environ(self, MLFLOW_TRACKING_URI="file:///mnt/mlruns")
        convoy.start_tracking(params={"lr": 1})
        self.assertEqual(self.server.bodies("tracking"), [{"mlflowRunId": "r1"}])

    def test_wandb_resumes_the_operators_run_id_with_params_as_config(self):
        wandb = FakeWandb(entity="team")
        install(self, wandb=wandb)
        support.set_environ(self, WANDB_PROJECT="llm", WANDB_RUN_ID="ft-0a1b2c3d4e5f", WANDB_RESUME="allow")
        t = convoy.start_tracking()
        self.assertEqual(wandb.calls, [("init", {"project": "llm", "id": "ft-0a1b2c3d4e5f", "resume": "allow", "config": PARAMS})])
        self.assertEqual(self.server.bodies("tracking"), [{"url": "https://wandb.ai/team/llm/runs/ft-0a1b2c3d4e5f"}])
        self.assertIsNotNone(t.wandb_run)

    def test_both_trackers_report_mlflows_run_and_page(self):
        install(self, mlflow=FakeMlflow(new_run_id="r2", experiment_id="1"), wandb=FakeWandb())
        support.set_environ(self, MLFLOW_TRACKING_URI="https://mlflow", WANDB_PROJECT="llm", WANDB_RUN_ID="x-1")
        t = convoy.start_tracking()
        self.assertIsNotNone(t.wandb_run)
        self.assertEqual(self.server.bodies("tracking"), [{"mlflowRunId": "r2", "url": "https://mlflow/#/experiments/1/runs/r2"}])

    def test_other_ranks_start_nothing(self):
        mlflow, wandb = FakeMlflow(), FakeWandb()
        install(self, mlflow=mlflow, wandb=wandb)
        support.set_environ(self, RANK="1", MLFLOW_TRACKING_URI="http://mlflow", WANDB_PROJECT="llm")
        t = convoy.start_tracking()
        self.assertEqual((mlflow.calls, wandb.calls, t.mlflow_run, t.wandb_run), ([], [], None, None))
        self.assertEqual(self.server.requests, [])

    def test_without_the_packages_it_warns_and_the_training_goes_on(self):
        install(self, mlflow=None, wandb=None)  # import raises ImportError
        support.set_environ(self, MLFLOW_TRACKING_URI="http://mlflow", WANDB_PROJECT="llm")
        with self.assertLogs("convoy", logging.WARNING) as logs:
            t = convoy.start_tracking()
        self.assertEqual((t.mlflow_run, t.wandb_run, t.url), (None, None, None))
        self.assertIn("mlflow is not installed", "\n".join(logs.output))
        self.assertIn("wandb is not installed", "\n".join(logs.output))
        self.assertEqual(self.server.requests, [])

    def test_a_failing_tracker_never_raises(self):
        install(self, mlflow=FakeMlflow(fail=ConnectionError("mlflow is down")))
        support.set_environ(self, MLFLOW_TRACKING_URI="http://mlflow")
        with self.assertLogs("convoy", logging.WARNING):
            t = convoy.start_tracking()
        self.assertIsNone(t.mlflow_run)
        self.assertEqual(self.server.requests, [])

    def test_a_run_the_operator_refuses_is_a_warning(self):
        install(self, mlflow=FakeMlflow(new_run_id="other"))
        support.set_environ(self, MLFLOW_TRACKING_URI="http://mlflow")
        self.server.answers = [409]
        with self.assertLogs("convoy", logging.WARNING) as logs:
            t = convoy.start_tracking()
        self.assertIn("did not record the tracker run", "\n".join(logs.output))
        self.assertEqual(t.mlflow_run_id, "other")  # the training goes on; the status keeps the job's run

    def test_nothing_configured_starts_nothing(self):
        t = convoy.start_tracking()
        self.assertEqual((t.mlflow_run, t.wandb_run), (None, None))
        self.assertEqual(self.server.requests, [])


class HyperparametersTest(unittest.TestCase):
    def test_outside_a_pod_there_are_none(self):
        self.assertEqual(convoy.hyperparameters(env={}), {})

    def test_additional_params_are_merged(self):
        support.set_environ(self)
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(HYPERPARAMETERS, f)
        self.addCleanup(os.unlink, f.name)
        self.assertEqual(convoy.hyperparameters(env={"CONVOY_HYPERPARAMETERS_FILE": f.name}), PARAMS)


if __name__ == "__main__":
    unittest.main()
