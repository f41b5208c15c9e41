"""save_checkpoint, load_checkpoint and list_checkpoints on a volume (a local directory) and, when
CONVOY_TEST_S3_ENDPOINT is set (test/integration/objstore starts SeaweedFS's S3 gateway and sets
it) and boto3 is installed, on S3 with credentials scoped to the job's prefix."""

import os
import tempfile
import threading
import unittest

import support  # noqa: F401 (puts the source tree first on sys.path)

from convoy import _objcheckpoint, _objstore

S3 = os.environ.get("CONVOY_TEST_S3_ENDPOINT")


def have_boto3():
    try:
        import boto3  # noqa: F401
        return True
    except ImportError:
        return False


class Checkpoints:
    """The tests; a subclass says where the job's checkpoints live (root(): CONVOY_CHECKPOINT_ROOT)
    and the environment of its clients."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(lambda: __import__("shutil").rmtree(self.tmp, ignore_errors=True))
        self.reports = []

    def env(self, attempt=0, rank=0, world=1, **more):
        root = self.root()
        env = dict(self.client_env(), CONVOY_CHECKPOINT_ROOT=root, CONVOY_CHECKPOINT_URI="%s/attempt-%d" % (root, attempt),
                   RANK=str(rank), WORLD_SIZE=str(world))
        env.update({k: v for k, v in more.items() if v is not None})
        return env

    def report(self, uri, epoch, metrics):
        self.reports.append((uri, epoch))
        return True

    def shard(self, name, text):
        d = os.path.join(self.tmp, "src", name)
        os.makedirs(os.path.join(d, "sub"), exist_ok=True)
        with open(os.path.join(d, "model.pt"), "w") as f:
            f.write(text)
        with open(os.path.join(d, "sub", "optim.pt"), "w") as f:
            f.write(text + "-optim")
        return d

    def save(self, saver, epoch, text=None, **kw):
        return saver.save(self.shard("e%d-r%s" % (epoch, saver.env["RANK"]), text or "epoch %d" % epoch), epoch,
                          {"loss": 1.0 / epoch}, report=self.report, **kw)

    def load(self, env, rank=None):
        dst = tempfile.mkdtemp(dir=self.tmp)
        return _objcheckpoint.Saver(env).load(dst, rank)

    def read(self, ckpt, *path):
        with open(os.path.join(ckpt.path, *path)) as f:
            return f.read()

    def test_saved_checkpoint_loads_back_after_a_restart(self):
        saver = _objcheckpoint.Saver(self.env(attempt=0))
        self.assertEqual(self.save(saver, 1), self.root() + "/attempt-0/epoch-1")
        self.save(saver, 2)
        self.assertEqual(self.reports, [(self.root() + "/attempt-0/epoch-1", 1), (self.root() + "/attempt-0/epoch-2", 2)])
        # The next attempt resumes from the newest checkpoint of any attempt.
        ckpt = self.load(self.env(attempt=1))
        self.assertEqual((ckpt.epoch, ckpt.metrics), (2, {"loss": 0.5}))
        self.assertEqual(self.read(ckpt, "model.pt"), "epoch 2")
        self.assertEqual(self.read(ckpt, "sub", "optim.pt"), "epoch 2-optim")
        # CONVOY_RESUME_FROM, the checkpoint the operator recorded, wins over the newest.
        ckpt = self.load(self.env(attempt=1, CONVOY_RESUME_FROM=self.root() + "/attempt-0/epoch-1"))
        self.assertEqual(self.read(ckpt, "model.pt"), "epoch 1")

    def test_nothing_to_load_before_the_first_checkpoint(self):
        self.assertIsNone(self.load(self.env()))
        self.assertEqual(_objcheckpoint.Saver(self.env()).list(), [])

    def test_every_rank_shard_is_in_the_checkpoint_committed_last_by_rank_0(self):
        world = 3
        savers = [_objcheckpoint.Saver(self.env(rank=r, world=world)) for r in range(world)]
        got = [None] * world
        threads = [threading.Thread(target=lambda r=r: got.__setitem__(r, self.save(savers[r], 4, "rank %d" % r)))
                   for r in range(world)]
        for t in reversed(threads):
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(got, [self.root() + "/attempt-0/epoch-4"] * world)
        self.assertEqual(len(self.reports), 1, "only rank 0 reports")
        for r in range(world):
            ckpt = self.load(self.env(attempt=1, rank=r, world=world))
            self.assertEqual((ckpt.epoch, ckpt.world, self.read(ckpt, "model.pt")), (4, world, "rank %d" % r))

    def test_a_half_written_checkpoint_is_never_loaded(self):
        saver = _objcheckpoint.Saver(self.env(world=2), commit_timeout=0.5, poll=0.05)
        other = _objcheckpoint.Saver(self.env(rank=1, world=2))
        t = threading.Thread(target=self.save, args=(other, 1))
        t.start()
        self.assertIsNotNone(self.save(saver, 1))
        t.join()
        # Epoch 2: rank 1 never uploads its shard (killed), so rank 0 does not commit.
        self.assertIsNone(self.save(saver, 2))
        # Epoch 3: every shard is up but rank 0 died before writing the manifest.
        store, prefix = _objstore.store_for(self.root() + "/attempt-0", self.env())
        for r in range(2):
            store.put_bytes("%s/epoch-3/rank-%d/model.pt" % (prefix, r), b"half")
            store.put_bytes("%s/epoch-3/rank-%d.json" % (prefix, r), b'{"keys": []}')
        ckpt = self.load(self.env(attempt=1, world=2))
        self.assertEqual((ckpt.epoch, self.read(ckpt, "model.pt")), (1, "epoch 1"))
        self.assertEqual([c.epoch for c in _objcheckpoint.Saver(self.env()).list()], [1])

    def test_retention_keeps_the_newest_and_the_checkpoints_kept(self):
        # Attempt 0 wrote epochs 1 and 2; attempt 1 resumes from epoch 1 and writes 3 to 6.
        first = _objcheckpoint.Saver(self.env(attempt=0))
        self.save(first, 1)
        self.save(first, 2)
        resumed = self.root() + "/attempt-0/epoch-1"
        saver = _objcheckpoint.Saver(self.env(attempt=1, CONVOY_CHECKPOINT_RETENTION="2", CONVOY_RESUME_FROM=resumed))
        mine = lambda: [c.epoch for c in saver.list(root=False)]  # noqa: E731
        self.save(saver, 3)
        self.save(saver, 4)
        self.save(saver, 5, keep=[self.root() + "/attempt-1/epoch-3"])
        self.assertEqual(mine(), [3, 4, 5], "epoch 3, kept, and the newest 2")
        self.save(saver, 6)
        self.assertEqual(mine(), [5, 6])
        # The earlier attempt's checkpoints are left as they are.
        got = [c.uri for c in _objcheckpoint.Saver(self.env(attempt=1)).list()]
        self.assertEqual(got[:2], [resumed, self.root() + "/attempt-0/epoch-2"])
        store, prefix = _objstore.store_for(self.root(), self.env())
        left = [k for k in store.list(prefix + "/attempt-1/") if "/epoch-3/" in k or "/epoch-4/" in k]
        self.assertEqual(left, [], "every object of a deleted checkpoint goes")

    def test_retention_never_deletes_the_checkpoint_resumed_from(self):
        saver = _objcheckpoint.Saver(self.env(CONVOY_CHECKPOINT_RETENTION="1", CONVOY_RESUME_FROM=self.root() + "/attempt-0/epoch-1"))
        for epoch in (1, 2, 3):
            self.save(saver, epoch)
        self.assertEqual([c.epoch for c in saver.list(root=False)], [1, 3])

    def test_retention_never_deletes_a_checkpoint_another_rank_is_writing(self):
        saver = _objcheckpoint.Saver(self.env(CONVOY_CHECKPOINT_RETENTION="1"))
        store, prefix = _objstore.store_for(self.root() + "/attempt-0", self.env())
        store.put_bytes("%s/epoch-1/rank-1/model.pt" % prefix, b"rank 1 still uploading")
        self.save(saver, 2)
        self.save(saver, 3)
        self.assertIn("%s/epoch-1/rank-1/model.pt" % prefix, store.list(prefix + "/"))
        self.assertEqual([c.epoch for c in saver.list(root=False)], [3])

    def test_saving_twice_at_an_epoch_keeps_both(self):
        saver = _objcheckpoint.Saver(self.env())
        self.save(saver, 5, "first")
        self.assertEqual(self.save(saver, 5, "second"), self.root() + "/attempt-0/epoch-5.1")
        self.assertEqual(self.read(self.load(self.env(attempt=1)), "model.pt"), "second")


class VolumeCheckpoints(Checkpoints, unittest.TestCase):
    def root(self):
        return os.path.join(self.tmp, "checkpoints", "ns", "job")

    def client_env(self):
        return {}


@unittest.skipUnless(S3 and have_boto3(), "needs CONVOY_TEST_S3_ENDPOINT (test/integration/objstore) and boto3")
class S3Checkpoints(Checkpoints, unittest.TestCase):
    """CONVOY_TEST_S3_BUCKET and _PREFIX are the job's; CONVOY_TEST_S3_ACCESS_KEY and _SECRET_KEY
    may use only that prefix; CONVOY_TEST_S3_FOREIGN is an object of another job."""
    count = 0

    def root(self):
        if not hasattr(self, "_root"):
            S3Checkpoints.count += 1
            self._root = "s3://%s/%s/t%d" % (os.environ["CONVOY_TEST_S3_BUCKET"], os.environ["CONVOY_TEST_S3_PREFIX"], S3Checkpoints.count)
        return self._root

    def client_env(self):
        return {"AWS_ENDPOINT_URL": S3, "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": os.environ["CONVOY_TEST_S3_ACCESS_KEY"],
                "AWS_SECRET_ACCESS_KEY": os.environ["CONVOY_TEST_S3_SECRET_KEY"]}

    def test_a_shard_above_the_part_size_is_uploaded_in_parts(self):
        env = self.env(CONVOY_CHECKPOINT_PART_BYTES=str(5 << 20))
        src = self.shard("big", "small")
        data = os.urandom(11 << 20)
        with open(os.path.join(src, "weights.bin"), "wb") as f:
            f.write(data)
        uri = _objcheckpoint.Saver(env).save(src, 1, {}, report=self.report)
        store, prefix = _objstore.store_for(uri, env)
        # S3 tags an object uploaded in N parts "<md5 of the parts' md5s>-N".
        etag = store.client.head_object(Bucket=store.bucket, Key=prefix + "/rank-0/weights.bin")["ETag"]
        self.assertTrue(etag.strip('"').endswith("-3"), "ETag %s: want an upload of 3 parts" % etag)
        with open(os.path.join(self.load(env).path, "weights.bin"), "rb") as f:
            self.assertEqual(f.read(), data)

    def test_another_jobs_prefix_is_refused(self):
        from botocore.exceptions import ClientError
        foreign = os.environ["CONVOY_TEST_S3_FOREIGN"]
        store, key = _objstore.store_for(foreign, self.env())
        for op in (lambda: store.get_bytes(key), lambda: store.list(key.rsplit("/", 1)[0] + "/"),
                   lambda: store.put_bytes(key, b"overwritten"), lambda: store.delete(key)):
            with self.assertRaises(ClientError) as e:
                op()
            self.assertEqual(e.exception.response["Error"]["Code"], "AccessDenied")
        # Resuming from it (a resumeFrom naming another job's checkpoint) is refused too.
        with self.assertRaises(ClientError):
            self.load(self.env(CONVOY_RESUME_FROM=foreign.rsplit("/", 1)[0]))


@unittest.skipUnless(os.environ.get("CONVOY_TEST_PRESIGN_URL"), "needs the operator and S3 of TestPresignedS3URLsOnlyForTheJobsPrefix")
class Presigned(unittest.TestCase):
    """A pod of attempt 0 of a job with s3Access, gcsAccess or azureAccess presigned: CONVOY_TEST_PRESIGN_URL,
    _TOKEN_FILE and _CA_FILE are its progress endpoint, _ROOT its checkpoint root (s3://, gs:// or az://),
    _FOREIGN an object of another job."""

    def env(self, **more):
        root = os.environ["CONVOY_TEST_PRESIGN_ROOT"]
        return dict(CONVOY_CHECKPOINT_PRESIGN="1", CONVOY_PROGRESS_URL=os.environ["CONVOY_TEST_PRESIGN_URL"],
                    CONVOY_PROGRESS_TOKEN_FILE=os.environ["CONVOY_TEST_PRESIGN_TOKEN_FILE"],
                    CONVOY_PROGRESS_CA_FILE=os.environ["CONVOY_TEST_PRESIGN_CA_FILE"], CONVOY_CHECKPOINT_ROOT=root,
                    CONVOY_CHECKPOINT_URI=root + "/attempt-0", RANK="0", WORLD_SIZE="1", **more)

    def test_checkpoints_save_and_load_without_credentials_or_boto3(self):
        import sys
        from unittest import mock
        tmp = tempfile.mkdtemp()
        self.addCleanup(lambda: __import__("shutil").rmtree(tmp, ignore_errors=True))
        src = os.path.join(tmp, "src")
        os.makedirs(src)
        with open(os.path.join(src, "model.pt"), "w") as f:
            f.write("presigned")
        with mock.patch.dict(sys.modules, {"boto3": None, "botocore": None, "google.cloud.storage": None, "azure.storage.blob": None}):
            saver = _objcheckpoint.Saver(self.env(CONVOY_CHECKPOINT_RETENTION="1"))
            for epoch in (1, 2):
                saver.save(src, epoch, {}, report=lambda *a: True)
            self.assertEqual([c.epoch for c in saver.list()], [2], "retention deleted epoch 1")
            ckpt = _objcheckpoint.Saver(self.env()).load(os.path.join(tmp, "dst"))
            with open(os.path.join(ckpt.path, "model.pt")) as f:
                self.assertEqual((ckpt.epoch, f.read()), (2, "presigned"))
            # A shard above the part size: on S3 a multipart upload, each part on its own URL.
            data = os.urandom(11 << 20)
            with open(os.path.join(src, "weights.bin"), "wb") as f:
                f.write(data)
            env = self.env(CONVOY_CHECKPOINT_PART_BYTES=str(5 << 20))
            uri = _objcheckpoint.Saver(env).save(src, 3, {}, report=lambda *a: True)
            store, prefix = _objstore.store_for(uri, env)
            if uri.startswith("s3://"):
                with store._send("get", prefix + "/rank-0/weights.bin") as resp:
                    etag = resp.headers["ETag"]
                self.assertTrue(etag.strip('"').endswith("-3"), "ETag %s: want an upload of 3 parts" % etag)
            ckpt = _objcheckpoint.Saver(env).load(os.path.join(tmp, "dst3"))
            with open(os.path.join(ckpt.path, "weights.bin"), "rb") as f:
                self.assertEqual((ckpt.epoch, f.read()), (3, data))
            foreign = os.environ["CONVOY_TEST_PRESIGN_FOREIGN"]
            store, key = _objstore.store_for(foreign, self.env())
            for op in (lambda: store.get_bytes(key), lambda: store.put_bytes(key, b"overwritten"), lambda: store.delete(key)):
                with self.assertRaisesRegex(PermissionError, "only under its (current attempt's )?prefix"):
                    op()


class StoreFor(unittest.TestCase):
    def test_schemes(self):
        store, prefix = _objstore.store_for("/checkpoints/ns/job/attempt-0", {})
        self.assertEqual((type(store), prefix), (_objstore.LocalStore, "checkpoints/ns/job/attempt-0"))
        with self.assertRaisesRegex(ValueError, "hdfs://"):
            _objstore.store_for("hdfs://x/y", {})
        presign = {"CONVOY_CHECKPOINT_PRESIGN": "1", "CONVOY_PROGRESS_URL": "https://op/progress"}
        for uri, name in (("s3://b/ns/job", "PresignedS3Store"), ("gs://b/ns/job", "PresignedGCSStore"), ("az://b/ns/job", "PresignedAzureStore")):
            store, prefix = _objstore.store_for(uri, presign)
            self.assertEqual((type(store).__name__, store.bucket, prefix), (name, "b", "ns/job"))

    def test_s3_without_boto3_names_the_package(self):
        import sys
        from unittest import mock
        with mock.patch.dict(sys.modules, {"boto3": None, "botocore": None, "botocore.config": None}):
            with self.assertRaisesRegex(ImportError, "python3-boto3"):
                _objstore.store_for("s3://bucket/ns/job", {})


if __name__ == "__main__":
    unittest.main()
