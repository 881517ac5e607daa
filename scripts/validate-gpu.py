#!/usr/bin/env python3
"""One rank of scripts/validate-gpu.sh: torch.distributed (NCCL backend) collectives on cuda:0 with
checked results. Env: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (+ NCCL_* / RERAIL_* from the
caller). Prints 'OK <op> <n>' per checked op, exits 1 at the first wrong result."""
import os, sys, datetime
import torch
import torch.distributed as dist


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = torch.device("cuda:0")
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=120),
                            device_id=dev)
    iters = int(os.environ.get("VALIDATE_ITERS", "3"))
    sizes = [1, 1000, 1 << 20, (4 << 20) + 3]
    bad = 0

    it = 0

    def check(name, n, got, want):
        nonlocal bad
        if torch.equal(got, want):
            print(f"OK {name} {n}", flush=True)
        else:
            bad += 1
            diff = (got != want).nonzero()
            i = diff[0].tolist()
            print(f"WRONG {name} {n} iter {it}: {diff.shape[0]} elements differ, first at {i}: "
                  f"got {got[tuple(i)].item()} want {want[tuple(i)].item()}", flush=True)

    for it in range(iters):
        for n in sizes:
            base = torch.arange(n, device=dev, dtype=torch.float32) % 251
            # all_reduce: sum over ranks of (base + rank + it)
            t = base + rank + it
            dist.all_reduce(t)
            check("all_reduce", n, t, base * world + sum(range(world)) + world * it)
            # all_gather
            outs = [torch.empty(n, device=dev) for _ in range(world)]
            dist.all_gather(outs, base + 10 * rank)
            for r in range(world):
                check("all_gather", n, outs[r], base + 10 * r)
            # reduce_scatter: each rank contributes a world*n tensor
            inp = torch.cat([base + r + rank for r in range(world)])
            out = torch.empty(n, device=dev)
            dist.reduce_scatter_tensor(out, inp)
            check("reduce_scatter", n, out, base * world + rank * world + sum(range(world)))
            # broadcast from the last rank
            b = base + 7 if rank == world - 1 else torch.zeros(n, device=dev)
            dist.broadcast(b, src=world - 1)
            check("broadcast", n, b, base + 7)
            # send/recv ring
            nxt, prv = (rank + 1) % world, (rank - 1) % world
            rbuf = torch.empty(n, device=dev)
            ops = [dist.P2POp(dist.isend, base + 100 * rank, nxt), dist.P2POp(dist.irecv, rbuf, prv)]
            for w in dist.batch_isend_irecv(ops):
                w.wait()
            check("send_recv", n, rbuf, base + 100 * prv)
    torch.cuda.synchronize()
    dist.destroy_process_group()
    print(f"RANK {rank} DONE wrong={bad}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
