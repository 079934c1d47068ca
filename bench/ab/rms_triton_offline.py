"""A float32 RMSNorm forward of inductor's persistent-reduction shape in Triton,
compiled to sm_90 SASS without a GPU (sixtieth session), to set beside ours.

    python3 bench/ab/rms_triton_offline.py --out DIR [--shapes 4096:8 4096:16 2048:8 2048:4]

Needs triton importable (``pip install --target /tmp/site triton==3.6.0`` and
``PYTHONPATH=/tmp/site``; the wheel carries ptxas and nvdisasm). The kernel is
written after inductor's generated code for these forwards (one row a program,
XBLOCK 1, the whole row R0_BLOCK = N in registers, w loaded ``evict_last``);
num_warps is given per shape as ``N:warps``, since inductor's own pick for these
rows has not been dumped yet (``bench/ab/pending_s60.sh i`` does that on the GPU).
Writes ``DIR/rms_<N>_<warps>.sass`` and prints each kernel's memory, shuffle and
barrier instructions.
"""

import argparse
import collections
import os
import re
import subprocess
import tempfile

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


@triton.jit
def rms_fwd(in_ptr0, in_ptr1, out_ptr, XBLOCK: tl.constexpr, R0_BLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    r = tl.arange(0, R0_BLOCK)[None, :]
    x = tl.load(in_ptr0 + (r + R0_BLOCK * xindex))
    s = tl.sum(x * x, 1)[:, None]
    rs = 1.0 / tl.sqrt_rn(s / R0_BLOCK + 1e-6)
    w = tl.load(in_ptr1 + r, eviction_policy="evict_last")
    tl.store(out_ptr + (r + R0_BLOCK * xindex), x * rs * w)


def compile_sass(n, warps):
    sig = {"in_ptr0": "*fp32", "in_ptr1": "*fp32", "out_ptr": "*fp32",
           "XBLOCK": "constexpr", "R0_BLOCK": "constexpr"}
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(3)}
    src = ASTSource(fn=rms_fwd, signature=sig, attrs=attrs, constexprs={(3,): 1, (4,): n})
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": warps})
    nvdisasm = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin",
                            "nvdisasm")
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "rms.cubin")
        with open(cubin, "wb") as f:
            f.write(compiled.asm["cubin"])
        return subprocess.run([nvdisasm, cubin], check=True, capture_output=True,
                              text=True).stdout


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--shapes", nargs="+", default=["4096:8", "4096:16", "2048:8", "2048:4"])
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    for shape in args.shapes:
        n, warps = (int(v) for v in shape.split(":"))
        sass = compile_sass(n, warps)
        with open(os.path.join(args.out, f"rms_{n}_{warps}.sass"), "w") as f:
            f.write(sass)
        ops = collections.Counter(re.findall(r"\b(LDG\S*|STG\S*|BAR\S*|SHFL\S*|LDS\S*|STS\S*)",
                                             sass))
        print(f"N = {n}, num_warps {warps}: {dict(ops)}")


if __name__ == "__main__":
    main()
