"""Trains a small MLP on scikit-learn's digits (8x8 images of handwritten digits, shipped with
scikit-learn) with PyTorch DistributedDataParallel on CPU (gloo), one process per pod of a Convoy
TrainingJob. It reports every epoch to the operator, checkpoints, and resumes after a restart.

Run by each pod as `python3 train.py`: it joins the process group from MASTER_ADDR, MASTER_PORT,
WORLD_SIZE and RANK, which Convoy sets. In an elastic job (spec.elastic), whose pods get torchrun's
PET_* variables instead, it runs itself under torchrun, which starts it again with the new world
after every rendezvous. README.md lists every variable it reads.
"""

import glob
import os
import re
import signal
import sys
import tempfile
import threading
import time
from datetime import timedelta

import convoy


def run_under_torchrun():
    """In a pod of an elastic job (PET_RDZV_BACKEND set, not yet under torchrun) become torchrun's
    agent, which joins the c10d rendezvous of PET_RDZV_ENDPOINT with PET_NNODES=<min>:<max> and
    runs this script as its worker after each (re)rendezvous. The agent ends its worker on SIGTERM
    and exits as the signal would have ended it."""
    if not os.environ.get("PET_RDZV_BACKEND") or "TORCHELASTIC_RUN_ID" in os.environ:
        return
    from torch.distributed.elastic.multiprocessing.api import SignalException, Std
    from torch.distributed.launcher.api import elastic_launch
    from torch.distributed.run import config_from_args, parse_args

    # What `torchrun train.py` does, but for PyTorch 1.13 on Python 3.11, where Std.from_str("0"),
    # torchrun's default for --redirects and --tee, is None (Python 3.11 does not iterate a flag's
    # 0 member) and the agent fails at once.
    config, cmd, cmd_args = config_from_args(parse_args([os.path.abspath(__file__)]))
    for name in ("redirects", "tee"):  # PyTorch 2.x replaced both with logs_specs
        if hasattr(config, name):
            setattr(config, name, getattr(config, name) or Std.NONE)
    try:
        elastic_launch(config, cmd)(*cmd_args)
    except SignalException as e:
        print(f"torchrun: {e.sigval.name}: workers stopped", flush=True)
        sys.exit(128 + e.sigval)
    sys.exit(0)


run_under_torchrun()


