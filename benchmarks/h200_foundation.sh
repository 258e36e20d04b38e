#!/usr/bin/env bash
# Issue 2 on the H200, one device call: device facts, correctness of every variant × layout × dtype
# (tests marked gpu), then the kernel-quality benchmark. Results land in $OUT.
#   run from the repo root on the device machine:  bash benchmarks/h200_foundation.sh
set -uo pipefail
OUT=${OUT:-/tmp/tilecost-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
python3 - >"$OUT/device.txt" <<'PY'
import torch, triton
p = torch.cuda.get_device_properties(0)
print(p)
print("smem_per_block_optin", p.shared_memory_per_block_optin, "smem_per_sm", p.shared_memory_per_multiprocessor,
      "sms", p.multi_processor_count, "l2", p.L2_cache_size, "regs_per_sm", p.regs_per_multiprocessor,
      "max_threads_per_sm", p.max_threads_per_multi_processor, "torch", torch.__version__, "triton", triton.__version__)
PY
nvidia-smi >>"$OUT/device.txt" 2>&1
cat "$OUT/device.txt" | head -3
TILECOST_DEVICE=cuda timeout 170 python3 -m pytest -m gpu tests/test_kernels.py -q -n 8 -p no:cacheprovider 2>&1 | tee "$OUT/gpu_tests.log" | tail -40
PYTHONUNBUFFERED=1 timeout 380 python3 benchmarks/kernel_quality.py --out "$OUT/kernel_quality.json" 2>&1 | tee "$OUT/kernel_quality.log" | grep -v '^{' 
