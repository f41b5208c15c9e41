"""Saves and loads the same checkpoint through the SDK (convoy.Saver) to a local directory and to
the S3 server of CONVOY_BENCH_S3 (AWS_* in the environment): prints JSON, MiB/s of each, the median of
the rounds. Run by `go run ./test/bench/realnode -checkpoint-mb N`."""

import json
import os
import shutil
import statistics
import sys
import tempfile
import time

from convoy._objcheckpoint import Saver


def measure(root, src, megabytes, rounds):
    env = dict(os.environ, CONVOY_CHECKPOINT_ROOT=root, CONVOY_CHECKPOINT_URI=root + "/attempt-0", RANK="0", WORLD_SIZE="1")
    saves, loads = [], []
    for epoch in range(1, rounds + 1):
        saver = Saver(env)
        began = time.perf_counter()
        saver.save(src, epoch, report=lambda *_: True)
        saves.append(time.perf_counter() - began)
        dst = tempfile.mkdtemp()
        began = time.perf_counter()
        saver.load(dst)
        loads.append(time.perf_counter() - began)
        shutil.rmtree(dst)
    return {"save_mbps": megabytes / statistics.median(saves), "load_mbps": megabytes / statistics.median(loads)}


def main():
    megabytes, rounds = int(sys.argv[1]), int(sys.argv[2])
    src = tempfile.mkdtemp()
    files = 4
    for i in range(files):
        with open(os.path.join(src, "shard-%d.bin" % i), "wb") as f:
            f.write(os.urandom(megabytes * (1 << 20) // files))
    volume = tempfile.mkdtemp()
    results = {"volume": measure(volume, src, megabytes, rounds),
               "s3": measure(os.environ["CONVOY_BENCH_S3"], src, megabytes, rounds)}
    shutil.rmtree(src)
    shutil.rmtree(volume)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
