"""Retention on a real directory: convoy.checkpoint_saved keeps the newest CONVOY_CHECKPOINT_RETENTION
checkpoints it was told of in convoy.checkpoint_dir(), never the one resumed from, the newest one the
operator recorded or one it is asked to keep, and nothing outside the directory: not an earlier
restart attempt's, in the read-only checkpoint_root()."""

import json
import logging
import os
import tempfile
import unittest
from unittest import mock

import support
from support import Recorder

import convoy
from convoy import _retention


class RetentionTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.tmp = tmp.name
        self.dir = os.path.join(tmp.name, "ns", "job")
        os.makedirs(self.dir)
        # Outside Convoy (no endpoint) unless a test starts one: retention works all the same.
        support.set_environ(self, CONVOY_CHECKPOINT_URI=self.dir, CONVOY_CHECKPOINT_ROOT=None, CONVOY_CHECKPOINT_RETENTION="2",
                            CONVOY_RESUME_FROM=None, CONVOY_PROGRESS_URL=None, **dict.fromkeys(support.RANK_VARS))

    def save(self, name, directory=False, content="weights"):
        path = os.path.join(self.dir, name)
        if directory:
            os.makedirs(path)
            with open(os.path.join(path, "model.safetensors"), "w") as f:
                f.write(content)
        else:
            with open(path, "w") as f:
                f.write(content)
        return path

    def listing(self):
        return sorted(os.listdir(self.dir))

    def test_keeps_the_newest_files_and_directories(self):
        for epoch in range(1, 5):
            convoy.checkpoint_saved(self.save("epoch-%d.pt" % epoch), epoch)
        self.assertEqual(self.listing(), [".convoy-checkpoints.json", "epoch-3.pt", "epoch-4.pt"])
        for step in (4, 8, 12):
            convoy.checkpoint_saved(self.save("checkpoint-%d" % step, directory=True), step // 4)
        self.assertEqual(self.listing(), [".convoy-checkpoints.json", "checkpoint-12", "checkpoint-8"])

    def test_only_what_it_was_told_of(self):
        mine = self.save("notes.txt")
        lookalike = self.save("epoch-0.pt")  # written, never reported
        for epoch in range(1, 4):
            convoy.checkpoint_saved(self.save("epoch-%d.pt" % epoch), epoch)
        self.assertTrue(os.path.exists(mine) and os.path.exists(lookalike))
        self.assertEqual(self.listing(), [".convoy-checkpoints.json", "epoch-0.pt", "epoch-2.pt", "epoch-3.pt", "notes.txt"])

    def test_never_the_one_resumed_from(self):
        resumed = self.save("epoch-1.pt")
        convoy.checkpoint_saved(resumed, 1)  # by the attempt before, which was then stopped
        os.environ["CONVOY_RESUME_FROM"] = "file://" + resumed
        for epoch in range(2, 6):
            convoy.checkpoint_saved(self.save("epoch-%d.pt" % epoch), epoch)
        self.assertEqual(self.listing(), [".convoy-checkpoints.json", "epoch-1.pt", "epoch-4.pt", "epoch-5.pt"])
        # A later attempt resuming from another: the first is deleted now.
        os.environ["CONVOY_RESUME_FROM"] = os.path.join(self.dir, "epoch-5.pt")
        convoy.checkpoint_saved(self.save("epoch-6.pt"), 6)
        convoy.checkpoint_saved(self.save("epoch-7.pt"), 7)
        self.assertEqual(self.listing(), [".convoy-checkpoints.json", "epoch-5.pt", "epoch-6.pt", "epoch-7.pt"])

    def tree(self, but):
        """Every path under the job's directory, but those in the directory but, with its size and
        modification time."""
        found = {}
        for parent, dirs, files in os.walk(self.dir):
            for name in dirs + files:
                path = os.path.join(parent, name)
                if os.path.commonpath([path, but]) != but:
                    found[os.path.relpath(path, self.dir)] = (os.path.getsize(path), os.stat(path).st_mtime_ns)
        return found

    def test_each_attempt_deletes_only_in_its_own_directory(self):
        # Each attempt writes in its own directory under the job's (operator/pkg/builder,
        # AttemptCheckpointURI), the only one mounted read-write in its pods.
        os.environ["CONVOY_CHECKPOINT_ROOT"] = self.dir
        os.environ["CONVOY_CHECKPOINT_URI"] = os.path.join(self.dir, "attempt-0")
        self.assertEqual(convoy.checkpoint_dir(), os.environ["CONVOY_CHECKPOINT_URI"])
        for epoch in (1, 2, 3):
            convoy.checkpoint_saved(self.save("attempt-0/epoch-%d.pt" % epoch), epoch)
        self.assertEqual(sorted(os.listdir(os.path.join(self.dir, "attempt-0"))), [".convoy-checkpoints.json", "epoch-2.pt", "epoch-3.pt"])
        # A list in the job's directory, as an SDK that listed there across attempts left it.
        with open(os.path.join(self.dir, ".convoy-checkpoints.json"), "w") as f:
            json.dump({"checkpoints": [{"path": "attempt-0/epoch-%d.pt" % e, "epoch": e} for e in (2, 3)]}, f)
        # Attempt 1 resumes from attempt 0's latest; the kubelet made its directory, and the rest of
        # the job's directory is read-only (really so for a user other than root).
        os.makedirs(os.path.join(self.dir, "attempt-1"))
        for path in (os.path.join(self.dir, "attempt-0"), self.dir):
            os.chmod(path, 0o555)
            self.addCleanup(os.chmod, path, 0o755)
        os.environ["CONVOY_CHECKPOINT_URI"] = os.path.join(self.dir, "attempt-1")
        os.environ["CONVOY_RESUME_FROM"] = os.path.join(self.dir, "attempt-0", "epoch-3.pt")
        before = self.tree(but=os.environ["CONVOY_CHECKPOINT_URI"])
        with self.assertNoLogs("convoy", logging.WARNING):
            for epoch in (4, 5, 6, 7):
                convoy.checkpoint_saved(self.save("attempt-1/epoch-%d.pt" % epoch), epoch)
        self.assertEqual(self.tree(but=os.environ["CONVOY_CHECKPOINT_URI"]), before)
        self.assertEqual(sorted(os.listdir(os.path.join(self.dir, "attempt-1"))), [".convoy-checkpoints.json", "epoch-6.pt", "epoch-7.pt"])

    def test_never_one_it_is_asked_to_keep(self):
        best = self.save("epoch-1.pt")
        for epoch in range(1, 5):
            path = best if epoch == 1 else self.save("epoch-%d.pt" % epoch)
            convoy.checkpoint_saved(path, epoch, keep=[best])
        self.assertEqual(self.listing(), [".convoy-checkpoints.json", "epoch-1.pt", "epoch-3.pt", "epoch-4.pt"])

    def test_the_list_outlives_the_process(self):
        for epoch in (1, 2):
            convoy.checkpoint_saved(self.save("epoch-%d.pt" % epoch), epoch)
        with open(os.path.join(self.dir, ".convoy-checkpoints.json")) as f:
            listed = json.load(f)["checkpoints"]
        self.assertEqual([(c["path"], c["epoch"]) for c in listed], [("epoch-1.pt", 1), ("epoch-2.pt", 2)])
        # A new process (a restarted gang) knows of them from the list: its first checkpoint
        # deletes epoch-1.pt, which this process never reported.
        support.subprocess_run(self, "import convoy; convoy.checkpoint_saved(%r, 3)" % self.save("epoch-3.pt"))
        self.assertEqual(self.listing(), [".convoy-checkpoints.json", "epoch-2.pt", "epoch-3.pt"])

    def test_a_rewritten_checkpoint_counts_as_the_newest(self):
        last = self.save("last.ckpt")
        convoy.checkpoint_saved(last, 1)
        convoy.checkpoint_saved(self.save("epoch=1.ckpt"), 2)
        convoy.checkpoint_saved(self.save("last.ckpt", content="epoch 3"), 3)
        convoy.checkpoint_saved(self.save("epoch=3.ckpt"), 4)
        self.assertEqual(self.listing(), [".convoy-checkpoints.json", "epoch=3.ckpt", "last.ckpt"])

    def test_nothing_outside_the_directory(self):
        outside = os.path.join(self.tmp, "precious.pt")
        with open(outside, "w") as f:
            f.write("not a checkpoint of this job")
        # Reported from outside: not listed, never deleted.
        convoy.checkpoint_saved(outside, 1)
        # Listed by hand with a way out of the directory, and through a link to a directory outside.
        os.symlink(self.tmp, os.path.join(self.dir, "up"))
        with open(os.path.join(self.dir, ".convoy-checkpoints.json"), "w") as f:
            json.dump({"checkpoints": [{"path": "../../precious.pt", "epoch": 1}, {"path": "up/precious.pt", "epoch": 1},
                                       {"path": ".", "epoch": 1}, {"path": "", "epoch": 1}]}, f)
        for epoch in range(2, 6):
            convoy.checkpoint_saved(self.save("epoch-%d.pt" % epoch), epoch)
        self.assertTrue(os.path.isfile(outside))
        self.assertTrue(os.path.isdir(self.dir))
        self.assertEqual(self.listing(), [".convoy-checkpoints.json", "epoch-4.pt", "epoch-5.pt", "up"])
        # A link in the directory listed as a checkpoint: the link goes, not what it points to.
        link = os.path.join(self.dir, "link.pt")
        os.symlink(outside, link)
        for path, epoch in ((link, 6), (self.save("epoch-7.pt"), 7), (self.save("epoch-8.pt"), 8)):
            convoy.checkpoint_saved(path, epoch)
        self.assertFalse(os.path.lexists(link))
        self.assertTrue(os.path.isfile(outside))

    def test_a_failed_delete_is_a_warning(self):
        stuck = self.save("stuck", directory=True)
        convoy.checkpoint_saved(stuck, 1)
        with mock.patch.object(_retention.shutil, "rmtree", side_effect=PermissionError(13, "Permission denied")):
            with self.assertLogs("convoy", logging.WARNING) as logs:
                for epoch in (2, 3):
                    self.assertFalse(convoy.checkpoint_saved(self.save("epoch-%d.pt" % epoch), epoch))
        self.assertEqual(self.listing(), [".convoy-checkpoints.json", "epoch-2.pt", "epoch-3.pt", "stuck"])
        self.assertTrue(any("deleting the old checkpoint" in line and "Permission denied; kept" in line for line in logs.output),
                        logs.output)
        # Still listed: tried again at the next checkpoint, deleted once it can be.
        convoy.checkpoint_saved(self.save("epoch-4.pt"), 4)
        self.assertEqual(self.listing(), [".convoy-checkpoints.json", "epoch-3.pt", "epoch-4.pt"])

    def test_an_unreadable_list_is_a_warning(self):
        with open(os.path.join(self.dir, ".convoy-checkpoints.json"), "w") as f:
            f.write("{not json")
        with self.assertLogs("convoy", logging.WARNING):
            convoy.checkpoint_saved(self.save("epoch-1.pt"), 1)
        for epoch in (2, 3):
            convoy.checkpoint_saved(self.save("epoch-%d.pt" % epoch), epoch)
        self.assertEqual(self.listing(), [".convoy-checkpoints.json", "epoch-2.pt", "epoch-3.pt"])

    def test_without_retention_or_on_other_ranks_nothing_is_deleted(self):
        os.environ["CONVOY_CHECKPOINT_RETENTION"] = "1"
        os.environ["RANK"] = "1"
        for epoch in (1, 2):
            convoy.checkpoint_saved(self.save("epoch-%d.pt" % epoch), epoch)
        self.assertEqual(self.listing(), ["epoch-1.pt", "epoch-2.pt"])
        # A rank that reports lists in its own list and deletes nothing: only rank 0 deletes.
        convoy.checkpoint_saved(self.save("epoch-3.pt"), 3, all_ranks=True)
        convoy.checkpoint_saved(self.save("epoch-4.pt"), 4, all_ranks=True)
        self.assertEqual(self.listing(), [".convoy-checkpoints.rank-1.json"] + ["epoch-%d.pt" % e for e in range(1, 5)])
        del os.environ["RANK"], os.environ["CONVOY_CHECKPOINT_RETENTION"]
        for epoch in (5, 6, 7):
            convoy.checkpoint_saved(self.save("epoch-%d.pt" % epoch), epoch)
        self.assertEqual(self.listing(), [".convoy-checkpoints.json", ".convoy-checkpoints.rank-1.json"]
                         + ["epoch-%d.pt" % e for e in range(1, 8)])

    def rank_saves(self, epoch, ranks=4):
        """Every rank of a gang writes its shard of the checkpoint of epoch and reports it with
        all_ranks=True, as the README's sharded example does."""
        for r in range(ranks):
            env = dict(os.environ, RANK=str(r))
            convoy.Reporter(env=env).checkpoint_saved(self.save("epoch-%d-rank-%d.pt" % (epoch, r)), epoch, all_ranks=True)

    def shards(self):
        return sorted(name for name in self.listing() if name.endswith(".pt"))

    def test_sharded_checkpoints_are_kept_whole(self):
        # 4 ranks, retention 2: each checkpoint is one group of 4 shards, and only whole groups older
        # than the newest 2 go; the newest checkpoint is never cut.
        for epoch in (1, 2):
            self.rank_saves(epoch)
            self.assertEqual(self.shards(), ["epoch-%d-rank-%d.pt" % (e, r) for e in range(1, epoch + 1) for r in range(4)])
        self.rank_saves(3)
        # Rank 0 deletes the checkpoint of epoch 1: its own shard at once, another rank's shard once
        # that rank has listed 2 newer ones.
        self.rank_saves(4)
        self.assertEqual(self.shards(), sorted(["epoch-%d-rank-%d.pt" % (e, r) for e in (3, 4) for r in range(4)]
                                               + ["epoch-2-rank-%d.pt" % r for r in (1, 2, 3)]))
        # The other ranks list their shards and delete nothing, nor does rank 0 touch a rank's newest.
        os.environ["RANK"] = "3"
        convoy.checkpoint_saved(self.save("epoch-9-rank-3.pt"), 9, all_ranks=True)
        self.assertIn("epoch-9-rank-3.pt", self.shards())
        self.assertIn("epoch-3-rank-3.pt", self.shards())

    def test_sharded_resume_checkpoint_is_kept_whole(self):
        self.rank_saves(1)
        os.environ["CONVOY_RESUME_FROM"] = os.path.join(self.dir, "epoch-1-rank-0.pt")
        for epoch in range(2, 6):
            self.rank_saves(epoch)
        self.assertEqual(self.shards(), sorted(["epoch-%d-rank-%d.pt" % (e, r) for e in (1, 4, 5) for r in range(4)]
                                               + ["epoch-3-rank-%d.pt" % r for r in (1, 2, 3)]))

    def test_object_storage_is_left_alone(self):
        os.environ["CONVOY_CHECKPOINT_URI"] = "s3://bucket/ns/job"
        os.environ["CONVOY_CHECKPOINT_RETENTION"] = "1"
        for epoch in (1, 2):
            convoy.checkpoint_saved(self.save("epoch-%d.pt" % epoch), epoch)
        self.assertEqual(self.listing(), ["epoch-1.pt", "epoch-2.pt"])

    def test_keeps_the_newest_the_operator_recorded(self):
        server = Recorder()
        self.addCleanup(server.close)
        os.environ["CONVOY_PROGRESS_URL"] = server.url
        convoy.configure(retries=0)
        self.addCleanup(convoy.configure)
        os.environ["CONVOY_CHECKPOINT_RETENTION"] = "1"
        self.assertTrue(convoy.checkpoint_saved(self.save("epoch-1.pt"), 1))
        # Epochs 2 and 3 do not reach the operator: a restart would resume from epoch 1, kept.
        server.answers = [500, 500]
        with self.assertLogs("convoy", logging.WARNING):
            self.assertFalse(convoy.checkpoint_saved(self.save("epoch-2.pt"), 2))
            self.assertFalse(convoy.checkpoint_saved(self.save("epoch-3.pt"), 3))
        self.assertEqual(self.listing(), [".convoy-checkpoints.json", "epoch-1.pt", "epoch-3.pt"])
        self.assertTrue(convoy.checkpoint_saved(self.save("epoch-4.pt"), 4))
        self.assertEqual(self.listing(), [".convoy-checkpoints.json", "epoch-4.pt"])
        self.assertEqual([b["epoch"] for b in server.bodies("checkpoint")], [1, 2, 3, 4])

    def test_returns_what_it_deleted(self):
        os.environ["CONVOY_CHECKPOINT_RETENTION"] = "1"
        first, second = self.save("a.pt"), self.save("b.pt")
        self.assertEqual(_retention.track(first, 1, recorded=False, reporting=False), [])
        self.assertEqual(_retention.track(second, 2, recorded=False, reporting=False), [os.path.realpath(first)])


if __name__ == "__main__":
    unittest.main()
