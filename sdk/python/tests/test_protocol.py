"""The JSON the SDK posts is the JSON the operator decodes: the field names of progress.Report and
progress.Checkpoint in operator/pkg/progress/protocol.go, whose server refuses unknown fields.
testdata/*.json are the SDK's bodies, which operator/pkg/progress/sdk_test.go decodes with the
operator's own types; a rename on either side fails a test."""

import json
import os
import re
import unittest

import support
from support import Recorder

import convoy

PROTOCOL = os.path.join(support.HERE, "..", "..", "..", "operator", "pkg", "progress", "protocol.go")
TESTDATA = os.path.join(support.HERE, "testdata")


def json_tags(source, struct):
    """The json names of a Go struct's fields."""
    m = re.search(r"^type %s struct \{\n(.*?)^\}" % struct, source, re.M | re.S)
    if m is None:
        raise AssertionError("no struct %s in protocol.go" % struct)
    return set(re.findall(r'`json:"([^",]+)', m.group(1)))


def bodies():
    """What the SDK posts for a report with every field and for a checkpoint."""
    server = Recorder()
    try:
        r = convoy.Reporter(env={"CONVOY_PROGRESS_URL": server.url})
        r.report(epoch=3, total_epochs=10, step=1200, metrics={"loss": 0.41, "accuracy": 0.87, "lr": 0.0001},
                 samples_per_second=2048.5)
        r.checkpoint_saved("/checkpoints/ns/job/epoch-3.pt", 3)
        return server.bodies("progress")[0], server.bodies("checkpoint")[0]
    finally:
        server.close()


def tracking_body():
    """What start_tracking posts for an MLflow run at an http tracking URI (mlflow faked)."""
    from fake_trackers import FakeMlflow
    import sys
    server = Recorder()
    saved = sys.modules.get("mlflow")
    sys.modules["mlflow"] = FakeMlflow(new_run_id="3b9d0c1e", experiment_id="7")
    try:
        r = convoy.Reporter(env={"CONVOY_PROGRESS_URL": server.url})
        convoy._tracking.start(r, {}, {"MLFLOW_TRACKING_URI": "http://mlflow.example:5000"})
        return server.bodies("tracking")[0]
    finally:
        server.close()
        if saved is None:
            sys.modules.pop("mlflow", None)
        else:
            sys.modules["mlflow"] = saved


class ProtocolTest(unittest.TestCase):
    def test_field_names_match_protocol_go(self):
        if not os.path.exists(PROTOCOL):
            self.skipTest("operator/pkg/progress/protocol.go is not here: run the tests in the repository")
        with open(PROTOCOL) as f:
            source = f.read()
        progress, checkpoint = bodies()
        self.assertEqual(set(progress), json_tags(source, "Report"))
        self.assertEqual(set(checkpoint), json_tags(source, "Checkpoint"))
        self.assertEqual(set(tracking_body()), json_tags(source, "Tracking"))

    def test_bodies_match_the_files_the_go_test_decodes(self):
        progress, checkpoint = bodies()
        for name, body in [("progress.json", progress), ("checkpoint.json", checkpoint), ("tracking.json", tracking_body())]:
            with self.subTest(name):
                with open(os.path.join(TESTDATA, name)) as f:
                    self.assertEqual(body, json.load(f))
        self.assertIsInstance(progress["epoch"], int)
        self.assertIsInstance(progress["step"], int)
        self.assertTrue(all(isinstance(v, float) for v in progress["metrics"].values()))


if __name__ == "__main__":
    unittest.main()
