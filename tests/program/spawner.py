#!/usr/bin/env python3
"""A clean program for launcher = "none": it starts its own DDP workers.

Started once with WORLD_SIZE = the number of workers, it spawns that many
processes (torch.multiprocessing), each one rank of tiny.py's training with
RANK and LOCAL_RANK set; every worker reports through slurm_pilot to the
PILOT_METRICS it inherits, its records marked with its rank. Arguments are
passed to tiny.py. SIGTERM or SIGINT ends the workers too.
"""

import os
import signal
import sys

import torch.multiprocessing as mp

import tiny


def worker(index, world, argv):
    os.environ.update(RANK=str(index), LOCAL_RANK=str(index),
                      WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world))
    sys.exit(tiny.main(argv))


def main():
    world = int(os.environ.get("WORLD_SIZE") or 1)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    ctx = mp.start_processes(worker, args=(world, sys.argv[1:]), nprocs=world,
                             join=False, start_method="spawn")

    def stop(signum, frame):
        for p in ctx.processes:
            if p.is_alive():
                p.terminate()
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while not ctx.join():  # raises when a worker fails
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
