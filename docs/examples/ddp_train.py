"""A data-parallel (DDP) training script under gavelsched (docs/iterator.md, "Distributed
jobs: the order of set-up").

A gavelsched worker starts one process per GPU with torchrun's variables (RANK, LOCAL_RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and its own; the job trains until its lease ends, and
the next lease resumes it from its checkpoint. Without a scheduler, start it with torchrun;
it trains --steps steps:

    torchrun --nproc-per-node 2 docs/examples/ddp_train.py --steps 20
"""

import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from gavelsched import GavelIterator

parser = argparse.ArgumentParser(description="A tiny DDP job under GavelIterator.")
parser.add_argument("--steps", type=int, default=20, help="steps to train without a scheduler")
args = parser.parse_args()

# 1. The process group, first: GavelIterator looks for it when it is built.
cuda = torch.cuda.is_available()
dist.init_process_group("nccl" if cuda else "gloo")
rank, world = dist.get_rank(), dist.get_world_size()
if cuda:
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(device)   # nccl's collectives (GavelIterator's too) run on it
else:
    device = torch.device("cpu")

# 2. The model, wrapped in DDP, and its optimizer.
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
net = net.to(device=device, dtype=torch.float64)
model = DistributedDataParallel(net, device_ids=[device.index] if cuda else None)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


class Batches:
    """This rank's share of batch t is a function of t alone, so a job resumed at step t
    sees the batches an uninterrupted run would have seen from there on."""

    def __init__(self, start=0, stop=None):
        self.start, self.stop = start, stop

    def __iter__(self):
        t = self.start
        while self.stop is None or t < self.stop:
            g = torch.Generator().manual_seed(world * t + rank)
            x = torch.randn(8, 4, generator=g, dtype=torch.float64)
            yield x.to(device), x.sum(dim=1, keepdim=True).sin().to(device)
            t += 1


def save(directory):    # rank 0 only (GavelIterator's default): DDP keeps the ranks equal
    torch.save({"model": net.state_dict(), "optimizer": optimizer.state_dict()},
               os.path.join(directory, "ckpt.pt"))


def load(directory):    # every rank
    state = torch.load(os.path.join(directory, "ckpt.pt"), map_location=device,
                       weights_only=True)
    net.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])


# 3. The iterator, last: while it is built it loads the checkpoint into the model above.
data = Batches(stop=args.steps)
iterator = GavelIterator(data, None, load, save)
if not iterator.standalone:     # under a scheduler: from the job's step until the lease ends
    data.start, data.stop = iterator.steps, None
for x, y in iterator:
    optimizer.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()

# 4. The end: the iterator, then the process group. The barrier keeps every rank in the
# group until rank 0 has written the final checkpoint.
iterator.close()
dist.barrier()
dist.destroy_process_group()
