"""convoy.checkpoint_dir, resume_from and friends from the variables operator/pkg/builder sets."""

import os
import tempfile
import unittest

import support  # noqa: F401 (import path)

import convoy


class CheckpointTest(unittest.TestCase):
    def test_checkpoint_dir(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "ns", "job")  # as /checkpoints/<namespace>/<job> on a pvc or nfs volume
            self.assertEqual(convoy.checkpoint_dir(env={"CONVOY_CHECKPOINT_URI": path}), path)
            self.assertTrue(os.path.isdir(path))
            other = os.path.join(tmp, "other")
            self.assertEqual(convoy.checkpoint_dir(create=False, env={"CONVOY_CHECKPOINT_URI": "file://" + other}), other)
            self.assertFalse(os.path.exists(other))
        for uri in ("s3://bucket/ns/job", "gs://bucket/ns/job", "az://container/ns/job", ""):
            with self.subTest(uri=uri):
                self.assertIsNone(convoy.checkpoint_dir(env={"CONVOY_CHECKPOINT_URI": uri}))
        self.assertIsNone(convoy.checkpoint_dir(env={}))
        self.assertEqual(convoy.checkpoint_uri(env={"CONVOY_CHECKPOINT_URI": "s3://b/ns/job"}), "s3://b/ns/job")

    def test_resume_from(self):
        self.assertIsNone(convoy.resume_from(env={}))
        self.assertIsNone(convoy.resume_from(env={"CONVOY_RESUME_FROM": ""}))
        self.assertEqual(convoy.resume_from(env={"CONVOY_RESUME_FROM": "/checkpoints/ns/job/epoch-3.pt"}), "/checkpoints/ns/job/epoch-3.pt")
        self.assertEqual(convoy.resume_from(env={"CONVOY_RESUME_FROM": "file:///c/epoch-3.pt"}), "/c/epoch-3.pt")
        self.assertEqual(convoy.resume_from(env={"CONVOY_RESUME_FROM": "s3://b/ns/job/epoch-3"}), "s3://b/ns/job/epoch-3")

    def test_interval(self):
        self.assertIsNone(convoy.checkpoint_interval(env={}))
        self.assertEqual(convoy.checkpoint_interval(env={"CONVOY_CHECKPOINT_INTERVAL_SECONDS": "900"}), 900)
        self.assertIsNone(convoy.checkpoint_interval(env={"CONVOY_CHECKPOINT_INTERVAL_SECONDS": "0"}))

    def test_frequency_and_retention(self):
        self.assertEqual(convoy.checkpoint_frequency(env={}), 1)
        self.assertEqual(convoy.checkpoint_frequency(env={"CONVOY_CHECKPOINT_FREQUENCY": "5"}), 5)
        self.assertEqual(convoy.checkpoint_frequency(env={"CONVOY_CHECKPOINT_FREQUENCY": "0"}), 1)
        with self.assertLogs("convoy"):
            self.assertEqual(convoy.checkpoint_frequency(env={"CONVOY_CHECKPOINT_FREQUENCY": "often"}), 1)
        self.assertIsNone(convoy.checkpoint_retention(env={}))
        self.assertEqual(convoy.checkpoint_retention(env={"CONVOY_CHECKPOINT_RETENTION": "3"}), 3)


if __name__ == "__main__":
    unittest.main()
