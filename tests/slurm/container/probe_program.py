"""A program for the Python image of the container case: the image's own
interpreter (no torch in it), reporting through the slurm_pilot probe the
pilot binds in, one process per rank. At step K rank 0 saves a one-tensor
safetensors file and the torch.save state the image carries; resumed, every
rank reads them and starts at K+1. It prints the file only the image has."""
import os
import shutil
import struct
import sys

import slurm_pilot

with open("/etc/pilot-image") as f:
    print(f.read().strip(), file=sys.stderr)
print("python: %s %s" % (sys.executable, sys.version.split()[0]), file=sys.stderr)

steps = slurm_pilot.steps() or 10
k = slurm_pilot.checkpoint_step() or 5
rank = int(os.environ.get("RANK", "0"))
first = 1
resume = slurm_pilot.resume_dir()
if resume:
    with open(os.path.join(resume, "model.safetensors"), "rb") as f:
        f.read()
    with open(os.path.join(resume, "state.pt"), "rb") as f:
        f.read()
    slurm_pilot.restored(k)
    first = k + 1
for i in range(first, steps + 1):
    slurm_pilot.step(100.5 - i, tokens=64, step=i)
    if slurm_pilot.checkpoint_due(i) and not resume:
        slurm_pilot.saved(i)
        if rank == 0:
            out = slurm_pilot.checkpoint_dir()
            os.makedirs(out, exist_ok=True)
            header = b'{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'
            with open(os.path.join(out, "model.safetensors"), "wb") as f:
                f.write(struct.pack("<Q", len(header)) + header + struct.pack("<f", 1.0))
            shutil.copy("/ckpt/state.pt", os.path.join(out, "state.pt"))
