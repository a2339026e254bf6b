# Sourced by bench/gpu-*.sh (after their own header): the environment every
# GPU benchmark runs in and the paths they share. Leaves the caller in the
# repository root with
#   out     the folder that comes back ($OUT, default /tmp/pilot-bench-out)
#   anchor  the anchor script (the caller's first argument, default
#           .carry/py_gpt_step.py)
# and gives fresh_work DIR: an empty work folder in $work, and $out.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
out=${OUT:-/tmp/pilot-bench-out}
anchor=${1:-.carry/py_gpt_step.py}
fresh_work() {
  work=$1
  rm -rf "$work"
  mkdir -p "$out" "$work"
}