def exit_promptly_on_sigterm():
    """Exit with 143 on SIGTERM, as when the operator stops or restarts the gang. A container's PID 1
    ignores SIGTERM without a handler, and a Python handler only runs when the main thread is back in
    Python, not while it waits in a collective; a thread waiting for the signal runs at once. Call
    this before any thread starts (before importing torch): threads inherit the blocked signal."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})

    def wait():
        signal.sigwait({signal.SIGTERM})
        print(f"rank={os.environ.get('RANK', '0')} SIGTERM: exiting", flush=True)
        os._exit(128 + signal.SIGTERM)

    threading.Thread(target=wait, daemon=True).start()


exit_promptly_on_sigterm()

import torch  # noqa: E402 (after the SIGTERM thread, see above)
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset  # noqa: E402

# How long a rank whose collective failed (another rank died) waits before failing itself: the
# operator, seeing the dead rank's exit code, stops the gang in the meantime, so this rank exits
# with 143 (SIGTERM) rather than 1, which a restartPolicy ExitCode job would not retry.
PEER_LOSS_WAIT = 30
# Under torchrun (an elastic job) the agent restarts the workers after another rank is lost, at
# once: the training continues with the ranks left, from the latest checkpoint.
ELASTIC = "TORCHELASTIC_RUN_ID" in os.environ


def main():
    # Hyperparameters, as spec.hyperparameters sets them; BATCH_SIZE is the global batch.
    epochs = int(os.environ.get("EPOCHS", "20"))
    learning_rate = float(os.environ.get("LEARNING_RATE", "0.01"))
    batch_size = int(os.environ.get("BATCH_SIZE", "64"))
    optimizer_name = os.environ.get("OPTIMIZER", "adam").lower()
    epoch_sleep = float(os.environ.get("CONVOY_EXAMPLE_EPOCH_SLEEP", "0"))
    hold = os.environ.get("CONVOY_EXAMPLE_HOLD_FILE")
    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)  # the model is tiny; more threads only contend with the other ranks

    init_distributed()
    rank, world = dist.get_rank(), dist.get_world_size()

    # The same split on every rank; each rank trains on its shard of the training set.
    x, y = load_digits(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(x / 16.0, y, test_size=0.2, random_state=0, stratify=y)
    train = TensorDataset(torch.tensor(x_train, dtype=torch.float32), torch.tensor(y_train))
    test_x, test_y = torch.tensor(x_test, dtype=torch.float32), torch.tensor(y_test)
    sampler = DistributedSampler(train, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(train, batch_size=max(batch_size // world, 1), sampler=sampler)

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    model = DistributedDataParallel(net)
    if optimizer_name == "sgd":
        optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate, momentum=0.9)
    elif optimizer_name in ("adam", "adamw"):
        optimizer = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[optimizer_name](model.parameters(), lr=learning_rate)
    else:
        raise SystemExit(f"OPTIMIZER={optimizer_name!r}: use adam, adamw or sgd")

    # Resume: rank 0 reads the checkpoint and sends it to the others. On object storage (s3://)
    # every rank saves its shard through the SDK, which rank 0 commits.
    directory = convoy.checkpoint_dir()
    objects = directory is None and convoy.checkpoint_uri() is not None
    scratch = tempfile.mkdtemp()
    start, metrics = 1, {}
    state = [None]
    if ELASTIC and (convoy.list_checkpoints() if objects else newest_checkpoint(convoy.checkpoint_root())):
        # The pod's CONVOY_RESUME_FROM dates from its start; after a rendezvous the job's own
        # newest complete checkpoint is later.
        os.environ.pop("CONVOY_RESUME_FROM", None)
    if rank == 0:
        if objects:
            found = convoy.load_checkpoint(scratch)
            path = found and os.path.join(found.path, "model.pt")
        else:
            path = convoy.resume_from() or newest_checkpoint(convoy.checkpoint_root())
        if path:
            state[0] = torch.load(path, map_location="cpu")
    dist.broadcast_object_list(state, src=0)
    if state[0] is not None:
        net.load_state_dict(state[0]["model"])
        optimizer.load_state_dict(state[0]["optimizer"])
        start, metrics = state[0]["epoch"] + 1, state[0]["metrics"]
        print(f"rank={rank} resumed from epoch {state[0]['epoch']}", flush=True)
    if ELASTIC:
        print(f"rank={rank} world={world} starts at epoch {start}", flush=True)

    throughput = convoy.Throughput()
    try:
        for epoch in range(start, epochs + 1):
            sampler.set_epoch(epoch)
            model.train()
            throughput.start()
            totals = torch.zeros(2)  # summed loss, samples
            for inputs, labels in loader:
                optimizer.zero_grad()
                loss = F.cross_entropy(model(inputs), labels)
                loss.backward()
                optimizer.step()
                totals += torch.tensor([loss.item() * len(labels), len(labels)])
            dist.all_reduce(totals)
            throughput.add(int(totals[1]))  # every rank's samples
            metrics = {"loss": (totals[0] / totals[1]).item(), "accuracy": accuracy(net, test_x, test_y)}
            print(f"rank={rank} epoch={epoch}/{epochs} loss={metrics['loss']:.4f} accuracy={metrics['accuracy']:.4f}", flush=True)
            convoy.report(epoch=epoch, total_epochs=epochs, step=epoch * len(loader), metrics=metrics,
                          samples_per_second=throughput.rate())
            # The epoch's checkpoint, or one the operator asks for (before it resizes or stops the
            # gang): rank 0 hears of a request, and on object storage every rank saves.
            asked = torch.tensor([float(rank == 0 and convoy.should_checkpoint())])
            if objects:
                dist.all_reduce(asked)
            saved = None
            if epoch % convoy.checkpoint_frequency() == 0 or asked.item():
                if objects:
                    path = save_checkpoint(scratch, epoch, net, optimizer, metrics, name="model.pt")
                    convoy.save_checkpoint(path, epoch)
                elif rank == 0 and directory:
                    saved = save_checkpoint(directory, epoch, net, optimizer, metrics)
                    convoy.checkpoint_saved(saved, epoch)
            time.sleep(epoch_sleep)
            if hold and rank == 0:  # the other ranks wait in the next collective
                wait_while(hold, epoch, epochs, metrics, saved)
    except RuntimeError as e:  # gloo fails the collective when another rank has died
        if ELASTIC:
            print(f"rank={rank} training failed: {e}; torchrun starts the workers again", flush=True)
            sys.exit(1)
        print(f"rank={rank} training failed: {e}; waiting {PEER_LOSS_WAIT}s for the gang to be stopped", flush=True)
        time.sleep(PEER_LOSS_WAIT)
        raise

    print(f"rank={rank} final accuracy={metrics['accuracy']:.4f}", flush=True)
    convoy.report(epoch=epochs, total_epochs=epochs, step=epochs * len(loader), metrics=metrics, final=True)
    # DDP goes first, so that destroy_process_group frees the group, letting go of the GIL while gloo's
    # threads stop; freed by DDP, the group can deadlock with them at exit (PyTorch 1.13).
    del model
    dist.destroy_process_group()


def init_distributed():
    """init_process_group as init_method="env://" does, from MASTER_ADDR, MASTER_PORT, WORLD_SIZE and
    RANK, but waiting for the other ranks in Python: torch's store holds the GIL while it waits, which
    would keep the SIGTERM thread from running until every rank has come. CPU tensors need gloo,
    whatever CONVOY_DIST_BACKEND (spec.networking.backend) says."""
    addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    while True:
        try:
            store = dist.TCPStore(addr, port, world, rank == 0, timeout=timedelta(seconds=2), wait_for_workers=False)
            break
        except (RuntimeError, TimeoutError):
            if rank == 0:
                raise
            time.sleep(1)  # rank 0 is not listening yet, or its DNS name does not resolve yet
    store.set_timeout(timedelta(minutes=30))
    store.add("joined", 1)
    while store.add("joined", 0) < world:
        time.sleep(0.1)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)


def wait_while(hold, epoch, epochs, metrics, saved):
    """Rank 0 waits while the file hold exists, reporting progress; the epoch's checkpoint saved,
    still the model's state, answers a checkpoint request of the operator's."""
    while os.path.exists(hold):
        convoy.report(epoch=epoch, total_epochs=epochs, metrics=metrics)  # at most every 5 s
        if saved and convoy.should_checkpoint():
            convoy.checkpoint_saved(saved, epoch)
        time.sleep(0.1)


def accuracy(net, inputs, labels):
    net.eval()
    with torch.no_grad():
        return (net(inputs).argmax(dim=1) == labels).float().mean().item()


def checkpoints(directory):
    """The epoch-<N>.pt files in directory and its restart attempts' attempt-<n> by epoch, oldest first."""
    found = []
    for pattern in ("epoch-*.pt", os.path.join("attempt-*", "epoch-*.pt")) if directory else ():
        for path in glob.glob(os.path.join(glob.escape(directory), pattern)):
            m = re.fullmatch(r"epoch-(\d+)\.pt", os.path.basename(path))
            if m:
                found.append((int(m.group(1)), path))
    return [path for _, path in sorted(found)]


def newest_checkpoint(directory):
    found = checkpoints(directory)
    return found[-1] if found else None


def save_checkpoint(directory, epoch, net, optimizer, metrics, name=None):
    """Writes epoch-<N>.pt (or name) atomically (a reader never sees half a file). convoy.checkpoint_saved,
    once told of it, keeps the newest CONVOY_CHECKPOINT_RETENTION of those it was told of."""
    path = os.path.join(directory, name or f"epoch-{epoch}.pt")
    with open(path + ".tmp", "wb") as f:
        torch.save({"epoch": epoch, "model": net.state_dict(), "optimizer": optimizer.state_dict(), "metrics": metrics}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(path + ".tmp", path)
    return path


if __name__ == "__main__":
    main()
