"""Liger-Kernel's LayerNorm backward kernel compiled to sm_90 SASS without a GPU.

    python3 bench/ab/liger_sass_offline.py --out DIR [--wheel WHEEL] [--n 8192] [--m 8192]

Needs triton importable (e.g. ``pip install --target /tmp/site triton==3.6.0`` and
``PYTHONPATH=/tmp/site``; the wheel carries ptxas and nvdisasm) and Liger's wheel
(``.whl/``, as bench/ab/liger_env.sh installs it). The kernel's source is read from
the wheel and compiled as Liger's launcher would specialise it for 16-bit rows of
``n`` columns: BLOCK_SIZE and num_warps from its ``calculate_settings`` rule, one
program an SM (132) with ``ceil(m / 132)`` rows each, 16-byte divisible pointers and
row strides, the mean/rstd strides of 1 folded. Writes ``DIR/liger_ln_bwd.{ptx,sass}``;
then ``python3 bench/ab/sass_mix.py DIR/liger_ln_bwd.sass OURS.sass`` sets the row
loops side by side (OURS from numba_fused.registry.sass, as bench/ab/liger_sass.sh
writes it). bench/ab/liger_sass.sh does the same on a GPU from triton's cache.
"""

import argparse
import importlib.util
import inspect
import math
import os
import subprocess
import sys
import tempfile
import zipfile

_KERNEL = "_layer_norm_backward_kernel"
_FLOAT32_PTRS = {"Mean_ptr", "RSTD_ptr", "DW_ptr", "DB_ptr"}
_FOLDED = {"stride_mean": 1, "stride_rstd": 1}


def _kernel_from_wheel(wheel, workdir):
    """The triton.jit function ``_KERNEL`` from the wheel's layer_norm ops module,
    loaded alone (the module itself imports torch)."""
    with zipfile.ZipFile(wheel) as z:
        src = z.read("liger_kernel/ops/layer_norm.py").decode()
    start = src.index(f"@triton.jit\ndef {_KERNEL}")
    end = src.index("\ndef ", start + len("@triton.jit\ndef "))
    path = os.path.join(workdir, "liger_ln_bwd_kernel.py")
    with open(path, "w") as f:
        f.write("import triton\nimport triton.language as tl\n\n" + src[start:end])
    spec = importlib.util.spec_from_file_location("liger_ln_bwd_kernel", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, _KERNEL)


def _settings(n):
    """Liger's calculate_settings for CUDA: next power of two, warps by its size."""
    block = 1 << max(0, (n - 1).bit_length())
    warps = 32 if block >= 32768 else 16 if block >= 8192 else 8 if block >= 2048 else 4
    return block, warps


def compile_liger(wheel, n, m, sms, dtype, workdir):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    kernel = _kernel_from_wheel(wheel, workdir)
    names = list(inspect.signature(kernel.fn).parameters)
    block, warps = _settings(n)
    consts = {"rows_per_program": math.ceil(m / sms), "BLOCK_SIZE": block,
              "COMPUTE_DW": True, "COMPUTE_DB": True, **_FOLDED}
    elem = {"float16": "*fp16", "bfloat16": "*bf16"}[dtype]
    sig = {}
    for name in names:
        if name in consts:
            sig[name] = "constexpr"
        elif name.endswith("_ptr"):
            sig[name] = "*fp32" if name in _FLOAT32_PTRS else elem
        else:
            sig[name] = "i32"
    attrs = {(names.index(name),): [["tt.divisibility", 16]]
             for name, kind in sig.items() if kind != "constexpr"}
    src = ASTSource(fn=kernel, signature=sig, attrs=attrs,
                    constexprs={(names.index(k),): v for k, v in consts.items()})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--wheel", default=".whl/liger_kernel-0.8.5-py3-none-any.whl")
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--m", type=int, default=8192)
    ap.add_argument("--sms", type=int, default=132)
    ap.add_argument("--dtype", default="float16", choices=["float16", "bfloat16"])
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        compiled = compile_liger(args.wheel, args.n, args.m, args.sms, args.dtype, tmp)
        cubin = os.path.join(tmp, "liger_ln_bwd.cubin")
        with open(cubin, "wb") as f:
            f.write(compiled.asm["cubin"])
        import triton

        nvdisasm = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin",
                                "nvdisasm")
        sass = subprocess.run([nvdisasm, cubin], check=True, capture_output=True, text=True)
    with open(os.path.join(args.out, "liger_ln_bwd.ptx"), "w") as f:
        f.write(compiled.asm["ptx"])
    with open(os.path.join(args.out, "liger_ln_bwd.sass"), "w") as f:
        f.write(sass.stdout)
    sys.stdout.write(f"{args.out}/liger_ln_bwd.sass: num_warps {compiled.metadata.num_warps}, "
                     f"shared {compiled.metadata.shared} bytes\n")


if __name__ == "__main__":
    main()
