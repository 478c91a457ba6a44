"""Run under torchrun: the NCCL operations of tabjob's DDP fits (trainer/tabjob_trainer/models/network.py), on a GPU.

A DDP fit of NN_TORCH on GPUs gets its own NCCL process group (scheduler.make_groups), wraps the MLP in
DistributedDataParallel with its device id, trains under autocast, broadcasts the stop decision as an object and
the best weights as tensors. This probe does each of those once and writes what it saw as JSON (rank 0):

    python -m torch.distributed.run --standalone --nproc-per-node=N -m hack.gpu.nccl_probe OUT.json [--share-gpu]

--share-gpu puts every rank on cuda:0, to see whether NCCL lets ranks share one GPU.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from tabjob_trainer.models.mlp import TabularMLP


def _nccl_version() -> str:
    version = torch.cuda.nccl.version()  # a tuple in recent torch, an int in older ones
    return ".".join(str(v) for v in version) if isinstance(version, tuple) else str(version)


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    rank, world, local = (int(os.environ[k]) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"))
    device = torch.device("cuda", 0 if "--share-gpu" in argv else local)
    torch.cuda.set_device(device)
    # device_id makes NCCL create its communicator now, so a refusal shows here rather than at the first op.
    dist.init_process_group("nccl", device_id=device)
    group = dist.new_group(ranks=list(range(world)), backend="nccl")
    assert isinstance(group, dist.ProcessGroup)  # every rank is a member, so never GroupMember.NON_GROUP_MEMBER
    torch.manual_seed(0)
    net = TabularMLP(8, [3], 1, 64, 2, 0.0, 4).to(device)
    ddp = DistributedDataParallel(net, device_ids=[device.index], process_group=group)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-2)
    gen = torch.Generator(device=device).manual_seed(rank)  # each rank its own rows, as a DistributedSampler gives
    dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    for _ in range(3):
        num = torch.randn(256, 8, device=device, generator=gen)
        cat = torch.randint(0, 4, (256, 1), device=device, generator=gen)
        with torch.autocast("cuda", dtype=dtype):
            loss = ddp(num, cat).float().pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    flat = torch.cat([p.detach().float().flatten() for p in net.parameters()])
    everyone = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(everyone, flat, group=group)
    same = all(torch.equal(everyone[0], other) for other in everyone)
    box = [rank == 0]
    dist.broadcast_object_list(box, src=0, group=group)
    for tensor in net.state_dict().values():
        dist.broadcast(tensor, src=0, group=group)
    torch.cuda.synchronize()
    if rank == 0:
        result = {
            "world": world,
            "backend": str(dist.get_backend(group)),
            "device": str(device),
            "amp": str(dtype).removeprefix("torch."),
            "params_equal_after_steps": same,
            "stop_decision_broadcast": bool(box[0]),
            "nccl": _nccl_version(),
        }
        out.write_text(json.dumps(result))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
