"""Work lost to a kill (SIGKILL, no warning: a node lost), with checkpoints every epoch only and with
CONVOY_CHECKPOINT_INTERVAL_SECONDS as well.

Each run starts a training loop in a new process with the SDK: a step every 10 ms, an epoch of
--epoch seconds, a checkpoint at each epoch's end (as a framework's own checkpointing does) and
whenever convoy.should_checkpoint() turns True, each written in --write seconds. The run is killed
at a random time; the work lost is the time trained since the latest complete checkpoint. Runs
go 8 at a time (they sleep most of it).

    python3 sdk/python/bench/lost_work.py [--kills 40] [--epoch 10] [--interval 1] [--write 0.05] [--seed 1]
"""

import argparse
import concurrent.futures
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

# The training loop, as docs/sdk.md shows it; each checkpoint holds the training time it saves.
TRAIN = textwrap.dedent("""
    import os, sys, time
    import convoy

    directory, epoch_seconds, write = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    start = time.monotonic()
    convoy.should_checkpoint()  # the interval starts with training
    print("ready", flush=True)
    epoch_end = epoch_seconds
    while True:
        time.sleep(0.01)  # a training step
        trained = time.monotonic() - start
        if trained >= epoch_end or convoy.should_checkpoint():
            epoch_end += epoch_seconds if trained >= epoch_end else 0
            time.sleep(write)  # writing the checkpoint
            path = os.path.join(directory, "checkpoint.tmp")
            with open(path, "w") as f:
                f.write(repr(trained))
            os.replace(path, os.path.join(directory, "checkpoint"))
            convoy.checkpoint_saved(os.path.join(directory, "checkpoint"), epoch=int(trained // epoch_seconds))
""")


def run(kill_after, env, args):
    """Seconds of training lost when a run is killed kill_after seconds into training."""
    with tempfile.TemporaryDirectory() as directory:
        proc = subprocess.Popen([sys.executable, "-c", TRAIN, directory, str(args.epoch), str(args.write)], env=env,
                                stdout=subprocess.PIPE, text=True)
        try:
            if proc.stdout.readline() != "ready\n":
                raise RuntimeError("the training loop did not start")
            start = time.monotonic()
            time.sleep(kill_after)
            proc.send_signal(signal.SIGKILL)
            killed = time.monotonic() - start
        finally:
            proc.kill()
            proc.wait()
            proc.stdout.close()
        try:
            with open(os.path.join(directory, "checkpoint")) as f:
                saved = float(f.read())
        except FileNotFoundError:
            saved = 0.0
        return killed - saved


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=40, help="kills per mode")
    parser.add_argument("--epoch", type=float, default=10.0, help="seconds per epoch")
    parser.add_argument("--interval", type=int, default=1, help="CONVOY_CHECKPOINT_INTERVAL_SECONDS")
    parser.add_argument("--write", type=float, default=0.05, help="seconds a checkpoint takes to write")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    kills = [rng.uniform(1, 3 * args.epoch) for _ in range(args.kills)]
    base = {k: v for k, v in os.environ.items() if not k.startswith("CONVOY_")}
    base["PYTHONPATH"] = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    print("| mode | work lost per kill (mean) | p90 | max |")
    print("|---|---|---|---|")
    for mode, extra in (("every epoch (%gs)" % args.epoch, {}),
                        ("every epoch and `intervalSeconds` (%ds)" % args.interval,
                         {"CONVOY_CHECKPOINT_INTERVAL_SECONDS": str(args.interval)})):
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            lost = sorted(pool.map(lambda k: run(k, dict(base, **extra), args), kills))
        print("| %s | %.2f s | %.2f s | %.2f s |" % (mode, statistics.mean(lost), lost[int(0.9 * (len(lost) - 1))], lost[-1]))


if __name__ == "__main__":
    main()
