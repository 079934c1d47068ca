"""LayerNorm and RMSNorm over the last dimension, forward and backward.

Math (per row ``r`` of the ``[M, N]`` view of ``x``; ``n = N``; statistics in float32)::

    LayerNorm:  mu = sum(x) / n;  var = sum((x - mu)^2) / n;  rstd = 1 / sqrt(var + eps)
                xhat = (x - mu) * rstd;  y = xhat * w + b
    RMSNorm:    rstd = 1 / sqrt(sum(x^2) / n + eps);  xhat = x * rstd;  y = xhat * w

    backward:   wdy = w * dy (dy when there is no weight)
                c1 = sum(xhat * wdy) / n;  c2 = sum(wdy) / n (LayerNorm only)
                dx = (wdy - (xhat * c1 + c2)) * rstd          (RMSNorm: c2 = 0)
                dw = sum over rows of dy * xhat;  db = sum over rows of dy

Kernels
-------
Blocks are ``(tpr, rpb)`` threads: row slot ``threadIdx.y`` is handled by ``tpr``
threads (a multiple of 32). Rows are strided over the grid (row slot ``y`` of block
``b`` takes rows ``b * rpb + y``, then ``+ gridDim.x * rpb`` ...). Row sums are warp
xor-shuffles, then (``tpr > 32``) one partial per warp through shared memory, read
back by the row's own lanes: one ``syncthreads`` per reduction, consecutive
reductions alternating between two scratch buffers so that one cannot overwrite
values the previous one is still reading. Thread ``t`` owns groups ``gi = t, t +
tpr, ...`` of ``VEC`` consecutive elements, so each warp access is contiguous. In
*vector* mode a group is 16 bytes (8 fp16/bf16 or 4 fp32 values) moved by one
``ld/st.global.v4`` (needs ``N % VEC == 0`` and 16-byte aligned pointers); otherwise
a group is one element.

*Row kernels* (``words > 0``, vector mode) keep a thread's ``words`` groups in
registers between the reductions and the write, so ``x`` and ``dy`` are read from
DRAM once. The forward uses the corrected two-pass variance: pass 1 gives ``mu``,
pass 2 sums ``d = x - mu`` and ``d^2`` together; ``dmu = sum(d) / n`` removes mu's
rounding from the variance and is applied separately in ``y = ((x - mu) - dmu) *
rstd`` (mu + dmu in one float32 may be half an ulp of the mean off, a large error
when ``|mean| >> std``). The backward keeps x and dy as raw 16-byte words (half the
registers of fp16/bf16 floats) and converts them again for dx.

The *plain forward kernel* (``make_plain_forward_kernel``, the default for 16-bit
LayerNorm N = 512-16384, 16-bit RMSNorm N = 512, 8192, 12288, float32 LayerNorm N =
512-16384 but 5120, and float32 RMSNorm N = 512-16384, see ``_fwd_plain`` and
``_PLAIN_PICKS``) has its layout compiled in: a block of
``rpb`` row slots takes one row each and stops (no loop), the statistics are two-pass
(at float32 with the dmu correction above; at 16-bit y's rounding hides mu's), and w /
b load with the row. Its ``_nostats`` form (the forward's ``stats=False``: inference,
as under ``torch.no_grad``) writes y alone, as inductor's kernel does there; so does
RMSNorm's lean kernel of one row a slot (``once``).

*Streaming kernels* (``words == 0``) take rows of any length, one row per block at a
time (``rpb = 1``): the forward reads ``x`` once per pass (sum, deviations, write;
the second and third reads hit L1/L2), the backward twice (sums, then dx). The
streaming backward keeps its dw/db accumulators in shared memory when they fit
(``sacc``: ``tuning(sacc_bytes=...)``, 192 KB by default: N up to 24576 with both
w and b in one block); longer rows are split into column chunks, one block per row
and chunk (each block sums the whole row for its statistics, then writes dx and
accumulates dw/db for its chunk: N = 65536 takes three), so the accumulators stay in
shared memory at every N; only ``sacc_bytes=0`` (or, for rows with w alone,
``tuning(bwd_global_dw=True)``) keeps them in a partial row in global memory.

A kernel whose dynamic shared memory is over the 48 KB default (the streaming
backward's accumulators, the lean2 backward rows at N >= 12288 at 16-bit, the staged
forward) prefers the L1 / shared carveout that holds just the blocks its grid runs an
SM (v48, ``tuning(fit_carveout=...)``, :meth:`launch.Kernel.fit_carveout`): with the
whole 228 KB as shared memory, the ~23 KB left as L1 made the row's second read miss.

Backward ``dw``/``db`` are reduced across rows in two steps: the kernel leaves
float32 partial rows ``[R, N]``, then the ``norm_dwdb`` kernel sums them column by
column in a fixed order. Two ways to produce the partial rows: ``deterministic=True``
takes the second; ``deterministic=False`` takes ``tuning(bwd_scheme=...)``'s, by
default the second too (it measured as fast or faster at every shape, and needs no
lock buffer cleared before the launch):

- lock scheme (the xformers seed): ``R = GROUP_SIZE_M`` row buffers, chosen by ``N``
  as in the seed (:func:`group_size_m`); block ``b`` adds into buffer ``b % R`` under
  an atomic compare-and-swap spin lock (``locks[0:R]``), and a first-writer flag
  (``locks[R:2R]``, taken with an atomic exchange) tells it to store instead of
  add. The owner reads the buffer with ``ld.global.cg`` (from L2, never a stale L1
  line); before releasing, every thread fences (``threadfence``) and the block
  synchronises, so the next owner sees all of its stores. Addition order depends on
  which block gets a lock first.
- deterministic: a persistent grid of ``P`` blocks (SMs x a small factor), block
  ``b`` owning rows ``b * rpb + y, ...`` and writing its own partial row; the sums
  run in a fixed order everywhere: bit-identical run to run on a given GPU.

Row kernels accumulate a thread's rows in registers and fold the block's row slots
together through shared memory (in slot order), so each block contributes one
partial row (and takes a lock once). Streaming kernels add each row's contribution
to the partial row directly (for the lock scheme under the lock, once per row: the
seed's per-row locking). With one block per row (``tuning(bwd_grid=M)``) the row
kernels run exactly the seed's per-row scheme too.
"""

import contextlib
import functools
import math
import numbers

import numpy as np
from numba import cuda, types

from interop.dlpack import KernelArray, empty_like_lib, stream_handle
from numba_fused.dtypes import STORAGE

from . import checks, dtypes
from .intrinsics import (bar_sync, f32_as_u32, fma_rn, grid_dependency_wait,
                         grid_dependents_launch, mul_rn, u32_as_f32)
from .jit import inline_device
from .launch import SIMULATOR, Kernel, cdiv, dependent_launch_ok, sm_count, smem_optin
from .plan import NOW, Recorder
from .reductions import FULL_MASK, WARP, warp_max, warp_sum, warp_sum2, warp_sum_halves
from .tensor_core import (cp_async_16, cp_async_commit, cp_async_wait, cp_async_wait_all,
                          ld_global_v4, ld_global_v4_evict, pack_f16x2, st_global_v4)

__all__ = [
    "layer_norm_forward", "layer_norm_backward", "rms_norm_forward", "rms_norm_backward",
    "layer_norm_ref", "rms_norm_ref", "make_forward_kernel", "make_backward_kernel",
    "make_dwdb_kernel", "group_size_m", "tuning", "shipped_kernels",
]

_MAX_BLOCK = 1024
# Threads an SM holds (sm_80-sm_90): the most a kernel's launch bounds may ask for.
_SM_THREADS = 2048
# ptxas must fit every kernel in 64 registers so 1024-thread blocks can launch (min
# 1 block per SM: with the block size alone ptxas sometimes aims at 32 and spills). The
# simulator's cuda.jit takes no launch_bounds.
_JIT = {} if SIMULATOR else {"launch_bounds": (_MAX_BLOCK, 1)}


def _jit_for(max_block, min_blocks=1):
    """jit options for a kernel never launched with more than ``max_block`` threads,
    ``min_blocks`` of them resident an SM (ptxas may then use up to 65536 /
    (max_block * min_blocks) registers)."""
    return {} if SIMULATOR else {"launch_bounds": (int(max_block), int(min_blocks))}


# Row kernels holding more than 16 (forward) / 8 (backward) values per thread need
# 90-128 registers: compiled for blocks of at most 512 threads (see _row_layout).
_FAT_BLOCK = 512
_ZERO = np.float32(0.0)
_U32_16 = np.uint32(16)
_LO16 = np.uint32(0xFFFF)
_HI16 = np.uint32(0xFFFF0000)


# ---------------------------------------------------------------------------------
# 16-byte global loads/stores and fp16 bit conversions.
# On the GPU these are @intrinsic functions; under the simulator, NumPy emulations
# that give the same values (kernels run as Python there).
# ---------------------------------------------------------------------------------

if SIMULATOR:

    def _ld16(a, i):
        """a[4i:4i+4] of a 1-D uint32/float32 array as a 4-tuple (one 16-byte load)."""
        j = 4 * int(i)
        return a[j], a[j + 1], a[j + 2], a[j + 3]

    _ld16_cg = _ld16

    def _ldcg(a, i):
        """a[i], read from L2 (``ld.global.cg``)."""
        return a[i]

    def _st16(a, i, v0, v1, v2, v3):
        """a[4i:4i+4] = (v0, v1, v2, v3) as one 16-byte store."""
        j = 4 * int(i)
        a[j], a[j + 1], a[j + 2], a[j + 3] = v0, v1, v2, v3

    def _h2f(bits):
        """float32 value of the fp16 whose bits are the low 16 bits of ``bits``."""
        return np.float32(np.uint16(int(bits) & 0xFFFF).view(np.float16))

    def _f2h(x):
        """fp16 bits (round to nearest even) of float32 ``x``, zero-extended to uint32."""
        return np.uint32(np.float16(np.float32(x)).view(np.uint16))

    def _unpack2(w, bf16):
        """(float32 of the low half, float32 of the high half) of 32-bit word ``w``
        holding two fp16 (``bf16`` False) or bf16 values (one opaque inline-PTX block
        on the GPU)."""
        w = int(w)
        if bf16:
            return (np.uint32((w & 0xFFFF) << 16).view(np.float32),
                    np.uint32(w & 0xFFFF0000).view(np.float32))
        return _h2f(w & 0xFFFF), _h2f(w >> 16)

    def _ld16r(a, base, off):
        """Group ``base + off`` (16-byte units) of ``a``: ``base`` a uint64 row offset,
        ``off`` a uint32 offset within the row (on the GPU: one 64-bit row pointer
        per row, then one 32-bit multiply-add per access)."""
        return _ld16(a, int(base) + int(off))

    def _st16r(a, base, off, v0, v1, v2, v3):
        """Store group ``base + off`` of ``a`` (see :func:`_ld16r`)."""
        _st16(a, int(base) + int(off), v0, v1, v2, v3)

    def _bf2(lo, hi):
        """bfloat16 bits of float32 ``lo`` | those of ``hi`` << 16 (round to nearest
        even; one ``cvt.rn.bf16x2.f32`` on the GPU)."""
        return (np.uint32(dtypes.f32_to_bf16_bits(np.float32(lo)))
                | (np.uint32(dtypes.f32_to_bf16_bits(np.float32(hi))) << np.uint32(16)))

    def _rsqrt(v):
        """1 / sqrt(v) (``rsqrt.approx.f32`` on the GPU: <= 2 ulp)."""
        return np.float32(1.0 / math.sqrt(float(v))) if v > 0 else np.float32(
            math.inf if v == 0 else math.nan)

else:
    from llvmlite import ir
    from numba.core.extending import intrinsic

    def _vec_arg_ok(arr):
        return (isinstance(arr, types.Array) and arr.ndim == 1
                and arr.dtype in (types.uint32, types.float32))

    def _elem_ptr(context, builder, aty, ity, a, i):
        ary = context.make_array(aty)(context, builder, a)
        idx = context.cast(builder, i, ity, types.int64)
        return builder.gep(ary.data, [builder.mul(idx, ir.Constant(ir.IntType(64), 4))])

    @intrinsic
    def _ld16(typingctx, arr, idx):
        if not (_vec_arg_ok(arr) and isinstance(idx, types.Integer)):
            return None
        sig = types.UniTuple(arr.dtype, 4)(arr, idx)

        def codegen(context, builder, signature, args):
            aty, ity = signature.args
            ptr = _elem_ptr(context, builder, aty, ity, *args)
            vty = ir.VectorType(ptr.type.pointee, 4)
            vec = builder.load(builder.bitcast(ptr, vty.as_pointer()), align=16)
            vals = [builder.extract_element(vec, ir.Constant(ir.IntType(32), k)) for k in range(4)]
            return context.make_tuple(builder, signature.return_type, vals)

        return sig, codegen

    def _group_loader(op, f32_only=False, side_effect=False):
        """A 16-byte load intrinsic ``(arr, idx) -> 4-tuple`` of group ``idx`` of a 1-D
        4-byte array, issuing PTX ``op`` (a cache-hinted form of ``ld.global``);
        ``side_effect``: LLVM must not move it (see the users)."""

        @intrinsic
        def load(typingctx, arr, idx):
            if not (_vec_arg_ok(arr) and isinstance(idx, types.Integer)
                    and (arr.dtype == types.float32 or not f32_only)):
                return None
            sig = types.UniTuple(arr.dtype, 4)(arr, idx)

            def codegen(context, builder, signature, args):
                aty, ity = signature.args
                ptr = _elem_ptr(context, builder, aty, ity, *args)
                sfx, con = _asm_sfx(aty)
                ety = context.get_value_type(aty.dtype)
                fnty = ir.FunctionType(ir.LiteralStructType([ety] * 4), [ptr.type])
                text = f"{op}.v4.{sfx} {{$0,$1,$2,$3}}, [$4];"
                asm = ir.InlineAsm(fnty, text, f"={con},={con},={con},={con},l",
                                   side_effect=side_effect)
                res = builder.call(asm, [ptr])
                vals = [builder.extract_value(res, k) for k in range(4)]
                return context.make_tuple(builder, signature.return_type, vals)

            return sig, codegen

        return load

    def _scalar_load(nb_type, ir_type, text, constraints):
        """An ``@intrinsic`` ``(arr, i) -> arr[i]`` for 1-D arrays of ``nb_type``, the
        load being the inline PTX ``text`` (``$0``: the value, ``$1``: the address)."""

        @intrinsic
        def load(typingctx, arr, idx):
            if not (isinstance(arr, types.Array) and arr.ndim == 1 and arr.dtype == nb_type
                    and isinstance(idx, types.Integer)):
                return None
            sig = nb_type(arr, idx)

            def codegen(context, builder, signature, args):
                aty, ity = signature.args
                ary = context.make_array(aty)(context, builder, args[0])
                i = context.cast(builder, args[1], ity, types.int64)
                ptr = builder.gep(ary.data, [i])
                asm = ir.InlineAsm(ir.FunctionType(ir_type, [ptr.type]), text, constraints,
                                   side_effect=True)
                return builder.call(asm, [ptr])

            return sig, codegen

        return load

    _ldcg = _scalar_load(types.float32, ir.FloatType(), "ld.global.cg.f32 $0, [$1];", "=f,l")

    @intrinsic
    def _st16(typingctx, arr, idx, v0, v1, v2, v3):
        if not (_vec_arg_ok(arr) and isinstance(idx, types.Integer)):
            return None
        sig = types.void(arr, idx, v0, v1, v2, v3)

        def codegen(context, builder, signature, args):
            aty, ity = signature.args[:2]
            ptr = _elem_ptr(context, builder, aty, ity, args[0], args[1])
            vty = ir.VectorType(ptr.type.pointee, 4)
            vec = ir.Constant(vty, ir.Undefined)
            for k in range(4):
                val = context.cast(builder, args[2 + k], signature.args[2 + k], aty.dtype)
                vec = builder.insert_element(vec, val, ir.Constant(ir.IntType(32), k))
            builder.store(vec, builder.bitcast(ptr, vty.as_pointer()), align=16)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def _h2f(typingctx, bits):
        if not isinstance(bits, types.Integer):
            return None
        sig = types.float32(bits)

        def codegen(context, builder, signature, args):
            v = args[0]
            if v.type.width > 16:
                v = builder.trunc(v, ir.IntType(16))
            return builder.fpext(builder.bitcast(v, ir.HalfType()), ir.FloatType())

        return sig, codegen

    @intrinsic
    def _unpack2(typingctx, w, bf16):
        # Inline PTX on purpose: with plain LLVM conversions, LLVM re-derives the
        # floats (and x - mu) from the raw words in later blocks instead of keeping
        # them, which costs a conversion and a subtraction per value per row.
        if not (isinstance(w, types.Integer) and isinstance(bf16, types.BooleanLiteral)):
            return None
        sig = types.UniTuple(types.float32, 2)(w, bf16)
        if bf16.literal_value:
            text = "shl.b32 $0, $2, 16; and.b32 $1, $2, 0xffff0000;"
        else:
            text = "{ .reg .b16 l, h; mov.b32 {l, h}, $2; cvt.f32.f16 $0, l; cvt.f32.f16 $1, h; }"

        def codegen(context, builder, signature, args):
            f32 = ir.FloatType()
            v = context.cast(builder, args[0], signature.args[0], types.uint32)
            fnty = ir.FunctionType(ir.LiteralStructType([f32, f32]), [ir.IntType(32)])
            res = builder.call(ir.InlineAsm(fnty, text, "=f,=f,r"), [v])
            vals = [builder.extract_value(res, k) for k in range(2)]
            return context.make_tuple(builder, signature.return_type, vals)

        return sig, codegen

    def _row_addr(context, builder, aty, bty, a, base):
        """Integer address of 16-byte group ``base`` (uint64) of 1-D 4-byte array ``a``."""
        ary = context.make_array(aty)(context, builder, a)
        i64 = ir.IntType(64)
        b64 = context.cast(builder, base, bty, types.uint64)
        return builder.add(builder.ptrtoint(ary.data, i64), builder.shl(b64, ir.Constant(i64, 4)))

    def _asm_sfx(aty):
        return ("f32", "f") if aty.dtype == types.float32 else ("u32", "r")

    # Row-relative 16-byte accesses in inline PTX: ``mad.wide.u32`` of the 32-bit
    # offset onto the row address (one instruction per access; LLVM would fold the
    # two into one 64-bit index and redo the 64-bit shift and add for every access).
    # The load is pure (x and dy are never written by these kernels): LLVM may move
    # it, never speculate it; the store has side effects.

    def _row_loader(op):
        """A row-relative 16-byte load intrinsic issuing PTX ``op`` (``ld.global`` or a
        cache-hinted form)."""

        @intrinsic
        def load(typingctx, arr, base, off):
            if not (_vec_arg_ok(arr) and isinstance(base, types.Integer)
                    and isinstance(off, types.Integer)):
                return None
            sig = types.UniTuple(arr.dtype, 4)(arr, base, off)

            def codegen(context, builder, signature, args):
                aty, bty, oty = signature.args
                addr = _row_addr(context, builder, aty, bty, args[0], args[1])
                o32 = context.cast(builder, args[2], oty, types.uint32)
                sfx, con = _asm_sfx(aty)
                ety = context.get_value_type(aty.dtype)
                fnty = ir.FunctionType(ir.LiteralStructType([ety] * 4),
                                       [ir.IntType(64), ir.IntType(32)])
                asm = ir.InlineAsm(
                    fnty, "{ .reg .b64 a; mad.wide.u32 a, $5, 16, $4; "
                          f"{op}.v4.{sfx} {{$0,$1,$2,$3}}, [a]; }}",
                    f"={con},={con},={con},={con},l,r")
                res = builder.call(asm, [addr, o32])
                vals = [builder.extract_value(res, k) for k in range(4)]
                return context.make_tuple(builder, signature.return_type, vals)

            return sig, codegen

        return load

    def _row_storer(op):
        """A row-relative 16-byte store intrinsic issuing PTX ``op`` (``st.global`` and
        its cache-hinted forms)."""

        @intrinsic
        def store(typingctx, arr, base, off, v0, v1, v2, v3):
            if not (_vec_arg_ok(arr) and isinstance(base, types.Integer)
                    and isinstance(off, types.Integer)):
                return None
            sig = types.void(arr, base, off, v0, v1, v2, v3)

            def codegen(context, builder, signature, args):
                aty, bty, oty = signature.args[:3]
                addr = _row_addr(context, builder, aty, bty, args[0], args[1])
                o32 = context.cast(builder, args[2], oty, types.uint32)
                sfx, con = _asm_sfx(aty)
                ety = context.get_value_type(aty.dtype)
                vals = [context.cast(builder, args[3 + k], signature.args[3 + k], aty.dtype)
                        for k in range(4)]
                fnty = ir.FunctionType(ir.VoidType(),
                                       [ir.IntType(64), ir.IntType(32)] + [ety] * 4)
                asm = ir.InlineAsm(
                    fnty, "{ .reg .b64 a; mad.wide.u32 a, $1, 16, $0; "
                          f"{op}.v4.{sfx} [a], {{$2,$3,$4,$5}}; }}",
                    f"l,r,{con},{con},{con},{con},~{{memory}}", side_effect=True)
                builder.call(asm, [addr, o32] + vals)
                return context.get_dummy_value()

            return sig, codegen

        return store

    _ld16r = _row_loader("ld.global")
    _st16r = _row_storer("st.global")
    # side_effect: must not move above the lock acquisition that precedes it.
    _ld16_cg = _group_loader("ld.global.cg", f32_only=True, side_effect=True)

    @intrinsic
    def _bf2(typingctx, lo, hi):
        if lo != types.float32 or hi != types.float32:
            return None
        sig = types.uint32(lo, hi)

        def codegen(context, builder, signature, args):
            f32 = ir.FloatType()
            fnty = ir.FunctionType(ir.IntType(32), [f32, f32])
            # d = {hi, lo}: the first source goes to the upper half.
            asm = ir.InlineAsm(fnty, "cvt.rn.bf16x2.f32 $0, $1, $2;", "=r,f,f")
            return builder.call(asm, [args[1], args[0]])

        return sig, codegen

    @intrinsic
    def _rsqrt(typingctx, v):
        if v != types.float32:
            return None
        sig = types.float32(v)

        def codegen(context, builder, signature, args):
            f32 = ir.FloatType()
            asm = ir.InlineAsm(ir.FunctionType(f32, [f32]), "rsqrt.approx.f32 $0, $1;", "=f,f")
            return builder.call(asm, [args[0]])

        return sig, codegen

    @intrinsic
    def _f2h(typingctx, x):
        if x != types.float32:
            return None
        sig = types.uint32(x)

        def codegen(context, builder, signature, args):
            h = builder.fptrunc(args[0], ir.HalfType())  # cvt.rn.f16.f32
            return builder.zext(builder.bitcast(h, ir.IntType(16)), ir.IntType(32))

        return sig, codegen


# ---------------------------------------------------------------------------------
# Group I/O: one group = VEC consecutive elements, moved between a global array and
# a float32 local array ``buf[off:off+VEC]``.
# ---------------------------------------------------------------------------------

def _vec_of(dtype, vector):
    """Elements per group: 16 bytes' worth in vector mode, else 1."""
    return 16 // STORAGE[dtype].itemsize if vector else 1


def _kernel_storage(dtype, vector):
    """numba element type of the data arrays a kernel sees (1-D views)."""
    if not vector:
        return dtypes.numba_storage_type(dtype)
    return types.float32 if dtype == "float32" else types.uint32


def _view_dtype(dtype, vector):
    """Name of the element type of the 1-D views passed to kernels."""
    if not vector:
        return dtype
    return "float32" if dtype == "float32" else "uint32"


@functools.lru_cache(maxsize=None)
def _group_io(dtype, vector):
    """(load_group(a, gi, buf, off), store_group(a, gi, buf, off)) device functions."""
    if not vector:
        load = dtypes.loader(dtype)
        store = dtypes.storer(dtype)

        @inline_device
        def load_group(a, gi, buf, off):
            buf[off] = load(a, gi)

        @inline_device
        def store_group(a, gi, buf, off):
            store(a, gi, buf[off])

        return load_group, store_group

    if dtype == "float32":

        @inline_device
        def load_group(a, gi, buf, off):
            q = _ld16(a, gi)
            buf[off] = q[0]
            buf[off + 1] = q[1]
            buf[off + 2] = q[2]
            buf[off + 3] = q[3]

        @inline_device
        def store_group(a, gi, buf, off):
            _st16(a, gi, buf[off], buf[off + 1], buf[off + 2], buf[off + 3])

        return load_group, store_group

    if dtype == "float16":

        @inline_device
        def unpack(w, buf, o):
            buf[o] = _h2f(w & _LO16)
            buf[o + 1] = _h2f(w >> _U32_16)

        @inline_device
        def pack(buf, o):
            return _f2h(buf[o]) | (_f2h(buf[o + 1]) << _U32_16)

    else:

        @inline_device
        def unpack(w, buf, o):
            buf[o] = u32_as_f32(w << _U32_16)
            buf[o + 1] = u32_as_f32(w & _HI16)

        @inline_device
        def pack(buf, o):
            lo = np.uint32(dtypes.f32_to_bf16_bits(buf[o]))
            hi = np.uint32(dtypes.f32_to_bf16_bits(buf[o + 1]))
            return lo | (hi << _U32_16)

    @inline_device
    def load_group(a, gi, buf, off):
        q = _ld16(a, gi)
        unpack(q[0], buf, off)
        unpack(q[1], buf, off + 2)
        unpack(q[2], buf, off + 4)
        unpack(q[3], buf, off + 6)

    @inline_device
    def store_group(a, gi, buf, off):
        _st16(a, gi, pack(buf, off), pack(buf, off + 2), pack(buf, off + 4), pack(buf, off + 6))

    return load_group, store_group


@functools.lru_cache(maxsize=None)
def _raw_io(dtype):
    """Vector mode, raw words: (load_raw(a, gi, r, off): r[off:off+4] = the 16-byte
    group's four words; elem(r, off, j) -> float32: element j of the group whose
    words are r[off:off+4]). Keeping raw words live instead of VEC floats halves
    the registers a 16-bit row slice takes; ``j`` is a constant after unrolling."""
    if dtype == "float32":

        @inline_device
        def elem(r, off, j):
            return r[off + j]

    elif dtype == "float16":

        @inline_device
        def elem(r, off, j):
            w = r[off + j // 2]
            return _h2f(w >> _U32_16) if j % 2 else _h2f(w & _LO16)

    else:

        @inline_device
        def elem(r, off, j):
            w = r[off + j // 2]
            return u32_as_f32(w & _HI16) if j % 2 else u32_as_f32(w << _U32_16)

    @inline_device
    def load_raw(a, gi, r, off):
        q = _ld16(a, gi)
        r[off] = q[0]
        r[off + 1] = q[1]
        r[off + 2] = q[2]
        r[off + 3] = q[3]

    return load_raw, elem


@functools.lru_cache(maxsize=None)
def _raw_codec(dtype):
    """Vector mode, raw 16-byte groups: (unpack(r, ro, xs, xo): xs[xo:xo+VEC] = the
    float32 values of the group whose four words are r[ro:ro+4]; pack(xs, xo) -> the
    four words of xs[xo:xo+VEC] rounded to ``dtype``). fp16: one HADD2.F32 per value
    in, one F2FP.PACK_AB per pair out; bf16: a shift or mask in, one
    ``cvt.rn.bf16x2.f32`` per pair out."""
    if dtype == "float32":

        @inline_device
        def unpack(r, ro, xs, xo):
            for i in range(4):
                xs[xo + i] = r[ro + i]

        @inline_device
        def pack(xs, xo):
            return xs[xo], xs[xo + 1], xs[xo + 2], xs[xo + 3]

    elif dtype == "float16":

        @inline_device
        def unpack(r, ro, xs, xo):
            for i in range(4):
                lo, hi = _unpack2(r[ro + i], False)
                xs[xo + 2 * i] = lo
                xs[xo + 2 * i + 1] = hi

        @inline_device
        def pair(a, b):
            return _f2h(a) | (_f2h(b) << _U32_16)

        @inline_device
        def pack(xs, xo):
            return (pair(xs[xo], xs[xo + 1]), pair(xs[xo + 2], xs[xo + 3]),
                    pair(xs[xo + 4], xs[xo + 5]), pair(xs[xo + 6], xs[xo + 7]))

    else:

        @inline_device
        def unpack(r, ro, xs, xo):
            for i in range(4):
                lo, hi = _unpack2(r[ro + i], True)
                xs[xo + 2 * i] = lo
                xs[xo + 2 * i + 1] = hi

        @inline_device
        def pack(xs, xo):
            return (_bf2(xs[xo], xs[xo + 1]), _bf2(xs[xo + 2], xs[xo + 3]),
                    _bf2(xs[xo + 4], xs[xo + 5]), _bf2(xs[xo + 6], xs[xo + 7]))

    return unpack, pack


@functools.lru_cache(maxsize=None)
def _partial_io(vec, vector):
    """Device functions moving ``vec`` float32 values between ``buf[off:]`` and a
    float32 partial-sum array at element ``e`` (a multiple of 4 in vector mode):
    (store(p, e, buf, off), add_into(p, e, buf, off): buf += p[e:e+vec] (plain
    load), add_into_cg(...): the same reading from L2)."""
    if not vector:

        @inline_device
        def store(p, e, buf, off):
            p[e] = buf[off]

        @inline_device
        def add_into(p, e, buf, off):
            buf[off] += p[e]

        @inline_device
        def add_into_cg(p, e, buf, off):
            buf[off] += _ldcg(p, e)

        return store, add_into, add_into_cg

    quads = vec // 4

    @inline_device
    def store(p, e, buf, off):
        e4 = e // 4
        for h in range(quads):
            o = off + 4 * h
            _st16(p, e4 + h, buf[o], buf[o + 1], buf[o + 2], buf[o + 3])

    @inline_device
    def add_into(p, e, buf, off):
        e4 = e // 4
        for h in range(quads):
            o = off + 4 * h
            q = _ld16(p, e4 + h)
            buf[o] += q[0]
            buf[o + 1] += q[1]
            buf[o + 2] += q[2]
            buf[o + 3] += q[3]

    @inline_device
    def add_into_cg(p, e, buf, off):
        e4 = e // 4
        for h in range(quads):
            o = off + 4 * h
            q = _ld16_cg(p, e4 + h)
            buf[o] += q[0]
            buf[o + 1] += q[1]
            buf[o + 2] += q[2]
            buf[o + 3] += q[3]

    return store, add_into, add_into_cg


# ---------------------------------------------------------------------------------
# Reductions over the tpr threads of a row, and the spin lock.
# ---------------------------------------------------------------------------------

@inline_device
def _two_sum_err(a, b, s):
    """The exact rounding error of ``s = a + b`` in float32 (Knuth's TwoSum, no
    branch): a + b = s + err."""
    bb = s - a
    return (a - (s - bb)) + (b - bb)


@inline_device
def _deviation_sum(sd, se, x, mu, d):
    """(sd + d, se + both roundings' errors) for ``d = x - mu`` as rounded: Knuth's
    TwoSum gives the exact errors of x - mu and of sd + d, summed apart in ``se``, so
    (sd + se) carries none of the bias that mu's rounded low bits put in a plain sum
    of deviations."""
    se += _two_sum_err(x, -mu, d)
    t1 = sd + d
    se += _two_sum_err(sd, d, t1)
    return t1, se


@inline_device
def _warp_slots():
    """(lane, this warp's partial slot, the row's first slot, warps a row) of the
    row reductions' cross-warp step (block ``(tpr, rows)``, tpr a multiple of 32):
    row ``threadIdx.y``'s warps own slots ``first .. first + nw - 1``."""
    t = cuda.threadIdx.x
    nw = cuda.blockDim.x // WARP
    first = cuda.threadIdx.y * nw
    return t % WARP, first + t // WARP, first, nw


@inline_device
def _row_sum(v, red, buf):
    """Sum of ``v`` over the row's threads, returned to all of them. A block is
    ``(tpr, rows)`` threads: row ``threadIdx.y`` is reduced by its ``tpr`` threads
    (a multiple of 32). With ``tpr > 32`` one partial per warp goes through
    ``red[buf, :]`` (float32 shared ``(2, 32)``) and one ``syncthreads``: every
    thread of the block must call it, and consecutive calls must alternate ``buf``
    (the next call's writes then cannot overtake this call's reads)."""
    v = warp_sum(v)
    tpr = cuda.blockDim.x
    if tpr > WARP:
        lane, mine, first, nw = _warp_slots()
        if lane == 0:
            red[buf, mine] = v
        cuda.syncthreads()
        s = red[buf, first + lane] if lane < nw else np.float32(0.0)
        v = warp_sum(s)
    return v


@inline_device
def _warp_partials2(red, buf, lane, first, nw):
    """The cross-warp step's operands of two row sums, after the barrier: lane ``l``
    reads the row's warp partials ``l`` of both from ``red[buf]`` (0 past the row's
    ``nw`` warps; ``first``: the row's first slot, see :func:`_warp_slots`)."""
    sa = np.float32(0.0)
    sb = np.float32(0.0)
    if lane < nw:
        sa = red[buf, 0, first + lane]
        sb = red[buf, 1, first + lane]
    return sa, sb


def _row_pair(second):
    """Device function ``pair(a, b, red, buf)`` reducing two values over the row's
    threads in one barrier, ``a`` by sum and ``b`` by ``second`` (:func:`warp_sum`, or
    :func:`warp_max` for ``b >= 0``: lanes past the row's warps read 0); ``red``
    float32 shared ``(2, 2, 32)``, calling rules as :func:`_row_sum_v2`."""

    @inline_device
    def pair(a, b, red, buf):
        a = warp_sum(a)
        b = second(b)
        tpr = cuda.blockDim.x
        if tpr > WARP:
            lane, mine, first, nw = _warp_slots()
            if lane == 0:
                red[buf, 0, mine] = a
                red[buf, 1, mine] = b
            cuda.syncthreads()
            sa, sb = _warp_partials2(red, buf, lane, first, nw)
            a = warp_sum(sa)
            b = second(sb)
        return a, b

    return pair


# Named barriers a block has (PTX barrier.sync ids 0-15); 0 is syncthreads', so the
# per-row barriers (tuning bwd_row_bar) take 1 .. 15 and blocks of at most 15 rows.
ROW_BARRIERS = 15

if SIMULATOR:
    @inline_device
    def _row_barrier():
        """The simulator has no named barriers: the block barrier (every row calls
        the row step as often, so every thread reaches it)."""
        cuda.syncthreads()
else:
    @inline_device
    def _row_barrier():
        """A barrier of this row's threads only (block ``(tpr, rows)``, tpr a multiple
        of 32, rows <= ROW_BARRIERS): named barrier ``threadIdx.y + 1`` over
        ``blockDim.x`` threads, so a row's warps do not wait for the block's other
        rows."""
        bar_sync(np.uint32(cuda.threadIdx.y + 1), np.uint32(cuda.blockDim.x))


def _row_sum2_with(per_row):
    """Device function ``pair(a, b, red, buf)``: two row sums at once (one barrier),
    for the backward kernels (row kernels: :func:`_row_sum`'s rules, lean ones:
    :func:`_row_sum_v2`'s): ``_row_pair(warp_sum)``'s results, bit for bit, in fewer
    shuffles (v36). On rows of several warps the sums go through
    :func:`warp_sum_halves` (five shuffles, not ten): lane 0 ends with a's warp
    partial, lane 16 with b's, and those two lanes store them in one instruction; the
    cross-warp step takes :func:`warp_sum2` (six, not ten). Rows of one warp keep two
    :func:`warp_sum` calls: two independent chains of five shuffles, where warp_sum2's
    one chain is six deep, and there the chain's latency is what counts (H200, fp16
    RMSNorm bwd 131072 x 512, one-warp rows: 111.7 -> 114.0-114.8 us with warp_sum2;
    bench/NOTES.md, thirty-fourth session). ``red``: float32 shared ``(2, 2, 32)``.
    The barrier is the block's, or under ``per_row`` (tuning ``bwd_row_bar``, blocks
    of several rows of several warps) :func:`_row_barrier`, the row's own: a row's
    warps read and write only that row's slots of ``red``, so they need not wait for
    the other rows (calling rules as :func:`_row_sum` within a row); same bits."""

    @inline_device
    def pair(a, b, red, buf):
        tpr = cuda.blockDim.x
        if tpr > WARP:
            v = warp_sum_halves(a, b)
            lane, mine, first, nw = _warp_slots()
            if lane % np.uint32(16) == 0:
                red[buf, lane // 16, mine] = v
            if per_row:
                _row_barrier()
            else:
                cuda.syncthreads()
            sa, sb = _warp_partials2(red, buf, lane, first, nw)
            return warp_sum2(sa, sb)
        return warp_sum(a), warp_sum(b)

    return pair


# The backward kernels' pair with the block barrier, and with the rows' own.
_row_sum2 = _row_sum2_with(False)
_row_sum2_rows = _row_sum2_with(True)


# The forward kernels' pair: v35's two warp_sums at every step. v36's both-branch
# code cost the register-capped lean forwards spills (16-bit LayerNorm two groups
# under 64 x 20 .. 256 x 5 bounds, four groups at 64 registers; float32 at 256 x 6 /
# 512 x 3; ptxas, sm_90), and v36's A/B found no forward faster (within 0.4 us).
_row_sum2_fwd = _row_pair(warp_sum)

# Warps a row (a compile-time constant) of the direct cross-warp step (tuning
# bwd_red_direct), and those its default (v32) takes at 16 bits (on rows with w: v41).
RED_DIRECT_WARPS = (4, 8, 16)
_RED_DIRECT_DEFAULT = (8, 16)
# Row buffers of the backward row kernels' cp.async ring (tuning bwd_stages; 0: the
# register prefetch or none).
BWD_STAGES = (0, 2, 3, 4)


@functools.lru_cache(maxsize=None)
def _row_sum2_direct(nw, rms=False):
    """Device function ``pair(a, b, red, buf)``: :func:`_row_sum2` for blocks of one
    row of exactly ``nw`` warps (RED_DIRECT_WARPS), with the cross-warp step read
    instead of shuffled: every thread loads the row's ``nw`` warp partials of each sum
    (``nw / 4`` broadcast 16-byte shared loads) and adds them in warp_sum's butterfly
    order (pairs ``nw / 2`` apart, then ``nw / 4``, ... 1), so the sums have
    _row_sum2's bits, but for the sign of an all-zero sum (the butterfly's lanes past
    ``nw`` add +0). ``red``: float32 shared ``[4 * nw]`` (``[buf][sum][warp]``),
    16-byte aligned; calling rules as :func:`_row_sum`. Why: the 16-bit backward row
    kernel at N = 4096 (ncu, H200) stalls on MIO; per warp and row its shuffled step
    issues 10 SHFL and 2 LDS in a dependent chain, this one 2 LDS.128 and 14 FADD at
    nw = 8 (v32, bench/NOTES.md). ``rms`` (v37, tuning ``bwd_rms_sum1``):
    :func:`_row_sum1`'s step instead, ``(sum of a, 0)`` with the same bits of a: one
    warp_sum, one warp partial a warp (``red[buf * nw + warp]``), ``nw / 4`` loads."""
    if nw not in RED_DIRECT_WARPS:
        raise ValueError(f"nw must be one of {RED_DIRECT_WARPS}, got {nw!r}")
    quads = nw // 4
    levels = tuple(nw >> k for k in range(1, nw.bit_length()))

    @inline_device
    def read_sum(red, q0):
        # The nw partials at red's quads q0, q0 + 1, ... added in the butterfly's order.
        v = cuda.local.array(nw, np.float32)
        for q in range(quads):
            u = _ld16(red, q0 + np.uint32(q))
            for e in range(4):
                v[4 * q + e] = u[e]
        for m in levels:
            for i in range(m):
                v[i] = v[i] + v[i + m]
        return v[0]

    if rms:
        @inline_device
        def one(a, b, red, buf):
            v = warp_sum(a)
            t = np.uint32(cuda.threadIdx.x)
            base = np.uint32(buf) * np.uint32(nw)
            if t % np.uint32(WARP) == np.uint32(0):
                red[base + t // np.uint32(WARP)] = v
            cuda.syncthreads()
            return read_sum(red, base // np.uint32(4)), np.float32(0.0)

        return one

    @inline_device
    def pair(a, b, red, buf):
        # v36: lane 0 holds a's warp partial, lane 16 b's (warp_sum's bits).
        v = warp_sum_halves(a, b)
        t = np.uint32(cuda.threadIdx.x)
        base = np.uint32(buf) * np.uint32(2 * nw)
        if t % np.uint32(16) == np.uint32(0):
            w = t // np.uint32(WARP)
            red[base + (t // np.uint32(16)) % np.uint32(2) * np.uint32(nw) + w] = v
        cuda.syncthreads()
        q0 = base // np.uint32(4)
        sa = read_sum(red, q0)
        return sa, read_sum(red, q0 + np.uint32(quads))

    return pair


# The row's sum and maximum at once (the lean forward's centred statistics).
_row_sum_max_v2 = _row_pair(warp_max)


@inline_device
def _chan(na, ma, qa, nb, mb, qb):
    """Chan et al.'s merge of two (count, mean, sum of squared deviations) triples:
    n = na + nb, d = mb - ma, mean = ma + d nb / n, q = qa + qb + d^2 na nb / n (an
    empty side leaves the other as it is; both empty give (0, ma, qa))."""
    n = na + nb
    d = mb - ma
    f = nb / max(n, np.float32(1.0))
    return n, ma + d * f, qa + qb + d * d * na * f


@inline_device
def _warp_chan(n, m, q):
    """:func:`_chan` over the warp's 32 lanes by xor butterfly, the lower lane of each
    pair always the merge's first operand, so both lanes of a pair (and in the end
    every lane) compute the same bits."""
    lane = cuda.threadIdx.x % WARP
    for k in range(5):
        off = 16 >> k
        on = cuda.shfl_xor_sync(FULL_MASK, n, off)
        om = cuda.shfl_xor_sync(FULL_MASK, m, off)
        oq = cuda.shfl_xor_sync(FULL_MASK, q, off)
        if lane & off:
            n, m, q = _chan(on, om, oq, n, m, q)
        else:
            n, m, q = _chan(n, m, q, on, om, oq)
    return n, m, q


@inline_device
def _row_chan(n, m, q, red, buf):
    """:func:`_chan` over the row's threads (block ``(tpr, rows)``), returned to all of
    them with the same bits; ``red`` float32 shared ``(2, 3, 32)``, calling rules as
    :func:`_row_sum`'s."""
    n, m, q = _warp_chan(n, m, q)
    if cuda.blockDim.x > WARP:
        lane, mine, first, nw = _warp_slots()
        if lane == 0:
            red[buf, 0, mine] = n
            red[buf, 1, mine] = m
            red[buf, 2, mine] = q
        cuda.syncthreads()
        n = np.float32(0.0)
        m = np.float32(0.0)
        q = np.float32(0.0)
        if lane < nw:
            n = red[buf, 0, first + lane]
            m = red[buf, 1, first + lane]
            q = red[buf, 2, first + lane]
        n, m, q = _warp_chan(n, m, q)
    return n, m, q


@inline_device
def _sub_sum2(a, b, red, buf):
    """:func:`_row_sum2` for rows of ``tpr`` = 8 or 16 threads (several rows per
    warp): xor-shuffles over offsets below tpr only, so each row's lanes reduce among
    themselves. No shared memory, no barrier."""
    tpr = cuda.blockDim.x
    for k in range(4):
        off = 8 >> k
        if off < tpr:
            a += cuda.shfl_xor_sync(FULL_MASK, a, off)
            b += cuda.shfl_xor_sync(FULL_MASK, b, off)
    return a, b


@inline_device
def _sub_sum(v, red, buf):
    """:func:`_row_sum_v2` for rows of 8 or 16 threads (see :func:`_sub_sum2`)."""
    return _sub_sum2(v, np.float32(0.0), red, buf)[0]


@inline_device
def _row_sum_v2(v, red, buf):
    """Sum of ``v`` over the row's threads (block ``(tpr, rows)``), to all of them.
    Warp xor-shuffles; with ``tpr > 32`` one partial per warp goes through ``red[buf,
    0, :]`` (float32 shared ``(2, 2, 32)``) and one ``syncthreads``, then lane ``l``
    reads partial ``l`` (zero past the row's warps) and a second warp sum finishes
    (fixed order: deterministic). Five unconditional steps beat log2(warps)
    predicated ones. Every thread of the block calls it; consecutive calls
    alternate ``buf``."""
    v = warp_sum(v)
    tpr = cuda.blockDim.x
    if tpr > WARP:
        lane, mine, first, nw = _warp_slots()
        if lane == 0:
            red[buf, 0, mine] = v
        cuda.syncthreads()
        s = red[buf, 0, first + lane] if lane < nw else np.float32(0.0)
        v = warp_sum(s)
    return v


@inline_device
def _row_sum1(a, b, red, buf):
    """RMSNorm's backward step in :func:`_row_sum2`'s place (v37, tuning
    ``bwd_rms_sum1``): ``(sum of a, 0)`` with ``a``'s bits there, ``b`` ignored
    (RMSNorm's dx needs one row sum, ``s1 = sum_c xhat_c w_c dy_c``; the pair reduced
    and dropped ``s2``). One :func:`warp_sum` each side of the barrier: a chain of
    five shuffles on each side, as v35's pair (which ran two side by side), where
    v36's step after the barrier is six deep. ``red``: float32 shared ``(2, 2, 32)``
    (``red[buf, 0]`` used); calling rules as :func:`_row_sum`: :func:`_row_sum_v2`'s
    step."""
    return _row_sum_v2(a, red, buf), np.float32(0.0)


def _bwd_sum1(flag, rpb, tpr):
    """Whether RMSNorm's backward reduces its one row sum (v37) at blocks of ``rpb``
    rows of ``tpr`` threads: tuning bwd_rms_sum1 ``flag``; None (the default) is yes
    but for several rows of several warps a block (there it measured slower, H200:
    see _TUNING_DEFAULTS)."""
    if flag is None:
        return rpb == 1 or tpr <= WARP
    return bool(flag)


def _bwd_w_regs(flag, dtype, words):
    """Whether the backward row kernels with w keep it in registers (v38,
    make_backward_kernel's w_regs) for ``dtype`` rows of ``words`` 16-byte groups a
    thread: tuning bwd_w_regs ``flag``; None (the default) is yes for 16-bit rows of
    two or more groups a thread, LayerNorm and RMSNorm alike, where it measured faster
    or even (H200, forty-third and forty-fourth sessions: see _TUNING_DEFAULTS), and
    no for one group a thread (16-bit LayerNorm at N = 768: 80 -> 89 registers, 8 -> 6
    blocks an SM, 116 -> 125 us) and for float32 (even)."""
    if flag is None:
        return _dtype_class(dtype) == "16-bit" and words >= 2
    return bool(flag)


def _bwd_row_step(rms, sum1, red_warps=0, row_bar=False):
    """The backward kernels' row step ``(s1, s2) = step(s1, s2, red, buf)``: the pair
    (:func:`_row_sum2`, or :func:`_row_sum2_direct` for one-row blocks of
    ``red_warps`` warps, or :func:`_row_sum2_rows` under ``row_bar``), or under
    ``sum1`` (RMSNorm only; tuning ``bwd_rms_sum1``) RMSNorm's one sum
    (:func:`_row_sum1`, the direct step with ``rms``)."""
    if sum1 and not rms:
        raise ValueError("sum1 is RMSNorm's (one row sum)")
    if row_bar and (sum1 or red_warps):
        raise ValueError("row_bar is the pair's step with shuffles (neither sum1 nor "
                         "red_warps)")
    if red_warps:
        return _row_sum2_direct(red_warps, sum1)
    if row_bar:
        return _row_sum2_rows
    return _row_sum1 if sum1 else _row_sum2


@inline_device
def _coarse_centre(mu, amax):
    """``mu`` rounded to a multiple of ``q = 2^(e - 12)``, ``e`` the exponent of the
    row's largest magnitude ``amax`` (0 where amax < 2^-114: q would leave the normal
    range). Every x - c is then exact or rounds only x's own low bits, never c's:
    see _lean_forward."""
    ebits = f32_as_u32(amax) & np.uint32(0x7F800000)
    if ebits < np.uint32(13 << 23):
        return np.float32(0.0)
    q = u32_as_f32(ebits - np.uint32(12 << 23))
    return np.float32(math.floor(mu / q + np.float32(0.5))) * q


@inline_device
def _rms_one_element_rstd(x, eps):
    """``1 / sqrt(x^2 + eps)`` to within a hair of correct rounding, for a
    one-element RMSNorm row, whose backward (:func:`_rms_one_element_dx`) loses
    ``2 x^2 / eps`` times rstd's relative error (one ulp off was 47% of dx; torch's
    float32 op 9%). x^2 and x^2 + eps are kept as exact pairs and one Newton step on
    the residual ``1 - v r0^2`` (itself from exact pairs) corrects ``r0``. Not finite
    when x^2 overflows (the caller keeps its plain value then)."""
    p = mul_rn(x, x)
    ep = fma_rn(x, x, -p)
    s = p + eps
    es = _two_sum_err(p, eps, s) + ep
    r0 = np.float32(1.0) / math.sqrt(s)
    u = mul_rn(r0, r0)
    eu = fma_rn(r0, r0, -u)
    res = (fma_rn(-s, u, np.float32(1.0)) - s * eu) - es * u
    return fma_rn(r0 * np.float32(0.5), res, r0)


@inline_device
def _rms_one_element_dx(x, r, d):
    """dx of a one-element RMSNorm row: ``r d (1 - h^2)`` with ``h = x r``. There
    ``1 - h^2`` (= eps r^2) lies far below h^2's rounding error, so h and h^2 are
    carried as exact pairs (fma_rn gives each product's rounding error): only r's own
    rounding is left; the plain ``d - h (h d)`` added several roundings of h on top."""
    h = mul_rn(x, r)
    eh = fma_rn(x, r, -h)
    p = mul_rn(h, h)
    ep = fma_rn(h, h, -p)
    q = ((np.float32(1.0) - p) - ep) - np.float32(2.0) * h * eh
    return mul_rn(d, q) * r


@inline_device
def _acquire(locks, lid, ngroups, flag):
    """Take spin lock ``locks[lid]`` for the whole block (thread (0, 0) spins, the
    others wait at the barrier); True if this is the first writer of buffer ``lid``
    (first-writer flag ``locks[ngroups + lid]``). Called by every thread; ``flag`` is
    an int32 shared array of 1."""
    if cuda.threadIdx.x == 0 and cuda.threadIdx.y == 0:
        while cuda.atomic.cas(locks, lid, 0, 1) != 0:
            pass
        # Acquire side: order the buffer reads below after the CAS that took the lock.
        cuda.threadfence()
        flag[0] = cuda.atomic.exch(locks, ngroups + lid, 1)
    cuda.syncthreads()
    return flag[0] == 0


@inline_device
def _release(locks, lid):
    """Release ``locks[lid]`` after every thread's buffer stores are visible GPU-wide
    (each thread fences, the block synchronises, then one thread unlocks)."""
    cuda.threadfence()
    cuda.syncthreads()
    if cuda.threadIdx.x == 0 and cuda.threadIdx.y == 0:
        cuda.atomic.exch(locks, lid, 0)


@functools.lru_cache(maxsize=None)
def _bwd_row_loader(rms, words, full):
    """Device function ``load(x, dy, mean, rstd, lr, ngw, t, tpr, glast, px, pd)`` of
    the lean backward kernel (the row kernel inlines the same loads; moving it onto
    this helper reorders ptxas' schedule of the shipped v12 kernel, so that waits for
    a GPU A/B): row ``lr``'s (uint64, already clamped into the rows)
    raw 16-byte words of x and dy for thread ``t``'s ``words`` groups (indices clamped
    to ``glast`` unless ``full``) into ``px`` / ``pd``; returns (mean, rstd) of the
    row (mean 0 for RMSNorm)."""
    _, clamp = _group_guards(full)

    @inline_device
    def load(x, dy, mean, rstd, lr, ngw, t, tpr, glast, px, pd):
        mu = np.float32(0.0)
        if not rms:
            mu = mean[lr]
        rs = rstd[lr]
        base = lr * ngw
        for k in range(words):
            gi = clamp(k, tpr, t, glast)
            a = _ld16r(x, base, gi)
            b = _ld16r(dy, base, gi)
            for i in range(4):
                px[4 * k + i] = a[i]
                pd[4 * k + i] = b[i]
        return mu, rs

    return load


# ---------------------------------------------------------------------------------
# Kernel factories
# ---------------------------------------------------------------------------------

_F32_1D = types.Array(types.float32, 1, "C")
_I32_1D = types.Array(types.int32, 1, "C")

# Register-resident groups per thread the launchers may pick, by direction and VEC.
# Forward keeps one row slice (<= 16 floats); backward keeps xhat, w*dy and the dw/db
# accumulators (4 x <= 8 floats) within the 64 registers 1024-thread blocks allow.
_WORDS = {("fwd", 8): (1, 2, 3, 4), ("fwd", 4): (1, 2, 3, 4), ("bwd", 8): (1, 2),
          ("bwd", 4): (1, 2)}
# Register load (see _fat) above which a row kernel is "fat": compiled for <=
# _FAT_BLOCK threads per block (up to 128 registers) instead of 1024 (64). From
# ptxas: fp16 forward with 2 groups (load 24) fits 64 registers, 3 groups (36) take
# 95; fp16 backward with 1 group (40) fits 64, fp32 backward with 2 (48) spills.
_FAT_LOAD = {"fwd": 24, "bwd": 40}
# Groups per thread per iteration in the streaming kernels (8 elements in flight).
_UNROLL = {8: 1, 4: 2, 1: 8}


def _variant_name(rms, has_w, has_b):
    return ("rms" if rms else "ln") + ("_w" if has_w else "") + ("_b" if has_b else "")


def _layout_name(vector, words):
    return ("vec" if vector else "scalar") + (f"_rows{words}" if words else "_stream")



@functools.lru_cache(maxsize=None)
def _group_guards(full):
    """(valid(k, tpr, t, ng), clamp(k, tpr, t, glast)) for group ``k * tpr + t`` of a
    row kernel: whether it lies in the row, and its index clamped into the row (for
    unconditional loads). ``full`` (the launcher knows ``tpr * words == ng``): every
    group is valid; no checks are compiled."""
    if full:

        @inline_device
        def valid(k, tpr, t, ng):
            return True

        @inline_device
        def clamp(k, tpr, t, glast):
            return np.uint32(k * tpr + t)

    else:

        @inline_device
        def valid(k, tpr, t, ng):
            return np.uint32(k * tpr + t) < ng

        @inline_device
        def clamp(k, tpr, t, glast):
            return min(np.uint32(k * tpr + t), glast)

    return valid, clamp


@functools.lru_cache(maxsize=None)
def make_forward_kernel(dtype, rms, has_w, has_b, vector, words, prefetch=True, full=False,
                        lean=False, staged=False, subwarp=False,
                        bounds=None, welford=False, rwords=0,
                        early=False, once=False, stats=True):
    """Forward kernel for ``dtype`` storage.

    rms: RMSNorm (no mean; has_b must be False) else LayerNorm.
    has_w / has_b: multiply by ``w`` / add ``b``.
    vector: 16-byte groups (needs N % VEC == 0 and aligned pointers).
    words: groups per thread kept in registers (row kernel); 0 = streaming kernel.
    prefetch: row kernels load the next row before reducing the current one.
    full: row kernels for ``tpr * words * VEC == n`` exactly (no idle lanes): compiled
    without per-group bounds checks.
    lean: row kernel holding only x's raw 16-byte words (no float32 copy, no
    prefetch, w and b read from global memory): see :func:`_lean_forward`.
    staged: the lean kernel's math with the raw words in dynamic shared memory (rows
    too long for registers); its LayerNorm takes the deviations about a coarse
    centre, free of mu's rounding bias (the streaming kernel carries TwoSum terms
    instead): see :func:`_lean_forward`.
    subwarp: the lean kernel for rows of 8 or 16 threads (several rows per warp).
    bounds: the lean or streaming kernel's launch bounds (threads, blocks an SM)
    instead of the default (1024, 1), so ptxas caps its registers (tuning
    fwd_lean_regs, see :func:`_lean_bounds`; fwd_stream_blocks, see
    :func:`_stream_bounds`); the kernel must then be launched with at most that
    many threads.
    welford: the streaming LayerNorm kernel takes the row's statistics in one pass
    (chunk means and squared deviations merged by Chan's formula) instead of two, so
    it reads the row twice, not three times (tuning fwd_welford; v14).
    rwords: the staged kernel keeps this many of a thread's groups in registers
    besides its ``words`` in shared memory (rows longer than the shared memory holds;
    tuning fwd_staged_regs): see :func:`_lean_forward`.
    early: the lean kernel loads its groups' w and b into registers with the row's x
    (their round trips overlap x's instead of following each y store) and stores
    mean / rstd before y (tuning fwd_early).
    once: the lean kernel takes one row a slot and returns (no grid-stride loop and
    its state in registers); only for grids of a block per pass of row slots, which
    cover every row (tuning fwd_once; v26 compiles early kernels so, see
    :func:`_fwd_early_once`).
    stats: False for RMSNorm's lean kernel with once: rstd never written (the
    forward's ``stats=False``).
    """
    if not stats and not (lean and once and rms):
        raise ValueError("stats=False is the plain kernel's and RMSNorm's lean kernel's "
                         "with once")
    if welford and (rms or words):
        raise ValueError("welford statistics are the streaming LayerNorm kernel's "
                         "(words = 0, not RMSNorm)")
    if (early or once) and not lean:
        raise ValueError("early and once are the lean forward kernel's")
    if rwords and not staged:
        raise ValueError("register groups (rwords) are the staged kernel's")
    if bounds and words and not lean:
        raise ValueError("launch bounds are the lean and streaming forward kernels'")
    if subwarp and (not lean or staged):
        raise ValueError("sub-warp rows are the lean kernel's, two-pass statistics only")
    if rms and has_b:
        raise ValueError("RMSNorm has no bias")
    if staged:
        if not (vector and words) or lean:
            raise ValueError("staged forward kernels are 16-byte row kernels (vector, "
                             "words > 0), not lean ones")
        return _lean_forward(dtype, rms, has_w, has_b, words, full, staged=True,
                             rwords=rwords)
    if lean:
        if not (vector and words):
            raise ValueError("lean forward kernels are 16-byte row kernels (vector, words > 0)")
        return _lean_forward(dtype, rms, has_w, has_b, words, full,
                             subwarp=subwarp,
                             bounds=bounds, early=early, once=once, stats=stats)
    vec = _vec_of(dtype, vector)
    load_group, store_group = _group_io(dtype, vector)
    st = types.Array(_kernel_storage(dtype, vector), 1, "C")
    argtypes = (st, st, st, st, _F32_1D, _F32_1D, types.int64, types.int64, types.float32)
    name = (f"norm_fwd_{dtype}_{_variant_name(rms, has_w, has_b)}_{_layout_name(vector, words)}"
            + ("" if prefetch or not words else "_nopf") + ("_full" if full and words else "")
            + ("_wf" if welford else "")
            + (f"_lb{bounds[0]}x{bounds[1]}" if bounds and not words else ""))

    if words:
        elems = words * vec
        nraw = 4 * words
        quads = vec // 4
        raw_t = _kernel_storage(dtype, True)
        unpack, pack = _raw_codec(dtype)
        load_group = _group_io(dtype, True)[0]
        _gvalid, _gclamp = _group_guards(full)
        # Shared float32 copies of w and b, in 16-byte quads: quad q of thread t at
        # q * tpr + t (conflict-free 16-byte loads); w's quads first, then b's.
        wq = words * quads

        def norm_fwd_rows(x, w, b, y, mean_out, rstd_out, m, n, eps):
            """Row kernel (persistent): y[r, :] = (x[r, :] - mu) * rstd * w + b for
            the rows r of an ``[m, n]`` array (RMSNorm: mu = 0, rstd from the mean
            square, no b).

            Block ``(tpr, rpb)``: row slot ``threadIdx.y`` takes rows
            ``blockIdx.x * rpb + threadIdx.y``, then + ``gridDim.x * rpb`` ...; its
            ``tpr`` threads (a multiple of 32, ``tpr * words * VEC >= n``) each hold
            groups ``k * tpr + threadIdx.x`` (k < words) as float32 in ``xs``, and
            load the next row's groups (raw, ``pre``) before reducing this one.
            w and b are converted once per block into dynamic shared memory (float32,
            ``(has_w + has_b) * words * VEC * tpr`` floats).
            x, y: the ``[m, n]`` input / output as 1-D views of 16-byte groups. w, b:
            ``[n]`` views (unused when has_w / has_b is off: pass any array of the
            same type). mean_out, rstd_out: float32 ``[m]`` (mean_out unused for
            RMSNorm). eps: added to the variance (mean square) before the square root.
            Statistics: mu = sum(x) / n, then d = x - mu, dmu = sum(d) / n (mu's
            rounding), var = (sum(d^2) - sum(d) * dmu) / n; y = (d * rstd - dmu *
            rstd) * w + b; the mean saved is mu + dmu.
            """
            red = cuda.shared.array((2, 2, 32), np.float32)
            wb = cuda.shared.array(0, types.float32)
            pre = cuda.local.array(nraw, raw_t)
            xs = cuda.local.array(elems, np.float32)
            tmp = cuda.local.array(vec, np.float32)
            t = cuda.threadIdx.x
            tpr = cuda.blockDim.x
            slot = cuda.threadIdx.y
            rpb = cuda.blockDim.y
            ng = np.uint32(n // vec)
            ngw = np.uint64(ng)
            nf = np.float32(n)
            inv_n = np.float32(1.0) / nf
            tq = np.uint32(t)
            tpq = np.uint32(tpr)
            if has_w or has_b:
                if slot == 0:
                    for k in range(words):
                        gi = np.uint32(k) * tpq + tq
                        for par in range(2):
                            if (par == 0 and has_w) or (par == 1 and has_b):
                                if gi < ng:
                                    if par == 0:
                                        load_group(w, gi, tmp, 0)
                                    else:
                                        load_group(b, gi, tmp, 0)
                                else:
                                    for j in range(vec):
                                        tmp[j] = np.float32(0.0)
                                q0 = (wq if (par == 1 and has_w) else 0) + k * quads
                                for h in range(quads):
                                    _st16(wb, np.uint32(q0 + h) * tpq + tq, tmp[4 * h],
                                          tmp[4 * h + 1], tmp[4 * h + 2], tmp[4 * h + 3])
                cuda.syncthreads()
            bq = wq if has_w else 0
            row = np.int32(cuda.blockIdx.x * rpb + slot)
            stride = np.int32(cuda.gridDim.x * rpb)
            # With several warps per row the reductions hold block barriers: every
            # row slot then loops the same number of times (slots past the last row
            # compute on whatever they hold, and store nothing).
            m32 = np.int32(m)
            row_end = np.int32(m32 + slot) if tpr > WARP else m32
            # Loads are unconditional: past the last row they re-read row m - 1,
            # past the row's end group ng - 1 (values never used). No branches, and
            # no register copies to keep values a skipped load would have left.
            mlast = np.int32(m32 - 1)
            glast = ng - np.uint32(1)
            if prefetch:
                rb = np.uint64(np.uint32(min(row, mlast))) * ngw
                for k in range(words):
                    q = _ld16r(x, rb, _gclamp(k, tpr, t, glast))
                    for i in range(4):
                        pre[4 * k + i] = q[i]
            phase = 0
            while row < row_end:
                active = row < m32
                rb = np.uint64(np.uint32(row)) * ngw
                nxt = np.int32(row + stride)
                if not prefetch:
                    lb = np.uint64(np.uint32(min(row, mlast))) * ngw
                    for k in range(words):
                        q = _ld16r(x, lb, _gclamp(k, tpr, t, glast))
                        for i in range(4):
                            pre[4 * k + i] = q[i]
                for k in range(words):
                    unpack(pre, 4 * k, xs, k * vec)
                # The first pass over xs comes before the next row's loads: the raw
                # words are dead by then (no copies kept across the loads).
                s = np.float32(0.0)
                for k in range(words):
                    if _gvalid(k, tpr, t, ng):
                        for j in range(vec):
                            v = xs[k * vec + j]
                            s += v * v if rms else v
                if prefetch:
                    nb = np.uint64(np.uint32(min(nxt, mlast))) * ngw
                    for k in range(words):
                        q = _ld16r(x, nb, _gclamp(k, tpr, t, glast))
                        for i in range(4):
                            pre[4 * k + i] = q[i]
                dmu = np.float32(0.0)
                mu = np.float32(0.0)
                if rms:
                    var = _row_sum_v2(s, red, phase) * inv_n
                else:
                    # An IEEE division (once per row): mu is then exact when the row
                    # sum is (constant rows give d = 0 exactly).
                    mu = _row_sum_v2(s, red, phase) / nf
                    phase ^= 1
                    sd = np.float32(0.0)
                    ss = np.float32(0.0)
                    for k in range(words):
                        if _gvalid(k, tpr, t, ng):
                            for j in range(vec):
                                d = xs[k * vec + j] - mu
                                xs[k * vec + j] = d
                                sd += d
                                ss += d * d
                    # Corrected two-pass: sd / n = (true mean - mu) corrects the
                    # rounding error of mu in the variance, and in y: mu + dmu in one
                    # float32 could be off by half an ulp of the mean, a large error
                    # when |mean| >> std.
                    sd, ss = _row_sum2_fwd(sd, ss, red, phase)
                    dmu = sd * inv_n
                    var = max((ss - sd * dmu) * inv_n, np.float32(0.0))
                phase ^= 1
                r = _rsqrt(var + eps)
                nd = -(dmu * r)
                # Computed by every slot (no branch around it: LLVM would otherwise
                # re-derive d from the raw words inside the branch), stored by
                # active ones.
                for k in range(words):
                    gi = np.uint32(k * tpr + t)
                    for h in range(quads):
                        o = k * vec + 4 * h
                        if has_w:
                            wv = _ld16(wb, np.uint32((k * quads + h) * tpr + t))
                        if has_b:
                            bv = _ld16(wb, np.uint32((bq + k * quads + h) * tpr + t))
                        for e in range(4):
                            v = xs[o + e] * r + nd
                            if has_w:
                                v = v * wv[e]
                            if has_b:
                                v = v + bv[e]
                            xs[o + e] = v
                    p = pack(xs, k * vec)
                    if active and _gvalid(k, tpr, t, ng):
                        _st16r(y, rb, gi, p[0], p[1], p[2], p[3])
                if active:
                    if t == 0:
                        if not rms:
                            mean_out[np.uint64(row)] = mu + dmu
                        rstd_out[np.uint64(row)] = r
                row = nxt

        return Kernel(name, norm_fwd_rows, argtypes,
                      **_jit_for(_FAT_BLOCK if _fat("fwd", vec, words) else _MAX_BLOCK))

    unroll = _UNROLL[vec]
    chunk = unroll * vec

    @inline_device
    def load_chunk(x, base, c, tpr, ng, xs, fill):
        """xs = the chunk of ``unroll`` groups c, c + tpr, ... of the row at ``base``;
        groups past the row read as ``fill`` (0 for a sum, mu for deviations)."""
        for u in range(unroll):
            gi = c + u * tpr
            if gi < ng:
                load_group(x, base + gi, xs, u * vec)
            else:
                for j in range(vec):
                    xs[u * vec + j] = fill
        return 0

    def norm_fwd_stream(x, w, b, y, mean_out, rstd_out, m, n, eps):
        """Streaming kernel: same math and arguments as the row kernel, for rows of
        any length. Block ``(tpr, 1)`` takes rows blockIdx.x, + gridDim.x, ...;
        thread t handles groups t, t + tpr, ... ``unroll`` at a time. Passes over
        the row: sum (LayerNorm only), sum of squared deviations, write; with
        ``welford`` (LayerNorm) one statistics pass: each chunk of ``unroll`` groups
        gives its mean cm and squared deviations cq about it, merged into the
        thread's (count, mean, q) and then the row's by :func:`_chan`; mu = mean,
        var = q / n; y takes mu alone, and the normalisation pass sums x - mu (with
        TwoSum terms) for the saved mean's correction dmu."""
        red = cuda.shared.array((2, 32), np.float32)
        red2 = cuda.shared.array((2, 2, 32), np.float32)
        red3 = cuda.shared.array((2, 3, 32), np.float32)
        xs = cuda.local.array(chunk, np.float32)
        ws = cuda.local.array(vec, np.float32)
        bs = cuda.local.array(vec, np.float32)
        t = cuda.threadIdx.x
        tpr = cuda.blockDim.x
        ng = n // vec
        nf = np.float32(n)
        step = tpr * unroll
        phase = 0
        row = cuda.blockIdx.x
        while row < m:
            base = row * ng
            mu = np.float32(0.0)
            if welford:
                wn = np.float32(0.0)
                wm = np.float32(0.0)
                wq = np.float32(0.0)
                c = t
                while c < ng:
                    k = 0
                    for u in range(unroll):
                        gi = c + u * tpr
                        if gi < ng:
                            load_group(x, base + gi, xs, u * vec)
                            k += vec
                    # The loaded groups are xs' first k elements; constant trip
                    # counts keep xs in registers.
                    cs = np.float32(0.0)
                    for j in range(chunk):
                        if j < k:
                            cs += xs[j]
                    kf = np.float32(k)
                    cm = cs / kf
                    cq = np.float32(0.0)
                    for j in range(chunk):
                        if j < k:
                            d = xs[j] - cm
                            cq += d * d
                    wn, wm, wq = _chan(wn, wm, wq, kf, cm, cq)
                    c += step
                wn, mu, wq = _row_chan(wn, wm, wq, red3, phase)
            elif not rms:
                s = np.float32(0.0)
                c = t
                while c < ng:
                    load_chunk(x, base, c, tpr, ng, xs, np.float32(0.0))
                    for j in range(chunk):
                        s += xs[j]
                    c += step
                mu = _row_sum(s, red, phase) / nf
                phase ^= 1
            sd = np.float32(0.0)
            se = np.float32(0.0)
            ss = np.float32(0.0)
            if not welford:
                c = t
                while c < ng:
                    load_chunk(x, base, c, tpr, ng, xs, mu)
                    for j in range(chunk):
                        xv = xs[j]
                        d = xv - mu
                        ss += d * d
                        if rms:
                            sd += d
                        else:
                            # mu's low bits are rounded off the same way in every x - mu
                            # of one binade, and again in every sd + d: biases that a
                            # plain sum carries into dmu (6e-5 of the mean at N = 65536).
                            sd, se = _deviation_sum(sd, se, xv, mu, d)
                    c += step
            dmu = np.float32(0.0)
            if welford:
                var = max(wq / nf, np.float32(0.0))
            elif rms:
                var = _row_sum(ss, red, phase) / nf
            else:
                sd, ss = _row_sum2_fwd(sd, ss, red2, phase)
                se = _row_sum(se, red, phase)
                dmu = (sd + se) / nf
                var = max((ss - sd * dmu) / nf, np.float32(0.0))
            phase ^= 1
            r = np.float32(1.0) / math.sqrt(var + eps)
            if rms and n == 1 and t == 0:
                # Thread 0 holds the element (xs[0]) and alone stores y and rstd.
                ra = _rms_one_element_rstd(xs[0], eps)
                if math.isfinite(ra):
                    r = ra
            c = t
            while c < ng:
                for u in range(unroll):
                    gi = c + u * tpr
                    if gi < ng:
                        load_group(x, base + gi, xs, u * vec)
                for u in range(unroll):
                    gi = c + u * tpr
                    if gi < ng:
                        if has_w:
                            load_group(w, gi, ws, 0)
                        if has_b:
                            load_group(b, gi, bs, 0)
                        for j in range(vec):
                            xv = xs[u * vec + j]
                            v = ((xv - mu) - dmu) * r
                            if welford:
                                # The saved mean's correction (as the two-pass
                                # kernel's dmu): y takes mu, whose error is a few
                                # ulps of the row's spread, but a mean near 0 against
                                # a wide row would keep them as its own error.
                                sd, se = _deviation_sum(sd, se, xv, mu, xv - mu)
                            if has_w:
                                v = v * ws[j]
                            if has_b:
                                v = v + bs[j]
                            xs[u * vec + j] = v
                        store_group(y, base + gi, xs, u * vec)
                c += step
            if welford:
                sd, se = _row_sum2_fwd(sd, se, red2, phase)
                dmu = (sd + se) / nf
                phase ^= 1
            if t == 0:
                if not rms:
                    mean_out[np.uint64(row)] = mu + dmu
                rstd_out[np.uint64(row)] = r
            row += cuda.gridDim.x

    jit = dict(_JIT)
    if bounds and not SIMULATOR:
        jit["launch_bounds"] = tuple(bounds)
    return Kernel(name, norm_fwd_stream, argtypes, **jit)


@functools.lru_cache(maxsize=None)
def _stats_store(rms):
    """Device function ``store_stats(mean_out, rstd_out, row, mean, r)`` of the forward
    row kernels: row ``row``'s mean (LayerNorm only) and rstd."""

    @inline_device
    def store_stats(mean_out, rstd_out, row, mean, r):
        if not rms:
            mean_out[np.uint64(row)] = mean
        rstd_out[np.uint64(row)] = r
        return 0

    return store_stats


@functools.lru_cache(maxsize=None)
def _lean_forward(dtype, rms, has_w, has_b, words, full, staged=False,
                  subwarp=False, bounds=None, rwords=0,
                  early=False, once=False, stats=True):
    """The lean row kernel of :func:`make_forward_kernel` (same arguments and math;
    ``staged``: the row in shared memory, and LayerNorm's deviations about a coarse
    centre; see below).

    The row kernel keeps each thread's groups twice (raw words for the next row,
    float32 for this one) and w, b as float32 in shared memory: at N >= 12288 that
    is ~95 registers per thread and up to 96 KiB per block, one 384-512-thread row
    per SM, whose two block-wide reductions then sit on the critical path (ncu-less
    reading of the v4c table, bench/notes_layer_norm.md). Here x's groups stay as
    raw 16-byte words in registers across the three passes (sum, deviations, write;
    each pass converts what it reads, and x - mu is recomputed bit for bit as the
    row kernel stores it), w and b are read from global memory (L1/L2-resident: every
    row reads the same n values) and nothing is prefetched: half the registers, no
    shared memory but the reduction slots, so several rows are resident per SM and
    each other's loads hide the reductions.

    staged: for rows too long for registers (16-bit N = 65536: 8 groups a thread at
    1024 threads, 128 KiB a row), the raw words live in dynamic shared memory. The
    streaming kernel reads such a row three times (sum, deviations, write; the
    re-reads from L2); here one ``cp.async`` pass brings the row into shared memory
    (no registers held, every copy of a thread in flight at once) and each pass reads
    a group back (``fetch``) where the register kernel indexes it. Thread ``t`` of
    a row slot owns groups ``k * tpr + t`` at ``sm[4 (slot * words * tpr + k * tpr +
    t):][:4]``: only it reads them back, so its own ``cp.async.wait_all`` is all the
    synchronisation needed. Its LayerNorm statistics are compensated (below); its
    RMSNorm is bit-identical to the register kernel at the same layout.

    rwords (staged only): the thread's first ``rwords`` groups (``k * tpr + t``, k <
    rwords) stay in registers as in the register kernel and the next ``words`` go to
    shared memory (slot ``k - rwords``), for rows longer than the shared memory holds
    (float32 N = 65536: 14 groups a thread in 224 KiB, 2 in registers; v16): the row
    is still read from global memory once. The cp.async copies are issued first, so
    the register loads overlap them.

    compensated (the staged LayerNorm; the lean one measured 7% slower with it at N <=
    4096 and ran without by default, so its form was retired in the twenty-ninth
    session with tuning ``fwd_compensated``; the lean kernel's bias on one-binade rows
    is a strict xfail in the tests): mu's low bits are rounded off the same way in
    every x - mu of one binade, and again in every sd + d, so a plain sum carries a
    bias into the mean's correction dmu that grows with n (6e-5 of the mean at 16-bit
    N = 65536, against the 1e-5 float32 statistics are held to). The deviations are
    taken about a coarse centre c instead (:func:`_coarse_centre`): mu rounded to a
    multiple of q = 2^(e - 12), e the exponent of the row's largest |x| (the first
    pass reduces it with the sum, same barrier). c has no bits below q, so x - c
    (|x - c| < 2^(e + 2)) is exact for every x whose own last bit is at or above
    2^(e - 21), and otherwise rounds only x's low bits, never c's: no shared bias.
    The sums of such d are then exact or unbiased, and c is within q <= max|x| / 4096
    of mu, so the variance's correction term stays small. y = (x - c) r - dmu r and
    mean = c + dmu, dmu = sum(d) / n. Simulated on the failing rows (numpy float32,
    the kernel's sum order): 2.8e-7 (fp16) / 3.0e-7 (bf16) of the mean at N = 65536,
    exact on one-binade rows, where TwoSum terms (the first form of this flag: +12
    instructions an element, +25% time) gave 7e-7 / 2e-6.

    subwarp: rows of tpr = 8 or 16 threads, 32 / tpr rows a warp (short rows: 16-bit
    N = 512 is 64 groups, 16 threads of 4); the reductions shuffle over offsets below
    tpr (:func:`_sub_sum2`) and slots past the last row keep looping with their warp,
    as with several warps a row. The block must hold whole warps.

    early (v26): the register groups' w and b words are loaded right after the row's x
    (into ``we`` / ``be``, 8 more registers a 16-bit group), so their round trips
    overlap x's; otherwise each group's pair goes out after the reductions, behind
    the previous group's y store, which a plain load may not pass. The statistics'
    stores go out before y's. once: the slot takes its one row and stops (the grid
    covers every row), so no loop state stays live: what lets early fit the 48
    registers of the capped layouts without spilling. stats False (RMSNorm's once
    kernels only): rstd_out is never written (the forward's ``stats=False``; name
    ``_nostats``). LayerNorm's have no such form: without the stores ptxas spills 4
    bytes in the 16-bit two-group capped layouts (48 registers), and its rows take the
    plain kernel where the statistics cost most."""
    if not stats and not (once and rms):
        raise ValueError("stats=False is the plain kernel's and RMSNorm's lean kernel's "
                         "with once")
    vec = _vec_of(dtype, True)
    nraw = 4 * words
    raw_t = _kernel_storage(dtype, True)
    st = types.Array(raw_t, 1, "C")
    argtypes = (st, st, st, st, _F32_1D, _F32_1D, types.int64, types.int64, types.float32)
    _, elem = _raw_io(dtype)
    _, pack = _raw_codec(dtype)
    _gvalid, _gclamp = _group_guards(full)
    compensated = staged and not rms
    name = (f"norm_fwd_{dtype}_{_variant_name(rms, has_w, has_b)}_vec_"
            f"{'staged' if staged else 'lean'}{words}" + (f"r{rwords}" if rwords else "")
            + ("_full" if full else "") + ("_comp" if compensated else "")
            + ("_subwarp" if subwarp else "") + ("_early" if early else "")
            + ("_once" if once else "")
            + (f"_lb{bounds[0]}x{bounds[1]}" if bounds else "")
            + ("" if stats else "_nostats"))
    rsum = _sub_sum if subwarp else _row_sum_v2
    rsum2 = _sub_sum2 if subwarp else _row_sum2_fwd
    # Groups a thread: in registers (xr[4 k:], k < RW) and in shared memory; a group
    # read back from shared memory lands in xr[4 RW:].
    RW = rwords if staged else words
    KW = words + rwords
    NXR = 4 * RW + 4 if staged else nraw
    # early: the register groups' w and b words, loaded with the row's x.
    NWE = 4 * RW if early else 1

    # Each pass visits the register groups (xr[4 k:], constant offsets once the short
    # loop unrolls) and then the shared-memory ones, each read back into xr[4 RW:]
    # (one loop with a branch on k would index xr at run time: a stack frame).
    @inline_device
    def stage(sm, base, x, rb, t, tpr, glast):
        """cp.async of the thread's shared-memory groups of the row at ``rb`` into its
        slots from ``base``."""
        for k in range(RW, KW):
            g = np.uint64(_gclamp(k, tpr, t, glast))
            cp_async_16(sm, 4 * (base + np.uint32((k - RW) * tpr)), x, 4 * (rb + g), 16)
        return 0

    @inline_device
    def fetch(xr, sm, own, k, tpr):
        """Shared-memory group slot k of the thread into xr[4 RW:4 RW + 4]."""
        q = _ld16(sm, own + np.uint32(k * tpr))
        for i in range(4):
            xr[4 * RW + i] = q[i]
        return 0

    @inline_device
    def group_sum(xr, o, s, amax):
        """First pass over the group at xr[o:]: s += x (RMSNorm: x^2), amax = max |x|
        (compensated)."""
        for j in range(vec):
            v = elem(xr, o, j)
            s += v * v if rms else v
            if compensated:
                amax = max(amax, abs(v))
        return s, amax

    @inline_device
    def group_dev(xr, o, mu, sd, ss):
        """Second pass: sd += x - mu, ss += (x - mu)^2."""
        for j in range(vec):
            d = elem(xr, o, j) - mu
            sd += d
            ss += d * d
        return sd, ss

    @inline_device
    def group_write(xr, o, k, w, b, y, wr, br, ys, rb, t, tpr, glast, ng, ok, mu, r, nd):
        """Write pass: y's group k of the thread = ((x - mu) r + nd) w + b, stored
        where the row is active (ok) and the group valid."""
        gi = _gclamp(k, tpr, t, glast)
        if has_w:
            q = _ld16(w, gi)
            for i in range(4):
                wr[i] = q[i]
        if has_b:
            q = _ld16(b, gi)
            for i in range(4):
                br[i] = q[i]
        return group_store(xr, o, k, wr, br, 0, y, ys, rb, t, tpr, ng, ok, mu, r, nd)

    @inline_device
    def group_store(xr, o, k, wv, bv, vo, y, ys, rb, t, tpr, ng, ok, mu, r, nd):
        """group_write's math and store with the group's w and b words at wv / bv[vo:]
        (early: loaded with the row)."""
        for j in range(vec):
            v = (elem(xr, o, j) - mu) * r + nd
            if has_w:
                v = v * elem(wv, vo, j)
            if has_b:
                v = v + elem(bv, vo, j)
            ys[j] = v
        p = pack(ys, 0)
        if ok and _gvalid(k, tpr, t, ng):
            _st16r(y, rb, np.uint32(k * tpr + t), p[0], p[1], p[2], p[3])
        return 0

    store_stats = _stats_store(rms)

    def norm_fwd_lean(x, w, b, y, mean_out, rstd_out, m, n, eps):
        """Lean row kernel (persistent): y[r, :] = (x[r, :] - mu) * rstd * w + b,
        statistics and arguments as the row kernel's (``norm_fwd_rows``). Block
        ``(tpr, rpb)``: row slot ``threadIdx.y`` takes rows ``blockIdx.x * rpb +
        threadIdx.y``, + ``gridDim.x * rpb``, ...; its ``tpr`` threads each hold
        groups ``k * tpr + threadIdx.x`` (k < words + rwords) of the row as raw words
        ``xr`` (staged: all but the first rwords in dynamic shared memory, ``16 *
        words * tpr * rpb`` bytes; else none)."""
        red = cuda.shared.array((2, 2, 32), np.float32)
        sm = cuda.shared.array(0, raw_t)
        xr = cuda.local.array(NXR, raw_t)
        wr = cuda.local.array(4, raw_t)
        br = cuda.local.array(4, raw_t)
        we = cuda.local.array(NWE, raw_t)
        be = cuda.local.array(NWE, raw_t)
        ys = cuda.local.array(vec, np.float32)
        t = cuda.threadIdx.x
        tpr = cuda.blockDim.x
        slot = cuda.threadIdx.y
        rpb = cuda.blockDim.y
        own = np.uint32(slot * words * tpr + t)
        ng = np.uint32(n // vec)
        ngw = np.uint64(ng)
        nf = np.float32(n)
        inv_n = np.float32(1.0) / nf
        row = np.int32(cuda.blockIdx.x * rpb + slot)
        stride = np.int32(cuda.gridDim.x * rpb)
        m32 = np.int32(m)
        # Several warps per row: every slot loops alike (the reductions hold barriers);
        # several rows per warp: every slot loops alike (the shuffles take the warp).
        row_end = np.int32(m32 + slot) if tpr > WARP or subwarp else m32
        mlast = np.int32(m32 - 1)
        glast = ng - np.uint32(1)
        phase = 0
        while row < row_end:
            active = row < m32
            rb = np.uint64(np.uint32(min(row, mlast))) * ngw
            base = own
            if staged:
                stage(sm, own, x, rb, t, tpr, glast)
            for k in range(RW):
                q = _ld16r(x, rb, _gclamp(k, tpr, t, glast))
                for i in range(4):
                    xr[4 * k + i] = q[i]
            if early:
                for k in range(RW):
                    gi = _gclamp(k, tpr, t, glast)
                    if has_w:
                        q = _ld16(w, gi)
                        for i in range(4):
                            we[4 * k + i] = q[i]
                    if has_b:
                        q = _ld16(b, gi)
                        for i in range(4):
                            be[4 * k + i] = q[i]
            if staged:
                cp_async_wait_all()
            s = np.float32(0.0)
            amax = np.float32(0.0)
            for k in range(RW):
                if _gvalid(k, tpr, t, ng):
                    s, amax = group_sum(xr, 4 * k, s, amax)
            for k in range(RW, KW):
                if _gvalid(k, tpr, t, ng):
                    fetch(xr, sm, base, k - RW, tpr)
                    s, amax = group_sum(xr, 4 * RW, s, amax)
            dmu = np.float32(0.0)
            mu = np.float32(0.0)
            if rms:
                var = rsum(s, red, phase) * inv_n
            else:
                if compensated:
                    s, amax = _row_sum_max_v2(s, amax, red, phase)
                    mu = _coarse_centre(s / nf, amax)
                else:
                    mu = rsum(s, red, phase) / nf
                phase ^= 1
                sd = np.float32(0.0)
                ss = np.float32(0.0)
                for k in range(RW):
                    if _gvalid(k, tpr, t, ng):
                        sd, ss = group_dev(xr, 4 * k, mu, sd, ss)
                for k in range(RW, KW):
                    if _gvalid(k, tpr, t, ng):
                        fetch(xr, sm, base, k - RW, tpr)
                        sd, ss = group_dev(xr, 4 * RW, mu, sd, ss)
                sd, ss = rsum2(sd, ss, red, phase)
                dmu = sd * inv_n
                var = max((ss - sd * dmu) * inv_n, np.float32(0.0))
            phase ^= 1
            r = _rsqrt(var + eps)
            nd = -(dmu * r)
            # early: the statistics' stores go out ahead of y's.
            if stats and early and active and t == 0:
                store_stats(mean_out, rstd_out, row, mu + dmu, r)
            for k in range(RW):
                if early:
                    group_store(xr, 4 * k, k, we, be, 4 * k, y, ys, rb, t, tpr, ng, active,
                                mu, r, nd)
                else:
                    group_write(xr, 4 * k, k, w, b, y, wr, br, ys, rb, t, tpr, glast, ng,
                                active, mu, r, nd)
            for k in range(RW, KW):
                fetch(xr, sm, base, k - RW, tpr)
                group_write(xr, 4 * RW, k, w, b, y, wr, br, ys, rb, t, tpr, glast, ng,
                            active, mu, r, nd)
            if stats and not early and active and t == 0:
                store_stats(mean_out, rstd_out, row, mu + dmu, r)
            row += stride
            if once:
                break

    jit = dict(_JIT)
    if bounds and not SIMULATOR:
        jit["launch_bounds"] = tuple(bounds)
    return Kernel(name, norm_fwd_lean, argtypes, **jit)


@functools.lru_cache(maxsize=None)
def make_plain_forward_kernel(dtype, rms, has_w, has_b, words, tpr, rpb=1, early=True,
                              ragged=False, min_blocks=None, stats=True, reload=False,
                              stats_block=False, checked=False):
    """Plain forward row kernel (tuning ``fwd_plain``; v27, twenty-third session):
    bench/ab/copy_ceiling.py's "ladder" LayerNorm as a library kernel, its layout
    compiled in. Exact 16-byte rows of ``tpr * words`` groups (``tpr`` a multiple of
    32, or 8 / 16: sub-warp rows, ``32 / tpr`` a warp, slots in whole warps); a block
    ``(tpr, rpb)`` of ``rpb`` row slots takes rows ``blockIdx.x * rpb + s`` (grid
    ``cdiv(m, rpb)``), one each, no loop; thread t of slot s holds groups ``k * tpr +
    t`` (k < words) of its row as raw 32-bit words. ``ragged``: m is not a multiple of
    rpb, so the last block's spare slots read the last row again, join the barriers
    (and shuffles) and store nothing.

    Math (fp32): mu = sum(x) / n; var = sum((x - mu)^2) / n (RMSNorm: mu = 0, var =
    sum(x^2) / n); r = rsqrt(var + eps); y = (x - mu) r w + b; mean = mu, rstd = r.
    float32 LayerNorm corrects mu's rounding as the lean kernel: d = x - mu, dmu =
    sum(d) / n, var = (sum(d^2) - sum(d) dmu) / n, y = (d r - dmu r) w + b, mean = mu +
    dmu (the second pass's two sums share one barrier).
    Each row sum is a warp (sub-warp rows: segment) sum, then (rows of several
    warps) the warps' partials in ``red[pass, s * warps:]`` summed in warp order by
    every thread after one barrier; each pass has its own buffer, so none waits to
    reuse one. ``early``: w and b loaded into registers right after x and the
    statistics stored before y (else w / b after the reductions, the statistics after
    y). Arguments as the lean kernel's: x, w, b, y raw 16-byte-aligned 1-D arrays of
    4-byte words, mean_out / rstd_out float32 ``[m]``, m, n (= tpr * words * the
    values of a 16-byte group), eps. Launch bounds ``(tpr * rpb, 1)`` only for blocks
    over 512 threads; ``min_blocks`` (tuning ``fwd_plain_min_blocks``): bounds ``(tpr *
    rpb, min_blocks)``, so ptxas fits that many blocks an SM (name ``_lb<block>x<min>``).
    ``stats`` False: mean_out / rstd_out are never written (the forward's ``stats=False``,
    y alone, as a forward under ``torch.no_grad`` needs; name ``_nostats``).
    ``reload`` (tuning ``fwd_plain_reload``; name ``_rl``): inductor's two-loop shape
    (its generated float32 RMSNorm / LayerNorm, sixty-first session). x is not held
    across the reductions: each pass reads the thread's words again, the first (and
    LayerNorm's deviation pass) with ``.L1::evict_last`` so the lines stay in L1, the
    last (y's) with ``.L1::evict_first``; w / b carry ``.L1::evict_last`` too (every
    row reads them) and, late, come in one batch with x's last read, before y's
    stores (``reload="word"``, name ``_rlw``: word by word, each word's y stored before
    the next word's reads, as inductor's second loop; ``reload="l2"``, name ``_rl2``:
    batched, each load with inductor's L2 cache policy beside its L1 priority, x's
    first reads and w / b ``L2::evict_last``, y's read of x ``L2::evict_first``). The
    same values in the same order, so the same bits; fewer registers live across the
    barriers (more blocks an SM) for L1 / L2 traffic.
    (Refuted variants, removed in the sixty-fifth session and described in
    bench/NOTES.md: x's loads with an L2 prefetch size, sixtieth session; n compiled in
    and the warps' partials summed pairwise, v54; eviction policies on the held
    kernel's loads, v57 / v59.)
    ``stats_block`` (tuning ``fwd_plain_stats_block``; name ``_sb``; needs ``stats`` and
    ``rpb`` >= 2): the block's rows' statistics go through shared memory ``sts[0 / 1,
    s]`` and, after y's stores and one barrier, threads ``s * tpr + t < rpb`` store
    mean / rstd of rows ``blockIdx.x * rpb + (s * tpr + t)``: one coalesced store an
    array a block (whole 32-byte sectors at ``rpb`` a multiple of 8), where otherwise
    every row's thread 0 stores 4 bytes on its own. The same values, so the same bits.
    ``checked`` (v63, tuning ``fwd_plain_checked``; name ``_chk``; not with
    ``reload``): rows of ng = n / (values a group) groups that ``tpr * words`` does not
    match, with (words - 1) tpr < ng <= words tpr: rows start ng groups apart, and a
    thread's last word k = words - 1 is its row's only where k tpr + t < ng (``tail``);
    elsewhere that word is neither read (x, w, b) nor summed nor stored. Widths like
    1152, 1600 or 6656 at 16 bits, which no exact layout splits.
    """
    if rms and has_b:
        raise ValueError("RMSNorm has no bias")
    if not (isinstance(words, int) and 1 <= words <= 8):
        raise ValueError(f"words must be an int in [1, 8], got {words!r}")
    if tpr not in _SUB_TPR and (tpr % WARP or not WARP <= tpr <= _MAX_BLOCK):
        raise ValueError(f"tpr must be {_SUB_TPR[0]}, {_SUB_TPR[1]} or a multiple of "
                         f"{WARP} in [{WARP}, {_MAX_BLOCK}], got {tpr}")
    if not (isinstance(rpb, int) and rpb >= 1 and tpr * rpb <= _MAX_BLOCK):
        raise ValueError(f"the block (tpr * rpb = {tpr} * {rpb}) must hold at most "
                         f"{_MAX_BLOCK} threads")
    if (tpr * rpb) % WARP:
        raise ValueError(f"rows of {tpr} threads need whole warps: tpr * rpb = {tpr} * "
                         f"{rpb} is not a multiple of {WARP}")
    if not (isinstance(reload, bool) or reload in ("word", "l2")):
        raise ValueError(f"reload must be a bool, 'word' or 'l2', got {reload!r}")
    if checked and reload:
        raise ValueError("checked rows read x once: not with reload, got "
                         f"reload={reload!r}")
    if stats_block and not (stats and rpb >= 2):
        raise ValueError("stats_block stores the statistics of a block's rows together: it "
                         f"needs stats and at least two rows a block, got stats={stats!r}, "
                         f"rpb={rpb}")
    if min_blocks is not None and not (isinstance(min_blocks, int) and min_blocks >= 1
                                       and tpr * rpb * min_blocks <= _SM_THREADS):
        raise ValueError(f"min_blocks must be None or an int >= 1 with tpr * rpb * "
                         f"min_blocks <= {_SM_THREADS}, got {min_blocks!r}")
    wide = _vec_of(dtype, True) == 8
    st = types.Array(_kernel_storage(dtype, True), 1, "C")
    argtypes = (st, st, st, st, _F32_1D, _F32_1D, types.int64, types.int64, types.float32)
    warps = max(1, tpr // WARP)
    NRED = rpb * warps
    # A row's lanes: the warp, or a sub-warp segment of tpr lanes (the block's
    # threads run x fastest, so slot s's threads are lanes s * tpr % 32 on).
    SEG = min(tpr, WARP)
    STEPS = SEG.bit_length() - 1
    # float32 LayerNorm: mu's rounding corrected as the lean kernel does (dmu). At
    # 16-bit y's own rounding hides it (rows of mean / std up to 2000 under the
    # simulator: the same max error either way); float32 rows like 1000 + 0.01 noise
    # read 1e-3 off without it.
    corrected = not (rms or wide)
    NB = 3 if corrected else 2
    span = tpr * words
    # Values a 16-byte group (checked rows find their groups from n).
    VALS = 8 if wide else 4
    NX = 4 * words
    NW = NX if early or reload else 4
    # reload "word": y's pass reads word k of x (and w / b) and stores y's word k before
    # the next, as inductor's second loop does; True: all reads, then all stores.
    by_word = reload == "word"
    name = (f"norm_fwd_{dtype}_{_variant_name(rms, has_w, has_b)}_vec_plain{words}"
            f"_t{tpr}x{rpb}" + ("_dmu" if corrected else "") + ("_early" if early else "")
            + ("_ragged" if ragged else "")
            + (f"_lb{tpr * rpb}x{min_blocks}" if min_blocks else "")
            + ("" if stats else "_nostats")
            + ("_rlw" if reload == "word" else "_rl2" if reload == "l2"
               else "_rl" if reload else "")
            + ("_sb" if stats_block else "") + ("_chk" if checked else ""))
    store_stats = _stats_store(rms)
    # Statistics stored by each row's thread 0 where they are computed (else, with
    # stats_block, by the block's first rpb threads at the end).
    row_stats = stats and not stats_block
    # reload "l2": inductor's L2 policies keep the row in L2 between its reads (without
    # them inductor's own kernel runs 2.5 us slower: sixty-third session).
    l2 = "+L2last" if reload == "l2" else ""
    ld_x = ld_global_v4_evict("last" + l2) if reload else ld_global_v4
    ld_y = ld_global_v4_evict("first+L2first" if l2 else "first")
    ld_wb = ld_global_v4_evict("last" + l2) if reload else ld_global_v4
    bf16 = dtype == "bfloat16"

    # A 16-bit word's two values (one opaque inline-PTX conversion a word, redone in
    # each pass, so only the raw words stay live) and back.
    @inline_device
    def up(wd):
        return _unpack2(wd, bf16)

    @inline_device
    def pk(a, c):
        return _bf2(a, c) if bf16 else pack_f16x2(a, c)

    @inline_device
    def seg_sum(v):
        for k in range(STEPS):
            v += cuda.shfl_xor_sync(FULL_MASK, v, (SEG >> 1) >> k)
        return v

    @inline_device
    def partials(red, p, slot):
        """The sum of the row's warps' partials in red[p, slot * warps:]."""
        o = slot * warps
        v = red[p, o]
        for i in range(1, warps):
            v += red[p, o + i]
        return v

    @inline_device
    def row_sum(v, red, p, t, slot):
        v = seg_sum(v)
        if warps > 1:
            if t % WARP == 0:
                red[p, slot * warps + t // WARP] = v
            cuda.syncthreads()
            v = partials(red, p, slot)
        return v

    @inline_device
    def row_sum2(a, c, red, t, slot):
        """Two row sums through buffers 1 and 2, one barrier."""
        a = seg_sum(a)
        c = seg_sum(c)
        if warps > 1:
            if t % WARP == 0:
                red[1, slot * warps + t // WARP] = a
                red[2, slot * warps + t // WARP] = c
            cuda.syncthreads()
            a = red[1, slot * warps]
            c = red[2, slot * warps]
            for i in range(1, warps):
                a += red[1, slot * warps + i]
                c += red[2, slot * warps + i]
        return a, c

    @inline_device
    def load_wb(w, b, wr, br, o, idx):
        if has_w:
            q = ld_wb(w, idx)
            for i in range(4):
                wr[o + i] = q[i]
        if has_b:
            q = ld_wb(b, idx)
            for i in range(4):
                br[o + i] = q[i]
        return 0

    @inline_device
    def load_word(x, xr, base, k, last):
        """The thread's word k of its row into xr[4k:] (``last``: x's final read)."""
        if last:
            q = ld_y(x, base + k * tpr * 4)
        else:
            q = ld_x(x, base + k * tpr * 4)
        for i in range(4):
            xr[4 * k + i] = q[i]
        return 0

    @inline_device
    def load_x(x, xr, base, last, tail):
        """The thread's words of its row into xr (reload: x read again; checked: its
        last word only where ``tail``)."""
        for k in range(words):
            if checked:
                if k == words - 1 and not tail:
                    continue
            load_word(x, xr, base, k, last)
        return 0

    @inline_device
    def out_word(xw, wr, br, o, i, mu, r, nd):
        """Word i of y's group: (x - mu) r w + b for the value(s) of raw word ``xw``, w
        and b from word i of wr / br[o:] (corrected: ((x - mu) r + nd) w + b, nd =
        -dmu r)."""
        if wide:
            lo, hi = up(xw)
            lo = (lo - mu) * r
            hi = (hi - mu) * r
            if has_w:
                wl, wh = up(wr[o + i])
                lo = lo * wl
                hi = hi * wh
            if has_b:
                bl, bh = up(br[o + i])
                lo = lo + bl
                hi = hi + bh
            return pk(lo, hi)
        v = (u32_as_f32(xw) - mu) * r
        if corrected:
            v = v + nd
        if has_w:
            v = v * u32_as_f32(wr[o + i])
        if has_b:
            v = v + u32_as_f32(br[o + i])
        return f32_as_u32(v)

    @inline_device
    def moment(xr, mu, square, tail):
        """sum over the thread's values of x (square False) or (x - mu)^2 (checked: its
        last word's only where ``tail``)."""
        s = np.float32(0.0)
        for i in range(NX):
            if checked:
                if i >= NX - 4 and not tail:
                    continue
            if wide:
                lo, hi = up(xr[i])
                if square:
                    s += (lo - mu) * (lo - mu) + (hi - mu) * (hi - mu)
                else:
                    s += lo + hi
            else:
                v = u32_as_f32(xr[i])
                if square:
                    s += (v - mu) * (v - mu)
                else:
                    s += v
        return s

    @inline_device
    def block_stats(mean_out, rstd_out, m, t, slot, mu_out, r):
        """stats_block: the block's rows' statistics through shared memory, stored by
        its first rpb threads (consecutive rows, so one coalesced access an array).
        Called after y's stores, so the barrier waits on no load."""
        sts = cuda.shared.array((2, rpb), np.float32)
        if t == 0:
            sts[0, slot] = mu_out
            sts[1, slot] = r
        cuda.syncthreads()
        lin = slot * tpr + t
        if lin < rpb:
            srow = cuda.blockIdx.x * np.int64(rpb) + lin
            if not ragged or srow < m:
                store_stats(mean_out, rstd_out, srow, sts[0, lin], sts[1, lin])
        return 0

    def norm_fwd_plain(x, w, b, y, mean_out, rstd_out, m, n, eps):
        """y[r, :] = (x[r, :] - mu) * rstd * w + b for row r = blockIdx.x * rpb +
        threadIdx.y (see make_plain_forward_kernel)."""
        red = cuda.shared.array((NB, NRED), np.float32)
        xr = cuda.local.array(NX, np.uint32)
        wr = cuda.local.array(NW, np.uint32)
        br = cuda.local.array(NW, np.uint32)
        out = cuda.local.array(4, np.uint32)
        t = cuda.threadIdx.x
        slot = cuda.threadIdx.y
        row = cuda.blockIdx.x * np.int64(rpb) + slot
        active = True
        if ragged:
            active = row < m
            row = min(row, m - 1)
        # In 4-byte elements: word k of this thread sits k * tpr 16-byte words on, a
        # constant offset from one base address.
        tail = True
        if checked:
            # Rows ng groups apart; the thread's last word is in its row where tail.
            ng = n // VALS
            base = (row * ng + t) * 4
            tail = (words - 1) * tpr + t < ng
        else:
            base = (row * span + t) * 4
        load_x(x, xr, base, False, tail)
        if early:
            for k in range(words):
                if checked:
                    if k == words - 1 and not tail:
                        continue
                load_wb(w, b, wr, br, 4 * k, (k * tpr + t) * 4)
        nf = np.float32(n)
        mu = np.float32(0.0)
        if not rms:
            mu = row_sum(moment(xr, mu, False, tail), red, 0, t, slot) / nf
        if reload and not rms:
            load_x(x, xr, base, False, tail)
        dmu = np.float32(0.0)
        if corrected:
            sd = np.float32(0.0)
            ss = np.float32(0.0)
            for i in range(NX):
                if checked:
                    if i >= NX - 4 and not tail:
                        continue
                d = u32_as_f32(xr[i]) - mu
                sd += d
                ss += d * d
            sd, ss = row_sum2(sd, ss, red, t, slot)
            dmu = sd / nf
            var = max((ss - sd * dmu) / nf, np.float32(0.0))
        else:
            var = row_sum(moment(xr, mu, True, tail), red, 1, t, slot) / nf
        r = _rsqrt(var + eps)
        nd = -(dmu * r)
        if corrected:
            mu_out = mu + dmu
        else:
            mu_out = mu
        if row_stats and early and active and t == 0:
            store_stats(mean_out, rstd_out, row, mu_out, r)
        if reload and not by_word:
            load_x(x, xr, base, True, tail)
            if not early:
                for k in range(words):
                    load_wb(w, b, wr, br, 4 * k, (k * tpr + t) * 4)
        for k in range(words):
            if checked:
                if k == words - 1 and not tail:
                    continue
            o = 4 * k if early or reload else 0
            if by_word:
                load_word(x, xr, base, k, True)
            if not early and (by_word or not reload):
                load_wb(w, b, wr, br, o, (k * tpr + t) * 4)
            for i in range(4):
                out[i] = out_word(xr[4 * k + i], wr, br, o, i, mu, r, nd)
            if active:
                st_global_v4(y, base + k * tpr * 4, out[0], out[1], out[2], out[3])
        if row_stats and not early and active and t == 0:
            store_stats(mean_out, rstd_out, row, mu_out, r)
        if stats_block:
            block_stats(mean_out, rstd_out, m, t, slot, mu_out, r)

    # Launch bounds only where the block needs them to launch: with bounds (128, 1)
    # ptxas takes 128 registers at four 16-bit groups with w / b early where it
    # otherwise takes the ladder's 72 (64 -> 48 at two groups).
    block = tpr * rpb
    jit = _jit_for(block, min_blocks or 1) if min_blocks or block > 512 else {}
    return Kernel(name, norm_fwd_plain, argtypes, **jit)


def _plain_pick(n, vec, rms=False, dtype=None, stats=False):
    """The plain kernel's (words, tpr, rpb, early, min_blocks) for rows of ``n``
    values: tuning's fwd_plain_layout (words, rpb) where set (under fwd_plain_checked,
    where no exact split exists, its checked form, :func:`_plain_checked_tpr`;
    ValueError where neither splits the row into whole warps of whole groups, or it
    makes a block of over 1024 threads), else :func:`_plain_layout`'s (for ``dtype``
    rows, ``rms``: RMSNorm); tuning's fwd_plain_min_blocks, where set, in place of
    the layout's launch bounds. ``stats``: the kernel writes the statistics (v61's
    float32 RMSNorm rule differs there, _PLAIN_OFFGRID_STATS_WORDS; v62's rows,
    _PLAIN_STATS_BLOCK)."""
    lay = _tune["fwd_plain_layout"]
    mb = _tune["fwd_plain_min_blocks"]
    if lay is None:
        picked = _plain_layout(n, vec, rms, dtype, stats)
        if picked is None or mb is None:
            return picked
        return picked[:4] + (mb,)
    words, rpb = lay
    tpr = None if n % vec else _plain_tpr(n // vec, words, sub=True)
    if tpr is None and _tune["fwd_plain_checked"] and not n % vec:
        tpr = _plain_checked_tpr(n // vec, words)
    if tpr is None or tpr * rpb > _MAX_BLOCK or (tpr * rpb) % WARP:
        raise ValueError(f"fwd_plain_layout {lay} does not split rows of {n} values "
                         f"({vec} a group) into whole warps (or {_SUB_TPR} threads a row "
                         f"in whole warps) of {words} groups a thread, at most "
                         f"{_MAX_BLOCK} threads a block"
                         + ("" if _tune["fwd_plain_checked"] else
                            " (tuning fwd_plain_checked is off)"))
    return words, tpr, rpb, words <= 4, mb


# v56 (sixty-second session): the plain kernels of at most _PLAIN_CARVEOUT_WORDS words
# a thread over rows of _PLAIN_CARVEOUT_ROW bytes or more prefer the L1 / shared
# carveout _PLAIN_CARVEOUT[op] (launch.Kernel.prefer_carveout): 5 for LayerNorm (132 KB
# of shared memory an SM on the H200, so 124 KB of L1), 7 for RMSNorm (164 KB; 92 KB
# of L1); the driver's default gives them 8 KB (248 KB of L1). H200,
# bench/ab/carveout_ab.py, the sweep's 54 cells at M = 2^26 / N, alternating passes,
# us against the default, 5 / 7: float32 LayerNorm 2048 / 4096 -0.46 / -0.58, -2.74 /
# -0.59 (an earlier run at 4096: -2.14 / -0.54); float32 RMSNorm 4096 / 5120 / 8192 /
# 12288 -0.32 / -0.24, -0.69 / -0.93, -0.58 / -0.90, -0.34 / -0.42 (7 in two more
# runs: -0.38 / -0.40 / -0.94 / -0.45 and -0.37 / -0.35 / -0.72 / -0.56); 16-bit
# LayerNorm 4096 -0.37 / -0.38 at 5; 16-bit RMSNorm 8192 / 12288 -0.26 to -0.48; float32
# RMSNorm 2048 / 16384 even. The eight-word kernels lose at 7 (float32 LayerNorm
# 8192-16384 +2.5 to +5.3, 16-bit 12288 / 16384 +1.7 to +2.0) and at 5 (16-bit
# +1.4 / +1.5), and rows under 8 KB are even: neither gets it.
_PLAIN_CARVEOUT = {"ln": 5, "rms": 7}
_PLAIN_CARVEOUT_WORDS = 4
_PLAIN_CARVEOUT_ROW = 8192
# v58 (sixty-third session): RMSNorm rows of _PLAIN_CARVEOUT_WIDE_RMS[0] elements or more
# prefer _PLAIN_CARVEOUT_WIDE_RMS[1] instead (196 KB of shared memory, ~60 KB of L1).
# H200, bench/ab/carveout_ab.py --cells all, two processes of five alternating passes,
# us against the default, 7 / 9: float32 5120 -0.25, -0.63 / -0.86, -1.27; 8192 -0.93,
# -0.64 / -1.31, -0.93; 12288 -0.75, -0.97 / -1.08, -1.26; 16384 -0.06, -0.10 / -0.62,
# -0.64; fp16 8192 -0.48, -0.19 / -0.56, -0.46; 12288 -0.61, -0.16 / -0.90, -0.74; bf16
# 8192 -0.42, -0.32 / -0.67, -0.56; 12288 -0.48, -0.29 / -1.00, -0.86 (the sixty-second
# session's call 8 and call 1 here agree at float32 8192 / 12288). Narrower rows do not
# gain from 9: float32 4096 +0.13, +0.27 (7: -0.21, -0.21), 2048 even. LayerNorm's plain
# kernels keep 5: 9 costs float32 4096 +5.5 and the eight-word kernels +4 to +16.
_PLAIN_CARVEOUT_WIDE_RMS = (5120, 9)


def _plain_carveout(words, n, dtype, rms):
    """The carveout preference (percent, launch.Kernel.prefer_carveout) of the plain
    kernel of ``words`` words a thread over ``dtype`` rows of ``n`` (RMSNorm where
    ``rms``), or None (the driver's choice): tuning fwd_plain_carveout where set (-1:
    None), else v56's rule (_PLAIN_CARVEOUT at most _PLAIN_CARVEOUT_WORDS words over
    rows of _PLAIN_CARVEOUT_ROW bytes or more) with v58's for wide RMSNorm rows
    (_PLAIN_CARVEOUT_WIDE_RMS)."""
    pct = _tune["fwd_plain_carveout"]
    if pct is not None:
        return None if pct < 0 else pct
    row = n * (4 if dtype == "float32" else 2)
    if words > _PLAIN_CARVEOUT_WORDS or row < _PLAIN_CARVEOUT_ROW:
        return None
    if rms and n >= _PLAIN_CARVEOUT_WIDE_RMS[0]:
        return _PLAIN_CARVEOUT_WIDE_RMS[1]
    return _PLAIN_CARVEOUT["rms" if rms else "ln"]


# v60 candidate (sixty-fourth session, H200; tuning fwd_plain_reload_rows, opt-in):
# rows where the plain kernel at the launcher's own layout ran faster reading x twice
# with inductor's cache policies (make_plain_forward_kernel's reload "l2") than the
# held kernel at its shipped preference, in both of two processes of
# bench/ab/carveout_ab.py --cells all (five alternating passes each), (dtype class,
# rms, groups a row) -> the carveout preference it ran at (None: the driver's). Us,
# rl2 against the held kernel, run 1 / run 2: float32 RMSNorm N = 2048 -1.68 / -2.48,
# 4096 -1.42 / -1.57, 16384 -1.28 / -1.04 (at none; the held kernel at v58's 9);
# float32 LayerNorm 2048 -0.99 / -1.12, 4096 -0.46 / -0.50 (at none; at v56's 5 it is
# +1.7); fp16 / bf16 LayerNorm 2048 -1.33 / -1.40 and -1.50 / -1.48, 5120 -2.17 /
# -2.45 and -1.81 / -1.89 (at none; at 5 +0.0 to +0.5). Slower at every other sweep
# row where it differs (bench/NOTES.md, sixty-fourth session).
_PLAIN_RELOAD_L2 = {("float32", True, 512): 7, ("float32", True, 1024): 7,
                    ("float32", True, 4096): None, ("float32", False, 512): 5,
                    ("float32", False, 1024): None, ("16-bit", False, 256): None,
                    ("16-bit", False, 640): None}
# Its rows whose two-read kernel writing the statistics spills (float32 LayerNorm N =
# 4096 under v33's bounds for five blocks an SM: 48 registers, 8 bytes of stack; the
# measured _nostats form does not): the forward with statistics keeps the held kernel.
_PLAIN_RELOAD_L2_NOSTATS_ONLY = {("float32", False, 1024)}


def _plain_reload_rows(n, vec, rms, dtype, stats=False):
    """(reload, carveout or None) of v60's row table for rows of ``n`` values where
    tuning fwd_plain_reload_rows is set and the plain kernel runs at the launcher's
    own layout without fwd_plain_reload, else None (``stats``: the kernel writes the
    statistics; not at _PLAIN_RELOAD_L2_NOSTATS_ONLY's rows)."""
    if not (_tune["fwd_plain_reload_rows"] and _plain_layout_own()
            and not _tune["fwd_plain_reload"]):
        return None
    key = _plain_key(n, vec, rms, dtype)
    if key not in _PLAIN_RELOAD_L2 or (stats and key in _PLAIN_RELOAD_L2_NOSTATS_ONLY):
        return None
    pct = _tune["fwd_plain_carveout"]
    return "l2", (_PLAIN_RELOAD_L2[key] if pct is None else None if pct < 0 else pct)


# Rows whose plain-kernel layouts shipped_kernels compiles (issue #16's sweep).
_PLAIN_SHIPPED_N = (512, 768, 1024, 2048, 4096, 5120, 8192, 12288, 16384)


# v28 (twenty-fourth session): rows outside v27's where the plain kernel beat the
# default forward in every pass, (dtype class, rms, groups a row) -> (words, rows a
# block), None for _plain_layout's rule. H100, M x N = 2^26, us, default / plain, the
# layout found by bench/ab/pending_s24.sh a / b and s24_c.sh, then as the default
# against tuning fwd_plain False (s24_d.sh); each row's passes alternate:
_PLAIN_V28 = {
    # 16-bit LayerNorm N = 768, one warp a block: fp16 95.1, 95.9, 94.7, 95.3, 95.3,
    # 95.0 / 94.5, 94.8, 94.4, 94.9, 94.5, 94.9; bf16 95.6, 95.0, 95.6, 95.6, 95.1,
    # 95.8 / 94.8, 94.9, 94.7, 94.6, 95.3, 94.7 (four rows a block: 95.2 / 94.8;
    # sub-warp rows of six words: 94.9 / 94.6-94.8).
    ("16-bit", False, 96): (3, 1),
    # float32 LayerNorm (mu corrected): N = 512 184.8, 185.0, 184.9, 185.1, 184.8,
    # 184.6, 184.6, 184.7 / 182.3, 182.9, 182.2, 182.3, 182.7, 182.8, 183.2; 1024
    # 182.8, 182.8, 183.2, 182.7, 182.9, 183.1 / 181.8, 182.0, 181.9, 182.4, 182.0;
    # 12288 189.1, 189.2, 190.4, 189.4 / 185.9, 185.0, 185.5, 184.8. Not 768 (even),
    # 2048 (even), 4096 (182.1, 181.9, 181.6, 181.6 / 181.8, 181.2, 181.3, 181.7), 5120
    # / 8192 / 16384 (+0.5 to +1.5; at two / four words a thread up to +146: 79
    # registers leave one 512-thread block an SM).
    ("float32", False, 128): None,
    ("float32", False, 256): None,
    ("float32", False, 3072): None,
    # float32 RMSNorm: N = 2048 182.6, 182.6, 182.8, 182.6, 182.6, 182.3 / 181.6, 181.6,
    # 181.6, 181.7, 182.0, 181.6 (two words); 4096 182.1, 182.1, 181.9, 181.8 / 181.3,
    # 181.6, 181.5, 181.4 (two); 5120 183.5, 183.0, 183.4, 183.4 / 181.9, 181.6, 181.9,
    # 182.4; 8192 183.2, 183.3, 183.2, 183.4 / 181.9, 182.0, 181.9, 181.8 (four); 12288
    # 185.1, 185.0, 185.2, 185.0 / 183.6, 183.4, 183.4, 183.6; 16384 184.7, 184.3,
    # 184.5, 184.3 / 183.1, 183.5, 183.6, 183.6 (four: 1024 threads; eight: 185.5,
    # 185.7). Not 16-bit RMSNorm N = 2048 (fp16 94.0, 94.0, 93.3, 93.4 / 93.5, 93.5,
    # 93.4, 93.5; bf16 93.7, 93.6 / 93.4, 93.8).
    ("float32", True, 512): (2, 1),
    ("float32", True, 1024): (2, 1),
    ("float32", True, 1280): None,
    ("float32", True, 2048): (4, 1),
    ("float32", True, 3072): None,
    ("float32", True, 4096): (4, 1),
}


# v29 (twenty-fifth session, the first on an H200, the machine issue #16 names):
# rows where another plain-kernel layout beat the H100-tuned default on the H200,
# (dtype class, rms, groups a row) -> (words, rows a block[, min blocks an SM for the
# launch bounds]), None for _plain_layout's rule; over _PLAIN_V28 where both name a
# row. H200, M x N = 2^26, us, default / pick, two alternating passes of
# bench/ab/s25_a.sh (and s25_b.sh's two, after the slash-bar), fp16 unless named:
_PLAIN_V29 = {
    # 16-bit LayerNorm N = 512, sub-warp rows (16 threads, two rows a block): 75.0,
    # 75.6 / 69.2, 69.4 | 69.9, 69.8 (bf16 76.1, 76.0 / 69.6, 69.7); the rule's
    # (2, 4) 69.4, 70.0. Inductor 68.4-68.7 (the session's sweep).
    ("16-bit", False, 64): (4, 2),
    # 16-bit LayerNorm N = 1024, a warp a row and a block: 79.3, 79.4 / 68.6, 68.9 |
    # 69.6, 69.1 (bf16 80.1, 79.7 / 69.2, 69.2); (4, 4) 69.3-69.8, the rule's 71.2-71.8.
    ("16-bit", False, 128): (4, 1),
    # 16-bit LayerNorm N = 8192 / 12288, eight words a thread: 72.9, 72.6 / 70.9, 70.5
    # (four at 512 threads: 89.2); 81.7, 81.5 / 71.4, 71.0.
    ("16-bit", False, 1024): (8, 1),
    ("16-bit", False, 1536): (8, 1),
    # 16-bit RMSNorm N = 512 (the rule: two words, four rows a block) 69.2, 69.7 /
    # 68.6, 68.7; N = 8192, two words at 512 threads, 70.0, 70.0 / 68.6, 68.9 (the
    # rule's four words 69.3, 69.4); N = 12288 (the rule: four words at 384 threads)
    # 73.6, 73.7 / 69.4, 69.6.
    ("16-bit", True, 64): None,
    ("16-bit", True, 1024): (2, 1),
    ("16-bit", True, 1536): None,
    # float32 LayerNorm (corrected). N = 512 one-row blocks: 133.4, 133.1 / 131.6,
    # 131.3 | 132.6, 131.8. N = 768 three words, two rows a block: 138.7, 139.1 /
    # 130.5, 131.1 (one row 131.7, 131.5; six words 133.4-134.1). N = 1024 four words:
    # 133.1, 133.2 / 130.5, 130.3. N = 2048 the rule (four words, 128 threads): 139.2,
    # 139.3 / 130.2, 130.9. N = 4096 the rule: 148.5, 148.8 / 134.9, 134.9 (with
    # bounds for four blocks an SM 132.2-133.5, but 8 bytes of stack). N = 8192 the
    # rule: 137.8, 137.9 / 135.5, 135.6. N = 16384 the rule with bounds for two
    # blocks an SM (62 registers, no spills): 160.6, 160.6 / 136.4, 136.2 (without
    # them 150.5, 150.4).
    ("float32", False, 128): (2, 1),
    ("float32", False, 192): (3, 2),
    ("float32", False, 256): (4, 1),
    ("float32", False, 512): None,
    ("float32", False, 1024): None,
    ("float32", False, 2048): None,
    ("float32", False, 4096): (8, 1, 2),
    # float32 RMSNorm N = 16384, eight words at 512 threads: 140.0, 140.2 / 135.2,
    # 135.2 | 136.0, 136.0 (v28's four at 1024 threads).
    ("float32", True, 4096): (8, 1),
}

# v33 (thirtieth session, H200): float32 rows where the plain kernel with w / b loaded
# after the reductions (late) and launch bounds for more blocks an SM beat v29's
# layout, (dtype class, rms, groups a row) -> (words, rows a block, min blocks an SM,
# early). M x N = 2^26, us, default / pick, two alternating passes of
# bench/ab/s30_b.sh (results/s30_ab/b), every output checked against float64 first:
_PLAIN_V33 = {
    # float32 LayerNorm N = 4096, 46 registers, five blocks an SM (v29's rule: 79, 3):
    # 134.7, 135.0 / 134.2, 133.7. The twenty-sixth session had w / b late without
    # the bounds (48 registers, five an SM) 0.5-1 us ahead too, in one pass each. Two
    # words a thread at 512 threads and 32 registers, four blocks an SM: 145.0, 145.9.
    ("float32", False, 1024): (4, 1, 5, False),
    # float32 RMSNorm N = 16384, four words at 1024 threads, 32 registers, two blocks
    # an SM (v29: eight words at 512 threads, 54 registers, 2): 135.2, 135.3 / 134.0,
    # 134.1. Full occupancy lost at N = 2048 / 4096 / 8192 (+1.3 to +2.0 us, w / b
    # early or late) and at LayerNorm N = 2048 (+3.3).
    ("float32", True, 4096): (4, 1, 2, False),
}

# v50 (fifty-ninth session, H200): eight words a thread with w / b loaded with the row
# (early), where the registers still leave two or more blocks an SM; (dtype class,
# rms, groups a row) -> (words, rows a block, min blocks an SM, early). v29 had
# measured eight words late only. M x N = 2^26, us, default (late) / pick, three
# alternating passes of bench/ab/infer_picks.py, forward without / with the
# statistics:
_PLAIN_V50 = {
    # 16-bit LayerNorm N = 8192, 128 threads, 128 registers, four blocks an SM (late:
    # 56, nine): fp16 70.9, 71.0, 70.8 / 68.8, 68.7, 68.9 and 71.2, 71.1, 71.0 / 69.3,
    # 69.5, 69.4; bf16 70.4, 70.5, 70.4 / 68.6, 68.6, 68.4 and 70.8, 70.6, 70.6 / 68.9,
    # 68.7, 68.9. At N = 12288 (192 threads, two blocks) 12 us slower, at 16384 (256
    # threads, two) 0.5 slower.
    ("16-bit", False, 1024): (8, 1, 4, True),
    # float32 LayerNorm N = 8192, 256 threads, bounds for two blocks an SM (127
    # registers; 130 without them, one block: 189 us): 135.8, 135.6, 135.8 / 131.5,
    # 131.4, 131.7 and 135.8, 136.3, 136.0 / 131.5, 131.9, 131.7. Without the
    # statistics see _PLAIN_NOSTATS_BOUNDS.
    ("float32", False, 2048): (8, 1, 2, True),
}

# v52 (sixtieth session, H200): float32 RMSNorm N = 12288 at four words a thread (768
# threads) with w late under bounds for two blocks an SM: 40 registers, no spills,
# 48 warps an SM (the rule's eight words at 384 threads, 54 registers: 36). Us,
# default / pick, three alternating passes of bench/ab/infer_picks.py (cells *q),
# without the statistics 133.9, 133.7, 133.7 / 132.4, 132.4, 132.3 and with them
# 133.6, 134.1, 133.9 / 132.5, 132.3, 132.6. The same shape (four words, late, 32
# registers, 64 warps an SM) lost 0.4-3 us at RMSNorm N = 2048-8192 and LayerNorm N =
# 2048, and was even at RMSNorm 16384 (v33's pick there already).
_PLAIN_V52 = {
    ("float32", True, 3072): (4, 1, 2, False),
}

# The plain kernel's measured layouts: v52's over v50's over v33's over v29's over
# v28's.
_PLAIN_PICKS = {**_PLAIN_V28, **_PLAIN_V29, **_PLAIN_V33, **_PLAIN_V50, **_PLAIN_V52}

# v50: the launch bounds of the kernel without its statistics (_nostats) where they
# differ from the pick's, (dtype class, rms, groups a row) -> min blocks an SM or None.
# float32 LayerNorm N = 8192 without bounds: 128 registers, still two blocks an SM,
# 130.1 us in each of three passes against 131.4-131.7 under the bounds (125
# registers); test_plain_nostats_unbounded_fits_two_blocks holds it to 128.
_PLAIN_NOSTATS_BOUNDS = {("float32", False, 2048): None}

# v51 (fifty-ninth session, H200): rows where the plain kernel with its statistics is
# faster than its _nostats form, so stats=False runs it and drops them (as the other
# kernels do everywhere), (dtype class, rms, groups a row). Without the statistics
# ptxas gives float32 RMSNorm 32 registers against 38 / 40 (N = 2048 / 4096) and
# LayerNorm 72 against 75 (N = 2048): full occupancy (64 warps an SM) against 48, and
# 24 against 28 warps, and full occupancy is what the thirtieth session measured 1.3-2
# us slower for these forwards. Us, the _nostats kernel / the one with statistics, at
# the same layout, three runs of this session (bench/ab/infer_picks.py twice, three
# passes each, and the sweep): RMSNorm 2048 132.9-133.6 / 132.1-132.3, 131.8-131.9 /
# 131.3-131.5, 132.6 / 131.9; RMSNorm 4096 132.7-133.0 / 130.8-131.0, 131.8-132.0 /
# 130.3-130.5, 132.3 / 130.7; LayerNorm 2048 132.7-132.8 / 130.7-130.9, 132.3 / 130.8.
# An occupancy cap by unused shared memory instead took the L1 the loads need
# (+1-11 us, v51's refuted candidate, bench/NOTES.md).
_PLAIN_KEEP_STATS = {("float32", True, 512), ("float32", True, 1024), ("float32", False, 512)}


def _plain_key(n, vec, rms, dtype):
    """The plain-kernel tables' key of rows of ``n`` values: (dtype class, rms, groups)."""
    return _dtype_class(dtype), bool(rms), n // vec


def _plain_layout_own():
    """Whether the plain kernel runs at the launcher's own layout (no fwd_plain_layout
    or fwd_plain_min_blocks tuning), where v50's and v51's tables apply."""
    return _tune["fwd_plain_layout"] is None and _tune["fwd_plain_min_blocks"] is None


def _plain_keeps_stats(n, vec, rms, dtype):
    """Whether the plain kernel for rows of ``n`` values writes its statistics even
    where the caller drops them (_PLAIN_KEEP_STATS), at the launcher's own layout."""
    return _plain_layout_own() and _plain_key(n, vec, rms, dtype) in _PLAIN_KEEP_STATS


def _dtype_class(dtype):
    """_PLAIN_PICKS's key for ``dtype``: float16 and bfloat16 share theirs."""
    return "16-bit" if dtype in ("float16", "bfloat16") else dtype


def _plain_nostats_bounds(n, vec, rms, dtype, min_blocks):
    """The launch bounds (min blocks an SM or None) of the plain kernel without its
    statistics for rows of ``n`` values at the launcher's own layout:
    _PLAIN_NOSTATS_BOUNDS' where it names the row, else ``min_blocks`` (the pick's)."""
    return _PLAIN_NOSTATS_BOUNDS.get(_plain_key(n, vec, rms, dtype), min_blocks)


# v61 (sixty-fourth session, H200): rows of widths issue #16's sweep does not name
# (not _PLAIN_SHIPPED_N) within _PLAIN_OFFGRID_N take the plain kernel at the fewest
# words a thread, at least _PLAIN_OFFGRID[class, rms][0], that split the row into at
# most [1] threads (whole warps, or 8 / 16-thread rows), else at the most words that
# split it (at least [0]); rows of 128 threads or more a block. There the launcher had
# run the lean, staged or streaming kernel, or (16-bit LayerNorm) the plain kernel at
# the rule's four words, which the rows of models' hidden sizes split badly: float32
# LayerNorm N = 896 at one word a thread over 224 threads. 16-bit RMSNorm keeps the
# lean kernel (the plain one within -1.7 / +2.0 us of it). M x N ~ 2^26, us, three
# alternating passes of bench/ab/offgrid_plain.py (bench/results/s64/offgrid_plain.log),
# the default / v61's layout (words x threads):
#   float32 LayerNorm 896 224.2 / 132.8 (7x32), 1536 133.5 / 129.3 (3x128), 2304
#   133.1 / 129.4 (3x192), 2560 134.0 / 129.7 (4x160), 3072 133.8 / 132.3 (4x192),
#   3584 133.7 / 129.9 (4x224), 6144 134.4 / 134.6 (8x192), 7168 141.3 / 134.8
#   (8x224), 10240 147.3 / 135.4 (8x320), 14336 165.7 / 136.0 (8x448);
#   float32 RMSNorm 896 166.8 / 132.0 (7x32), 1536 133.3 / 131.0 (2x192), 2304 131.2
#   / 131.3 (2x288), 2560 132.9 / 131.1 (2x320), 3072 133.2 / 131.7 (2x384), 3584
#   133.6 / 130.7 (2x448), 6144 134.4 / 131.6 (3x512), 7168 133.3 / 130.8 (4x448),
#   10240 166.8 / 133.6 (5x512), 14336 149.4 / 134.6 (7x512);
#   fp16 LayerNorm 896 78.2 / 70.2 (7x16), 1536 79.0 / 68.9 (3x64), 2304 67.7 /
#   67.7 (3x96, the same kernel), 2560 84.9 / 69.4 (5x64), 3072 68.4 / 68.2 (3x128),
#   3584 88.1 / 70.6 (7x64), 6144 72.9 / 69.8 (6x128), 7168 71.7 / 70.2 (7x128),
#   10240 90.8 / 71.9 (8x160), 14336 71.8 / 71.9 (8x224, the same kernel).
# Each within 0.2 us of the fastest layout tried but float32 LayerNorm 10240 (5x512
# 134.4), RMSNorm 1536 (4x96 130.7) and fp16 LayerNorm 10240 (5x256 70.5). Layouts
# at fewer words over more threads were up to 5x slower (float32 LayerNorm 3584 at
# one word: 692 us).
_PLAIN_OFFGRID = {("float32", False): (3, 224), ("float32", True): (2, 512),
                  ("16-bit", False): (3, 128)}
_PLAIN_OFFGRID_N = (896, 16384)
# v61's forward with the statistics (the sweep's training forward, one run at v61's
# layouts, bench/results/s64/offgrid_v61.json): float32 RMSNorm takes v61's layout
# only at this many words a thread or more. At two words it ran 131.0 / 132.2 /
# 131.9 us at N = 1536 / 2304 / 3072 but 137.1 / 140.0 at 2560 / 3584 against the
# lean kernel's 134.1 / 134.2 (the _nostats form: 131.1 / 130.7), so the forward
# with statistics keeps the lean kernel there until a with-statistics A/B says more.
_PLAIN_OFFGRID_STATS_WORDS = {("float32", True): 3}
# The widths v61 measured, whose layouts shipped_kernels compiles.
_PLAIN_OFFGRID_SHIPPED_N = (896, 1536, 2304, 2560, 3072, 3584, 6144, 7168, 10240, 14336)
# v62 (sixty-eighth session, H100, bench/ab/stats_block.py, three passes): the forward
# with statistics at these rows takes (words, rows a block) and stores the statistics
# a block's rows at a time (_sb), (dtype class, rms, groups a row). Us, the shipped
# layout storing row by row -> this one with _sb (its _nostats form): float32
# LayerNorm N = 512 183.34 -> 181.52 (181.54), 768 182.94 -> 181.42 (181.04);
# float32 RMSNorm 512 182.58 -> 181.07 (181.57); 16-bit LayerNorm 512 95.39 -> 93.18
# (93.25), 768 94.98 -> 93.52 (93.36), 1024 94.78 -> 93.38 (93.44); 16-bit RMSNorm
# 512 94.70 -> 93.62 (93.62). Not taken: float32 LayerNorm 1024 (183.30 shipped,
# 183.82 at eight words eight rows), float32 RMSNorm 1024 and 16-bit RMSNorm 8192
# (one row a block: nothing to gather). The forward without the statistics runs the
# same layout (its _nostats form; seventieth session): at another (words, threads a
# row) the row sums in another order and y lost its bits when stats=False (float32
# LayerNorm 512, 4099 rows: a GPU test failed). Same sixty-ninth-session H100 run
# (bench/results/s69/stats_block_r.log), _nostats us, the old layout -> v62's:
# float32 LayerNorm 512 181.39 -> 181.38, 768 181.87 -> 180.98; float32 RMSNorm 512
# 181.70 -> 181.60; fp16 LayerNorm 512 93.54 -> 93.54, 768 93.42 -> 93.38, 1024
# 93.42 -> 93.49; bf16 LayerNorm 512 93.38 -> 93.39; fp16 RMSNorm 512 93.41 -> 93.47.
_PLAIN_STATS_BLOCK = {("float32", False, 128): (4, 8), ("float32", True, 128): (2, 8),
                      ("float32", False, 192): (3, 8), ("16-bit", False, 64): (2, 8),
                      ("16-bit", True, 64): (2, 8), ("16-bit", False, 96): (3, 8),
                      ("16-bit", False, 128): (4, 8)}
# Models' widths that no exact plain layout splits at 16 bits (Gemma 3 1B's 1152,
# GPT-2 XL's 1600, Falcon 7B's 4544, LLaMA 33B's 6656), whose checked layouts
# (v63, tuning fwd_plain_checked) shipped_kernels compiles.
_PLAIN_CHECKED_N = (1152, 1600, 4544, 6656)
# v64 (sixty-eighth / sixty-ninth sessions, tuning fwd_plain_checked_only): classes v61
# left to the lean kernel (its plain layouts no faster at the exact widths) whose rows
# no exact layout splits and the lean kernel would run at one group a thread take
# v63's checked kernel, (dtype class, rms) -> (min words, max threads a row) as
# _PLAIN_OFFGRID's. H100, y alone, us, lean -> checked (bench/ab/offgrid_plain.py,
# three passes): 16-bit RMSNorm 1600 (lean 1 x 224) 96.3 -> 90.8 (torch.compile
# 101.2); sixty-ninth session fp16 1152 (1 x 160) 94.8 -> 90.6, bf16 1152 96.6 ->
# 93.5, fp16 1600 98.0 -> 94.5, fp16 3200 (1 x 416) 103.2 -> 93.6; but where the lean
# kernel runs two groups or more it is at the floor already: fp16 2368 (2 x 160)
# 92.9 -> 94.0, fp16 4544 (3 x 192) 90.5 -> 90.8, bf16 4544 93.5 -> 93.7. The rule,
# then checked at widths it was not drawn from: fp16 2624 (1 x 352) 99.6 -> 91.0,
# 1728 (1 x 224) 93.6 -> 90.9, bf16 3200 101.0 -> 90.6 (compile 104.1 / 99.0 / 100.1);
# left lean: fp16 2880 (4 x 96) 90.6, 1856 (4 x 64) 90.6, forced checked layouts
# 90.6-91.3; with the statistics fp16 1152 97.4 -> 94.4, 3200 104.4 -> 93.3.
_PLAIN_OFFGRID_CHECKED_ONLY = {("16-bit", True): (2, 512)}


def _plain_splits(groups, min_words=1):
    """[(words, tpr, rpb)] of every plain layout of rows of ``groups`` 16-byte groups
    at ``min_words`` to 8 words a thread (_plain_tpr's whole warps or 8 / 16-thread
    rows), ``rpb`` rows a block making it 128 threads or more (whole warps: a
    sub-warp row's 128 // tpr fills them)."""
    return [(words, tpr, max(1, 128 // tpr)) for words in range(min_words, 9)
            if (tpr := _plain_tpr(groups, words, sub=True)) is not None]


def _plain_checked_tpr(groups, words):
    """Threads a row of ``groups`` 16-byte groups at ``words`` a thread whose last word
    is the row's only in some threads (make_plain_forward_kernel's ``checked``): the
    fewest of 8, 16 or a multiple of 32 up to a block that hold the row with ``words
    - 1`` a thread too few; None where there is none."""
    need = cdiv(groups, words)
    tpr = next((s for s in _SUB_TPR if need <= s), None) or cdiv(need, WARP) * WARP
    if (words - 1) * tpr >= groups or tpr > _MAX_BLOCK:
        return None
    return tpr


def _plain_checked_splits(groups, min_words=1, max_tpr=_MAX_BLOCK):
    """[(words, tpr, rpb)] of the checked plain layouts (:func:`_plain_checked_tpr`) of
    rows of ``groups`` 16-byte groups at ``min_words`` to 8 words over at most
    ``max_tpr`` threads, blocks of 128 threads or more, the fewest idle group slots
    (``words * tpr - groups``) first, then the fewest words; exact splits left out."""
    fits = [(words * tpr - groups, words, tpr) for words in range(min_words, 9)
            if (tpr := _plain_checked_tpr(groups, words)) is not None
            and tpr <= max_tpr and words * tpr != groups]
    return [(words, tpr, max(1, 128 // tpr)) for _, words, tpr in sorted(fits)]


# The tunings _lean_layout reads without a batch (m None): its forced words, sub-warp
# rows and, through _capped_words, the register caps.
_LEAN_LAYOUT_KEYS = ("fwd_words", "fwd_subwarp", "fwd_lean_regs")


def _plain_checked_only(n, vec, rms, dtype):
    """v64's flag for :func:`_plain_offgrid`: tuning fwd_plain_checked_only, and the lean
    forward would run rows of ``n`` values at one 16-byte group a thread (where it runs
    two or more, it is at the copy floor already: _PLAIN_OFFGRID_CHECKED_ONLY)."""
    return (bool(_tune["fwd_plain_checked_only"])
            and (_dtype_class(dtype), bool(rms)) in _PLAIN_OFFGRID_CHECKED_ONLY
            and _lean_one_group(n, vec, rms, dtype, *(_tune[k] for k in _LEAN_LAYOUT_KEYS)))


@functools.lru_cache(maxsize=4096)
def _lean_one_group(n, vec, rms, dtype, *tuned):
    """Whether :func:`_lean_layout` runs rows of ``n`` values at one 16-byte group a
    thread, cached (~2 us a call otherwise, on every 16-bit RMSNorm forward off the
    plain tables); ``tuned``: _LEAN_LAYOUT_KEYS' values, part of the cache's key."""
    return _lean_layout(n, vec, rms, dtype=dtype)[0] == 1


@functools.lru_cache(maxsize=None)
def _plain_offgrid(n, vec, rms, dtype, stats=False, checked=False, checked_only=False):
    """v61's plain layout (words, tpr, rpb, early, None) for rows of ``n`` values off
    the sweep's widths (_PLAIN_OFFGRID), or None where v61 does not name the row
    (``stats``: the kernel writing the statistics, or at fewer words than
    _PLAIN_OFFGRID_STATS_WORDS names for it). ``checked`` (tuning fwd_plain_checked,
    v63): where no layout splits the row exactly, the first of
    :func:`_plain_checked_splits` within the class's words and threads, else the one
    of the fewest threads. ``checked_only`` (with ``checked``; tuning
    fwd_plain_checked_only, v64, as :func:`_plain_checked_only` gives it): the classes
    of _PLAIN_OFFGRID_CHECKED_ONLY too, at those rows alone (where an exact layout
    splits the row, the lean kernel stays)."""
    key = (_dtype_class(dtype), bool(rms))
    rule = _PLAIN_OFFGRID.get(key)
    exact = rule is not None
    if rule is None and checked and checked_only:
        rule = _PLAIN_OFFGRID_CHECKED_ONLY.get(key)
    lo, hi = _PLAIN_OFFGRID_N
    if rule is None or n in _PLAIN_SHIPPED_N or not lo <= n <= hi or n % vec:
        return None
    min_words, max_tpr = rule
    fits = _plain_splits(n // vec, min_words) if exact else []
    if not exact and _plain_splits(n // vec):
        return None
    if not fits and checked:
        # As for exact rows: past the class's threads, the fewest threads.
        fits = (_plain_checked_splits(n // vec, min_words, max_tpr)
                or sorted(_plain_checked_splits(n // vec, min_words), key=lambda f: f[1])[:1])
    if not fits:
        return None
    words, tpr, rpb = next((f for f in fits if f[1] <= max_tpr), fits[-1])
    if stats and words < _PLAIN_OFFGRID_STATS_WORDS.get(key, 0):
        return None
    return words, tpr, rpb, words <= 4, None


def _plain_stats_block_layout(n, vec, rms, dtype):
    """v62's (words, rows a block) of the plain forward for rows of ``n`` values
    (_PLAIN_STATS_BLOCK; with the statistics or without, so y keeps its bits), or None
    where it names none, tuning fwd_plain_stats_block is False, or it is None (the
    default) and a tuning sets the plain kernel's layout or bounds (as
    :func:`_plain_stats_block`)."""
    sb = _tune["fwd_plain_stats_block"]
    if sb is False or (sb is None and not _plain_layout_own()):
        return None
    return _PLAIN_STATS_BLOCK.get(_plain_key(n, vec, rms, dtype))


def _plain_stats_block(n, vec, rms, dtype, rpb):
    """Whether the plain kernel writing the statistics of rows of ``n`` values at
    ``rpb`` rows a block stores them a block's rows at a time (make_plain_forward_
    kernel's stats_block): tuning fwd_plain_stats_block where a bool (True: wherever
    a block holds two rows or more), else (None) at v62's rows, _PLAIN_STATS_BLOCK,
    at the launcher's own layout."""
    sb = _tune["fwd_plain_stats_block"]
    if sb is None:
        sb = _plain_layout_own() and _plain_key(n, vec, rms, dtype) in _PLAIN_STATS_BLOCK
    return sb and rpb >= 2


def _plain_layout(n, vec, rms=False, dtype=None, stats=False):
    """(words, tpr, rpb, early, min_blocks) of the plain forward kernel for rows of
    ``n`` values (``vec`` a 16-byte word), or None where it has none (rows not whole
    warps of whole words): for ``dtype`` rows (``rms``: RMSNorm) v62's
    _PLAIN_STATS_BLOCK layout where it names one (``stats`` or not), else
    _PLAIN_PICKS's (sub-warp rows too; ``min_blocks``: its launch bounds, else None;
    ``early``: its own where it names one, v33, else up to four words);
    else two words a thread up to 256 groups a row, four up to 1536, else eight
    (three where that leaves a part warp); blocks of at least 128 threads; w / b
    early up to four words (copy_ceiling.py's ladder, twenty-second session: 72
    registers at four, and the fastest at N = 1024-8192 fp16)."""
    if n % vec:
        return None
    groups = n // vec
    # v62's layout with or without the statistics: another (words, threads a row)
    # sums the row in another order, and y would not keep its bits when stats=False.
    sb = _plain_stats_block_layout(n, vec, rms, dtype)
    if sb is not None:
        return sb[0], _plain_tpr(groups, sb[0], sub=True), sb[1], sb[0] <= 4, None
    lay = _PLAIN_PICKS.get(_plain_key(n, vec, rms, dtype))
    if lay is not None:
        words, rpb = lay[:2]
        return (words, _plain_tpr(groups, words, sub=True), rpb,
                lay[3] if len(lay) > 3 else words <= 4, lay[2] if len(lay) > 2 else None)
    off = _plain_offgrid(n, vec, rms, dtype, stats, bool(_tune["fwd_plain_checked"]),
                         _plain_checked_only(n, vec, rms, dtype))
    if off is not None:
        return off
    for words in ((2 if groups <= 256 else 4 if groups <= 1536 else 8), 3):
        tpr = _plain_tpr(groups, words)
        if tpr is not None:
            return words, tpr, max(1, 128 // tpr), words <= 4, None
    return None


# Sub-warp rows of the plain kernel (tuning's fwd_plain_layout and _PLAIN_PICKS'
# layouts, not the rule): threads a row.
_SUB_TPR = (8, 16)


def _plain_tpr(groups, words, sub=False):
    """Threads a row of ``groups`` 16-byte groups at ``words`` a thread, or None where
    that is not a whole number of warps up to a block (``sub``: or 8 / 16 threads)."""
    tpr, rem = divmod(groups, words)
    if rem:
        return None
    if sub and tpr in _SUB_TPR:
        return tpr
    return None if tpr % WARP or not WARP <= tpr <= _MAX_BLOCK else tpr


@functools.lru_cache(maxsize=None)
def _bwd_row_sums(dtype, vector, has_w):
    """Device function ``row_sums(dy, x, w, mu, rs, base, ng, xs, ds, ws)``: the
    streaming backward's first pass over one row, this thread's share of
    ``s1 = sum_c xhat_c d_c`` and ``s2 = sum_c d_c`` with ``xhat = (x - mu) rs`` and
    ``d = dy w`` (rounded: see below), over groups ``t, t + tpr, ...`` of the row
    (``t = threadIdx.x``, ``tpr = blockDim.x``) ``_UNROLL[vec]`` at a time; ``base``:
    the row's first group, ``ng`` its groups; xs, ds, ws: ``_UNROLL[vec] * vec``
    float32 scratch. The streaming kernel (:func:`make_backward_kernel`) and the
    statistics pass (:func:`make_bwd_stats_kernel`) call it alike, so with the same
    ``tpr`` both reduce the same sums bit for bit."""
    vec = _vec_of(dtype, vector)
    unroll = _UNROLL[vec]
    load_group, _ = _group_io(dtype, vector)

    @inline_device
    def row_sums(dy, x, w, mu, rs, base, ng, xs, ds, ws):
        t = cuda.threadIdx.x
        step = cuda.blockDim.x * unroll
        s1 = np.float32(0.0)
        s2 = np.float32(0.0)
        c = t
        while c < ng:
            for u in range(unroll):
                gi = c + u * cuda.blockDim.x
                if gi < ng:
                    load_group(x, base + gi, xs, u * vec)
                    load_group(dy, base + gi, ds, u * vec)
                    if has_w:
                        load_group(w, gi, ws, u * vec)
            for u in range(unroll):
                if c + u * cuda.blockDim.x < ng:
                    for j in range(vec):
                        o = u * vec + j
                        h = (xs[o] - mu) * rs
                        # w * dy rounded as in the second pass (mul_rn: not fused
                        # there into d - c2, which would leave the product's
                        # rounding error: a one-element row's dx would not be 0).
                        d = mul_rn(ds[o], ws[o]) if has_w else ds[o]
                        s1 += h * d
                        s2 += d
            c += step
        return s1, s2

    return row_sums


# Lean backward (v13): groups a thread, and the shared-memory regions of
# its float32 quads (w, dW and dB accumulators) a thread owns.
_LEAN_BWD_WORDS = 2


def _lean_bwd_shared(has_w, has_b, tpr, vec):
    """Dynamic shared bytes of the lean backward for rows of ``tpr`` threads: w (if
    given) and the dW / dB accumulators, each ``_LEAN_BWD_WORDS * vec`` float32 a
    thread."""
    return (2 * int(has_w) + int(has_b)) * _LEAN_BWD_WORDS * vec * tpr * 4


@functools.lru_cache(maxsize=None)
def make_lean_backward_kernel(dtype, rms, has_w, has_b, full, prefetch, trigger=False,
                              sum1=False):
    """Lean wide backward row kernel (v13, tuning ``bwd_lean``, the default) for 16-bit
    rows longer than the row kernels hold (N = 8200-16384: 1025-2048 groups of 8), and
    under ``bwd_lean_f32`` (v15; by default since v44 those the wide2 kernel does not
    hold) float32 ones (N = 4100-7936, or to 8192 under True; groups of 4):
    two groups a thread, one row a block of up to 1024 threads, persistent over rows.

    Same math and order as ``make_backward_kernel``'s row kernel (``norm_bwd_rows``):
    xhat = (x - mean[r]) * rstd[r], wdy = w * dy, c1 = sum(xhat * wdy) / n, c2 =
    sum(wdy) / n (RMSNorm: mean = 0, c2 = 0), dx = (wdy - (xhat * c1 + c2)) * rstd[r],
    dw += dy * xhat, db += dy. What differs is where values live: registers hold only
    the raw 16-bit words of x and dy (and, with ``prefetch``, the next row's), both
    passes unpack them (xhat and wdy are recomputed for dx instead of kept as float32),
    and w and the dW / dB accumulators are float32 in dynamic shared memory, quad q
    of thread t at ``(region * nq + q) * tpr + t`` (each thread reads and writes only
    its own, so no barrier guards them). That fits 64 registers at 1024 threads,
    where the row kernel's float32 copies and register accumulators need 128 at 512.
    Shared bytes: :func:`_lean_bwd_shared` (LayerNorm with w and b at 1024 threads:
    192 KiB, within the H100's 227).
    Arguments as ``norm_bwd_rows``' (block ``(tpr, 1)``); ``trigger`` and ``sum1`` as
    :func:`make_backward_kernel`'s."""
    if rms and has_b:
        raise ValueError("RMSNorm has no bias")
    rsum2 = _bwd_row_step(rms, sum1)
    vec = _vec_of(dtype, True)
    words = _LEAN_BWD_WORDS
    quads = vec // 4
    nq = words * quads
    nraw = 4 * words
    raw_t = _kernel_storage(dtype, True)
    load_group, _ = _group_io(dtype, True)
    _, elem = _raw_io(dtype)
    _, pack = _raw_codec(dtype)
    _gvalid, _ = _group_guards(full)
    load_row = _bwd_row_loader(rms, words, full)
    part_store, _, part_add_cg = _partial_io(vec, True)
    affine = has_w or has_b
    st = types.Array(raw_t, 1, "C")
    argtypes = (st, st, st, _F32_1D, _F32_1D, st, _F32_1D, _F32_1D, _I32_1D,
                types.int64, types.int64, types.int64, types.int32)
    name = (f"norm_bwd_{dtype}_{_variant_name(rms, has_w, has_b)}_vec_lean{words}"
            + ("" if prefetch else "_nopf") + ("_full" if full else "")
            + ("_trig" if trigger else "") + ("_s1" if sum1 else ""))
    # Region offsets in units of tpr quads.
    aw_at = nq if has_w else 0
    ab_at = aw_at + (nq if has_w else 0)

    @inline_device
    def flush(sm, at, part, e, first, buf):
        """The thread's accumulator group at quads ``at`` .. ``at + quads - 1`` into
        partial row element ``e`` (added to the row's earlier sum unless ``first``)."""
        tq = np.uint32(cuda.threadIdx.x)
        tpq = np.uint32(cuda.blockDim.x)
        for h in range(quads):
            v = _ld16(sm, np.uint32(at + h) * tpq + tq)
            for i in range(4):
                buf[4 * h + i] = v[i]
        if not first:
            part_add_cg(part, e, buf, 0)
        part_store(part, e, buf, 0)

    def norm_bwd_lean(dy, x, w, mean, rstd, dx, pw, pb, locks, m, n, ngroups, use_lock):
        red = cuda.shared.array((2, 2, 32), np.float32)
        flag = cuda.shared.array(1, np.int32)
        sm = cuda.shared.array(0, types.float32)
        px = cuda.local.array(nraw, raw_t)
        pd = cuda.local.array(nraw, raw_t)
        qx = cuda.local.array(nraw, raw_t)
        qd = cuda.local.array(nraw, raw_t)
        ys = cuda.local.array(vec, np.float32)
        # A quad's dW (0-3) and dB (4-7) sums.
        acc = cuda.local.array(8, np.float32)
        if trigger:
            grid_dependents_launch()
        t = cuda.threadIdx.x
        tpr = cuda.blockDim.x
        tq = np.uint32(t)
        tpq = np.uint32(tpr)
        ng = np.uint32(n // vec)
        ngw = np.uint64(ng)
        inv_n = np.float32(1.0) / np.float32(n)
        for k in range(words):
            gi = np.uint32(k) * tpq + tq
            if has_w:
                if gi < ng:
                    load_group(w, gi, ys, 0)
                else:
                    for j in range(vec):
                        ys[j] = np.float32(0.0)
            for h in range(quads):
                q = np.uint32(k * quads + h)
                if has_w:
                    _st16(sm, q * tpq + tq, ys[4 * h], ys[4 * h + 1], ys[4 * h + 2],
                          ys[4 * h + 3])
                if has_w:
                    _st16(sm, (np.uint32(aw_at) + q) * tpq + tq, _ZERO, _ZERO, _ZERO, _ZERO)
                if has_b:
                    _st16(sm, (np.uint32(ab_at) + q) * tpq + tq, _ZERO, _ZERO, _ZERO, _ZERO)
        # One row a block: the row, and so the loop, is the same in every thread.
        row = np.int32(cuda.blockIdx.x)
        stride = np.int32(cuda.gridDim.x)
        m32 = np.int32(m)
        mlast = np.int32(m32 - 1)
        glast = ng - np.uint32(1)
        pmu = np.float32(0.0)
        prs = np.float32(0.0)
        if prefetch:
            pmu, prs = load_row(x, dy, mean, rstd, np.uint64(np.uint32(min(row, mlast))),
                                ngw, t, tpr, glast, px, pd)
        phase = 0
        while row < m32:
            rb = np.uint64(np.uint32(row)) * ngw
            nxt = np.int32(row + stride)
            if not prefetch:
                pmu, prs = load_row(x, dy, mean, rstd, np.uint64(np.uint32(row)), ngw, t,
                                    tpr, glast, px, pd)
            mu = pmu
            rs = prs
            s1 = np.float32(0.0)
            s2 = np.float32(0.0)
            for k in range(words):
                if _gvalid(k, tpr, t, ng):
                    for h in range(quads):
                        q = np.uint32(k * quads + h)
                        if has_w:
                            wv = _ld16(sm, q * tpq + tq)
                            av = _ld16(sm, (np.uint32(aw_at) + q) * tpq + tq)
                        if has_b:
                            bv = _ld16(sm, (np.uint32(ab_at) + q) * tpq + tq)
                        for e in range(4):
                            # float32 as the row kernel's stored copies (the
                            # simulator's arithmetic would otherwise widen).
                            hx = np.float32((elem(px, 4 * k, 4 * h + e) - mu) * rs)
                            g = np.float32(elem(pd, 4 * k, 4 * h + e))
                            wd = g
                            if has_w:
                                acc[e] = av[e] + g * hx
                                wd = np.float32(g * wv[e])
                            if has_b:
                                acc[4 + e] = bv[e] + g
                            s1 += hx * wd
                            s2 += wd
                        if has_w:
                            _st16(sm, (np.uint32(aw_at) + q) * tpq + tq, acc[0], acc[1],
                                  acc[2], acc[3])
                        if has_b:
                            _st16(sm, (np.uint32(ab_at) + q) * tpq + tq, acc[4], acc[5],
                                  acc[6], acc[7])
            # The next row's words in flight across the reduction's barrier.
            if prefetch:
                pmu, prs = load_row(x, dy, mean, rstd, np.uint64(np.uint32(min(nxt, mlast))),
                                    ngw, t, tpr, glast, qx, qd)
            s1, s2 = rsum2(s1, s2, red, phase)
            phase ^= 1
            a1 = s1 * inv_n * rs
            a2 = np.float32(0.0) if rms else s2 * inv_n * rs
            for k in range(words):
                for h in range(quads):
                    if has_w:
                        wv = _ld16(sm, np.uint32(k * quads + h) * tpq + tq)
                    for e in range(4):
                        hx = np.float32((elem(px, 4 * k, 4 * h + e) - mu) * rs)
                        g = np.float32(elem(pd, 4 * k, 4 * h + e))
                        wd = g
                        if has_w:
                            wd = np.float32(g * wv[e])
                        # (wdy - (xhat * c1 + c2)) * rstd as the row kernel's two FFMAs.
                        ys[4 * h + e] = wd * rs - (hx * a1 + a2)
                p = pack(ys, 0)
                if _gvalid(k, tpr, t, ng):
                    _st16r(dx, rb, np.uint32(k * tpr + t), p[0], p[1], p[2], p[3])
            if prefetch:
                for i in range(nraw):
                    px[i] = qx[i]
                    pd[i] = qd[i]
            row = nxt
        if affine:
            if use_lock:
                prow = cuda.blockIdx.x % ngroups
                first = _acquire(locks, prow, ngroups, flag)
            else:
                prow = cuda.blockIdx.x
                first = True
            for k in range(words):
                gi = k * tpr + t
                if gi < ng:
                    e = prow * n + gi * vec
                    if has_w:
                        flush(sm, aw_at + k * quads, pw, e, first, ys)
                    if has_b:
                        flush(sm, ab_at + k * quads, pb, e, first, ys)
            if use_lock:
                _release(locks, prow)

    return Kernel(name, norm_bwd_lean, argtypes, **_JIT)


@functools.lru_cache(maxsize=None)
def make_bwd_stats_kernel(dtype, rms, has_w, vector, sum1=False):
    """Row statistics of the backward as a pass of their own (v11, tuning
    ``bwd_stats_pass``): for the streaming backward over several column chunks, whose
    blocks would otherwise each read the whole row for them.

    ``c12[2 r] = c1 = sum_c xhat d / N`` and ``c12[2 r + 1] = c2 = sum_c d / N`` (0 for
    RMSNorm) of every row r, ``xhat = (x - mean) rstd``, ``d = dy w`` (``dy`` without
    w), summed as the streaming kernel's first pass sums them (:func:`_bwd_row_sums`;
    bit for bit at the same ``tpr``). ``sum1``: as :func:`make_backward_kernel`'s."""
    rsum2 = _bwd_row_step(rms, sum1)
    vec = _vec_of(dtype, vector)
    chunk = _UNROLL[vec] * vec
    row_sums = _bwd_row_sums(dtype, vector, has_w)
    st = types.Array(_kernel_storage(dtype, vector), 1, "C")
    argtypes = (st, st, st, _F32_1D, _F32_1D, _F32_1D, types.int64, types.int64)
    name = (f"norm_bwd_stats_{dtype}_{_variant_name(rms, has_w, False)}_"
            f"{_layout_name(vector, 0)}" + ("_s1" if sum1 else ""))

    def norm_bwd_stats(dy, x, w, mean, rstd, c12, m, n):
        """dy, x: ``[m, n]`` rows (16-byte groups in vector mode); w: ``[n]`` (read iff
        has_w); mean, rstd: ``[m]`` float32 (mean unread for RMSNorm); c12: ``[2 m]``
        float32, written. Block ``(tpr, 1)`` takes rows blockIdx.x, + gridDim.x, ...:
        each thread its share of the row's sums, then the block's two-value
        reduction (its barriers: every thread of the block calls it)."""
        red = cuda.shared.array((2, 2, 32), np.float32)
        xs = cuda.local.array(chunk, np.float32)
        ds = cuda.local.array(chunk, np.float32)
        ws = cuda.local.array(chunk, np.float32)
        ng = n // vec
        nf = np.float32(n)
        phase = 0
        row = cuda.blockIdx.x
        while row < m:
            mu = np.float32(0.0)
            if not rms:
                mu = mean[np.uint64(row)]
            rs = rstd[np.uint64(row)]
            s1, s2 = row_sums(dy, x, w, mu, rs, row * ng, ng, xs, ds, ws)
            s1, s2 = rsum2(s1, s2, red, phase)
            phase ^= 1
            if cuda.threadIdx.x == 0:
                c12[np.uint64(2 * row)] = s1 / nf
                c12[np.uint64(2 * row + 1)] = np.float32(0.0) if rms else s2 / nf
            row += cuda.gridDim.x

    return Kernel(name, norm_bwd_stats, argtypes, **_JIT)


@functools.lru_cache(maxsize=None)
def make_backward_kernel(dtype, rms, has_w, has_b, vector, words, prefetch=True,
                         full=False, sacc=False, wide=False, given=False, one_row=False,
                         red_warps=0, trigger=False, bounds=None, stages=0, sum1=False,
                         w_regs=False, row_bar=False):
    """Backward kernel (dx, and dw/db partial rows) for ``dtype`` storage; flags as
    :func:`make_forward_kernel` (has_w: the forward multiplied by w, so dx uses w and
    dw is wanted; has_b: db is wanted). ``sacc`` (streaming kernels with w or b
    only): the block's dw/db accumulators live in dynamic shared memory and go out
    as one partial row at the end, instead of a read-modify-write of the partial
    row in global memory for every row. ``wide`` (float32 row kernels of two groups a
    thread without the prefetch: see :func:`_bwd_wide_words`): compiled for blocks of
    up to 1024 threads (64 registers) instead of :data:`_FAT_BLOCK`.
    ``given`` (streaming kernels with sacc; v11 candidate): the rows' c1, c2 come
    from :func:`make_bwd_stats_kernel`'s pass (argument ``c12``) instead of each
    block's first pass over the whole row. ``one_row`` (row kernels; v12, which the
    launcher takes for exact layouts under tuning's ``bwd_one_row``): compiled for blocks of one row
    (``blockDim.y`` = 1, which the launcher guarantees), so the row index is the same
    in every thread and ptxas keeps the row addresses in uniform registers (fp16 N =
    8192: 325 SASS instructions a row against 353). ``red_warps`` (one_row kernels;
    v32, tuning ``bwd_red_direct``): the rows' two sums cross warps through
    :func:`_row_sum2_direct` for blocks of exactly that many warps (the launcher
    guarantees it), not shuffles; 0: shuffles. ``trigger`` (row kernels; tuning
    ``bwd_pdl``, sm_90): each block first lets the dW / dB kernel's dependent launch
    proceed (:func:`~numba_fused.intrinsics.grid_dependents_launch`), so its blocks
    take SM slots as the row kernel's blocks leave. ``bounds`` (row kernels but the
    wide ones; tuning ``bwd_min_blocks``): launch bounds ``(threads, blocks an SM)``
    in place of ``(_FAT_BLOCK, 1)``, so ptxas fits that many blocks of that size an
    SM in the registers (None: the default). ``stages`` (row kernels but the wide
    ones, without the prefetch, 16-byte groups; tuning ``bwd_stages``, refuted
    candidate): x and dy come through a ring of ``stages`` row buffers in dynamic
    shared memory filled by cp.async, ``stages - 1`` rows ahead of the row being
    reduced, in place of the one row the register prefetch holds (0: off). ``sum1``
    (RMSNorm; tuning ``bwd_rms_sum1``, v37): the row step reduces RMSNorm's one sum
    (:func:`_row_sum1`, or :func:`_row_sum2_direct` with ``rms``) instead of the pair
    whose second it drops; same bits. ``w_regs`` (row kernels with w, 16-byte groups,
    not the wide ones nor with ``stages``; tuning ``bwd_w_regs``, v38): each
    thread keeps its groups of w in registers, loaded once as raw words, instead of
    reading them back from shared memory as float32 on every row (4 LDS.128 a row a
    thread at 16-bit N = 4096); same bits. ``row_bar`` (row kernels but the one-row
    ones, the pair's shuffled step: neither ``red_warps`` nor ``sum1``; tuning
    ``bwd_row_bar``, v39): each row's cross-warp step waits at a named barrier
    of that row's warps (:func:`_row_sum2_rows`), not the block's, so the rows of a
    block of several run apart; blocks of at most ROW_BARRIERS rows (the launcher
    guarantees it); same bits."""
    if row_bar and (not words or one_row or red_warps or sum1):
        raise ValueError("row_bar is for row kernels of several rows a block (not "
                         "one_row) with the pair's shuffled step (neither red_warps nor "
                         "sum1)")
    if w_regs and (not words or not has_w or not vector or wide or stages):
        raise ValueError("w_regs is for row kernels with w, of 16-byte groups, neither "
                         "wide nor with stages")
    if stages not in BWD_STAGES:
        raise ValueError(f"stages must be one of {BWD_STAGES}, got {stages!r}")
    if stages and (not words or wide or prefetch or not vector):
        raise ValueError("stages are for row kernels of 16-byte groups but the wide ones, "
                         "without the prefetch")
    if trigger and not words:
        raise ValueError("trigger is for row kernels (words >= 1)")
    if bounds is not None and (not words or wide or len(bounds) != 2
                               or not all(isinstance(v, int) and v >= 1 for v in bounds)):
        raise ValueError(f"bounds are two positive ints, for row kernels but the wide "
                         f"ones, got {bounds!r}")
    if red_warps and not one_row:
        raise ValueError("red_warps is for one_row kernels")
    if red_warps not in (0, *RED_DIRECT_WARPS):
        raise ValueError(f"red_warps must be 0 or one of {RED_DIRECT_WARPS}, got {red_warps!r}")
    if rms and has_b:
        raise ValueError("RMSNorm has no bias")
    rsum2 = _bwd_row_step(rms, sum1, red_warps, row_bar)
    if one_row and not words:
        raise ValueError("one_row is for row kernels (words >= 1)")
    if sacc and (words or not (has_w or has_b)):
        raise ValueError("sacc is for streaming kernels with a weight or a bias")
    if wide and (words != 2 or prefetch or _vec_of(dtype, vector) != 4):
        raise ValueError(f"wide backward row kernels are float32's of two 16-byte groups a "
                         f"thread without the prefetch, got {dtype}, words={words}, "
                         f"vector={vector}, prefetch={prefetch}")
    if given and not sacc:
        raise ValueError("given statistics are for streaming kernels with sacc")
    vec = _vec_of(dtype, vector)
    load_group, store_group = _group_io(dtype, vector)
    part_store, part_add, part_add_cg = _partial_io(vec, vector)
    affine = has_w or has_b
    st = types.Array(_kernel_storage(dtype, vector), 1, "C")
    argtypes = (st, st, st, _F32_1D, _F32_1D, st, _F32_1D, _F32_1D, _I32_1D,
                types.int64, types.int64, types.int64, types.int32)
    name = (f"norm_bwd_{dtype}_{_variant_name(rms, has_w, has_b)}_{_layout_name(vector, words)}"
            + ("" if prefetch or not words else "_nopf") + ("_full" if full and words else "")
            + ("_sacc" if sacc else "") + ("_wide" if wide else "")
            + ("_given" if given else "") + ("_r1" if one_row else "")
            + (f"_rd{red_warps}" if red_warps else "") + ("_trig" if trigger else "")
            + (f"_lb{bounds[0]}x{bounds[1]}" if bounds else "")
            + (f"_st{stages}" if stages else "") + ("_s1" if sum1 else "")
            + ("_wr" if w_regs else "") + ("_nb" if row_bar else ""))

    if words:
        elems = words * vec
        acc_w = elems if has_w else 1
        acc_b = elems if has_b else 1
        nraw = 4 * words
        quads = vec // 4
        nq = words * quads
        raw_t = _kernel_storage(dtype, True)
        unpack, pack = _raw_codec(dtype)
        _gvalid, _gclamp = _group_guards(full)
        red_shape = (4 * red_warps,) if red_warps else (2, 2, 32)
        # 16-byte loads of red need its alignment (the simulator takes none).
        red_align = 16 if red_warps and not SIMULATOR else None
        # cp.async.wait_group's count is an immediate: a closure constant.
        in_flight = max(stages - 1, 0)

        @inline_device
        def fold(acc, sm):
            """acc of row slot 0 += those of slots 1, 2, ... (in slot order) through
            ``sm`` (shared, ``elems * tpr`` floats, quad q of thread t at q * tpr +
            t). Every thread of the block calls it."""
            t = np.uint32(cuda.threadIdx.x)
            tpq = np.uint32(cuda.blockDim.x)
            slot = cuda.threadIdx.y
            for sl in range(1, cuda.blockDim.y):
                if slot == sl:
                    for q in range(nq):
                        _st16(sm, np.uint32(q) * tpq + t, acc[4 * q], acc[4 * q + 1],
                              acc[4 * q + 2], acc[4 * q + 3])
                cuda.syncthreads()
                if slot == 0:
                    for q in range(nq):
                        v = _ld16(sm, np.uint32(q) * tpq + t)
                        for e in range(4):
                            acc[4 * q + e] += v[e]
                cuda.syncthreads()

        @inline_device
        def ring_fill(ring, x, dy, lb, buf, rbase, dyo, t, tpr, tpq, glast):
            """cp.async of the row at group offset ``lb`` of x and dy into ring buffer
            ``buf`` (this thread's pieces), as one commit group."""
            for k in range(words):
                gi = np.uint64(_gclamp(k, tpr, t, glast))
                o = rbase + np.uint32(2 * buf * words + k) * tpq
                cp_async_16(ring, np.uint32(4) * o, x, np.uint64(4) * (lb + gi), 16)
                cp_async_16(ring, np.uint32(4) * (o + dyo), dy, np.uint64(4) * (lb + gi), 16)
            cp_async_commit()
            return 0

        def norm_bwd_rows(dy, x, w, mean, rstd, dx, pw, pb, locks, m, n, ngroups, use_lock):
            """Row kernel (persistent): dx[r, :] = (wdy - (xhat * c1 + c2)) * rstd[r]
            with xhat = (x - mean[r]) * rstd[r], wdy = w * dy, c1 = sum(xhat * wdy) /
            n, c2 = sum(wdy) / n (RMSNorm: mean = 0, c2 = 0); the block's share of
            dw = sum_r dy * xhat and db = sum_r dy goes out as one float32 partial row.

            Block ``(tpr, rpb)`` and rows as in the forward row kernel. A thread loads
            the next row's x, dy (raw 16-byte groups) and mean, rstd before reducing
            the current row, keeps xhat and w*dy as float32 between the reduction and
            dx, and its dw/db accumulators (aw, ab) over all its rows; the row slots'
            accumulators are folded into slot 0 at the end. w is converted once per
            block into dynamic shared memory (float32, ``words * VEC * tpr`` floats,
            also the fold's scratch).
            dy, x, dx: ``[m, n]`` as 1-D views of 16-byte groups.
            w: ``[n]`` view (unused without has_w). mean, rstd: float32 ``[m]`` saved
            by the forward (mean unused for RMSNorm).
            pw, pb: float32 partial rows, flattened ``[R, n]`` (unused when not wanted).
            locks: int32 ``[2 * ngroups]``, zero on entry (lock scheme only).
            ngroups: lock scheme: R = ngroups <= gridDim.x; block b adds into row
            b % ngroups under lock b % ngroups. use_lock: 1 = lock scheme, 0 = block b
            stores row b (R = gridDim.x).
            """
            red = cuda.shared.array(red_shape, np.float32, alignment=red_align)
            flag = cuda.shared.array(1, np.int32)
            sm = cuda.shared.array(0, types.float32)
            px = cuda.local.array(nraw, raw_t)
            pd = cuda.local.array(nraw, raw_t)
            xs = cuda.local.array(elems, np.float32)
            gs = cuda.local.array(elems, np.float32)
            aw = cuda.local.array(acc_w, np.float32)
            ab = cuda.local.array(acc_b, np.float32)
            tmp = cuda.local.array(vec, np.float32)
            wr = cuda.local.array(nraw, raw_t)
            wf = cuda.local.array(vec, np.float32)
            if trigger:
                grid_dependents_launch()
            t = cuda.threadIdx.x
            tpr = cuda.blockDim.x
            # one_row: compile-time constants, so the row is provably block-uniform.
            slot = 0 if one_row else cuda.threadIdx.y
            rpb = 1 if one_row else cuda.blockDim.y
            ng = np.uint32(n // vec)
            ngw = np.uint64(ng)
            nf = np.float32(n)
            inv_n = np.float32(1.0) / nf
            tq = np.uint32(t)
            tpq = np.uint32(tpr)
            for j in range(acc_w):
                aw[j] = np.float32(0.0)
            for j in range(acc_b):
                ab[j] = np.float32(0.0)
            if has_w and w_regs:
                # Groups past the row's end (clamped to its last) are never used.
                for k in range(words):
                    q = _ld16r(w, np.uint64(0), _gclamp(k, tpr, t, ng - np.uint32(1)))
                    for i in range(4):
                        wr[4 * k + i] = q[i]
            elif has_w:
                if slot == 0:
                    for k in range(words):
                        gi = np.uint32(k) * tpq + tq
                        if gi < ng:
                            load_group(w, gi, tmp, 0)
                        else:
                            for j in range(vec):
                                tmp[j] = np.float32(0.0)
                        for h in range(quads):
                            _st16(sm, np.uint32(k * quads + h) * tpq + tq, tmp[4 * h],
                                  tmp[4 * h + 1], tmp[4 * h + 2], tmp[4 * h + 3])
                cuda.syncthreads()
            row = np.int32(cuda.blockIdx.x * rpb + slot)
            stride = np.int32(cuda.gridDim.x * rpb)
            m32 = np.int32(m)
            row_end = np.int32(m32 + slot) if tpr > WARP else m32
            # Unconditional loads, clamped to row m - 1 and group ng - 1 (see the
            # forward row kernel).
            mlast = np.int32(m32 - 1)
            glast = ng - np.uint32(1)
            pmu = np.float32(0.0)
            prs = np.float32(0.0)
            if prefetch or stages:
                lr = np.uint64(np.uint32(min(row, mlast)))
                if not rms:
                    pmu = mean[lr]
                prs = rstd[lr]
            if prefetch:
                rb = lr * ngw
                for k in range(words):
                    gi = _gclamp(k, tpr, t, glast)
                    q = _ld16r(x, rb, gi)
                    gq = _ld16r(dy, rb, gi)
                    for i in range(4):
                        px[4 * k + i] = q[i]
                        pd[4 * k + i] = gq[i]
            if stages:
                # The ring, in 4-byte words after w's floats: its raw groups have x's
                # element type (uint32 at 16 bits), and every dynamic shared array
                # starts at the same address. In 16-byte pieces: per row slot
                # (threadIdx.y) ``stages`` buffers of x's then dy's groups,
                # thread-major, so a thread only ever reads back what its own cp.async
                # wrote (no barrier). Piece of (buffer b, x, group k): rbase + (2 b
                # words + k) tpr + t; dy's is words tpr further.
                ring = cuda.shared.array(0, raw_t)
                rbase = np.uint32(words * quads + slot * stages * 2 * words) * tpq + tq
                dyo = np.uint32(words) * tpq
                # Buffers 0 .. stages - 2 take rows row, row + stride, ... (clamped
                # to row m - 1: slots past the end run on its data, as above).
                for b in range(stages - 1):
                    lb = np.uint64(np.uint32(min(row + np.int32(b) * stride, mlast))) * ngw
                    ring_fill(ring, x, dy, lb, b, rbase, dyo, t, tpr, tpq, glast)
                wbuf = stages - 1
                rbuf = 0
            phase = 0
            while row < row_end:
                active = row < m32
                rb = np.uint64(np.uint32(row)) * ngw
                nxt = np.int32(row + stride)
                if stages:
                    # Row row + (stages - 1) stride into the buffer the last row
                    # emptied (its words reached registers before that row's first
                    # pass), then wait for this row's buffer: stages - 1 groups stay
                    # in flight.
                    lb = np.uint64(np.uint32(min(row + np.int32(stages - 1) * stride,
                                                 mlast))) * ngw
                    ring_fill(ring, x, dy, lb, wbuf, rbase, dyo, t, tpr, tpq, glast)
                    cp_async_wait(in_flight)
                    for k in range(words):
                        o = rbase + np.uint32(2 * rbuf * words + k) * tpq
                        q = _ld16(ring, o)
                        gq = _ld16(ring, o + dyo)
                        for i in range(4):
                            px[4 * k + i] = q[i]
                            pd[4 * k + i] = gq[i]
                    wbuf = rbuf
                    rbuf = rbuf + 1 if rbuf + 1 < stages else 0
                elif not prefetch:
                    lr = np.uint64(np.uint32(min(row, mlast)))
                    if not rms:
                        pmu = mean[lr]
                    prs = rstd[lr]
                    lb = lr * ngw
                    for k in range(words):
                        gi = _gclamp(k, tpr, t, glast)
                        q = _ld16r(x, lb, gi)
                        gq = _ld16r(dy, lb, gi)
                        for i in range(4):
                            px[4 * k + i] = q[i]
                            pd[4 * k + i] = gq[i]
                # Slots past the last row (they hold row m - 1's data, see above)
                # run the same code with rstd = 0 and weight 0 for db: they add
                # nothing. No branch around the first pass (LLVM and ptxas then keep
                # xhat and w*dy in registers instead of moving copies around).
                mu = pmu
                rs = prs if active else np.float32(0.0)
                act = np.float32(1.0) if active else np.float32(0.0)
                for k in range(words):
                    unpack(px, 4 * k, xs, k * vec)
                    unpack(pd, 4 * k, gs, k * vec)
                s1 = np.float32(0.0)
                s2 = np.float32(0.0)
                for k in range(words):
                    if _gvalid(k, tpr, t, ng):
                        if w_regs:
                            unpack(wr, 4 * k, wf, 0)
                        for h in range(quads):
                            o = k * vec + 4 * h
                            if w_regs:
                                wv = (wf[4 * h], wf[4 * h + 1], wf[4 * h + 2], wf[4 * h + 3])
                            elif has_w:
                                wv = _ld16(sm, np.uint32((k * quads + h) * tpr + t))
                            for e in range(4):
                                hx = (xs[o + e] - mu) * rs
                                g = gs[o + e]
                                wd = g
                                if has_w:
                                    aw[o + e] += g * hx
                                    wd = g * wv[e]
                                if has_b:
                                    ab[o + e] += g * act
                                s1 += hx * wd
                                s2 += wd
                                xs[o + e] = hx
                                gs[o + e] = wd
                # Next row's loads after the first pass (its raw words are dead).
                if prefetch or stages:
                    lr = np.uint64(np.uint32(min(nxt, mlast)))
                    if not rms:
                        pmu = mean[lr]
                    prs = rstd[lr]
                if prefetch:
                    nb = lr * ngw
                    for k in range(words):
                        gi = _gclamp(k, tpr, t, glast)
                        q = _ld16r(x, nb, gi)
                        gq = _ld16r(dy, nb, gi)
                        for i in range(4):
                            px[4 * k + i] = q[i]
                            pd[4 * k + i] = gq[i]
                s1, s2 = rsum2(s1, s2, red, phase)
                phase ^= 1
                a1 = s1 * inv_n * rs
                a2 = np.float32(0.0) if rms else s2 * inv_n * rs
                for k in range(words):
                    gi = np.uint32(k * tpr + t)
                    for j in range(vec):
                        # (wdy - (xhat * c1 + c2)) * rstd with c1, c2 scaled by rstd
                        # up front: two FFMAs.
                        xs[k * vec + j] = gs[k * vec + j] * rs - (xs[k * vec + j] * a1 + a2)
                    p = pack(xs, k * vec)
                    if active and _gvalid(k, tpr, t, ng):
                        _st16r(dx, rb, gi, p[0], p[1], p[2], p[3])
                row = nxt
            if stages:
                # No copy may land after the block has left its shared memory.
                cp_async_wait_all()
            if affine:
                if rpb > 1:
                    cuda.syncthreads()
                    if has_w:
                        fold(aw, sm)
                    if has_b:
                        fold(ab, sm)
                if use_lock:
                    prow = cuda.blockIdx.x % ngroups
                    first = _acquire(locks, prow, ngroups, flag)
                    if slot == 0:
                        for k in range(words):
                            gi = k * tpr + t
                            if gi < ng:
                                e = prow * n + gi * vec
                                if has_w:
                                    if not first:
                                        part_add_cg(pw, e, aw, k * vec)
                                    part_store(pw, e, aw, k * vec)
                                if has_b:
                                    if not first:
                                        part_add_cg(pb, e, ab, k * vec)
                                    part_store(pb, e, ab, k * vec)
                    _release(locks, prow)
                elif slot == 0:
                    prow = cuda.blockIdx.x
                    for k in range(words):
                        gi = k * tpr + t
                        if gi < ng:
                            e = prow * n + gi * vec
                            if has_w:
                                part_store(pw, e, aw, k * vec)
                            if has_b:
                                part_store(pb, e, ab, k * vec)

        # Backward row kernels are compiled for <= _FAT_BLOCK threads: with 1 group per
        # thread, w, b and the prefetch, 64 registers spilled 8-12 bytes (ptxas). The
        # wide ones (float32, two groups, no prefetch) fit 64 without spills.
        return Kernel(name, norm_bwd_rows, argtypes,
                      **_jit_for(*(bounds or (_MAX_BLOCK if wide else _FAT_BLOCK, 1))))

    unroll = _UNROLL[vec]
    chunk = unroll * vec
    quads = vec // 4 if vector else 1

    @inline_device
    def acc_slot(k, h, t, tpr):
        """Shared-memory index of thread t's accumulator piece h of its k-th group
        (gi = k * tpr + t): 16-byte pieces (float32 quads) in vector mode, laid out
        piece-major so a warp's accesses are consecutive (no bank conflicts); single
        floats otherwise."""
        return np.uint32((k * quads + h) * tpr + t)

    @inline_device
    def acc_add(sm, slot, buf, off):
        """sm's accumulator piece at ``slot`` += buf[off:off + 4] (vector mode) or
        buf[off] (scalar mode)."""
        if vector:
            a = _ld16(sm, slot)
            _st16(sm, slot, a[0] + buf[off], a[1] + buf[off + 1], a[2] + buf[off + 2],
                  a[3] + buf[off + 3])
        else:
            sm[slot] += buf[off]

    @inline_device
    def part_accum(p, e, buf, off, first, use_lock):
        """Partial row ``p`` at ``e``: store buf's values (the row's first writer) or
        add them (reading from L2 under the lock scheme)."""
        if not first:
            if use_lock:
                part_add_cg(p, e, buf, off)
            else:
                part_add(p, e, buf, off)
        part_store(p, e, buf, off)

    @inline_device
    def acc_zero(sm, slot):
        if vector:
            _st16(sm, slot, _ZERO, _ZERO, _ZERO, _ZERO)
        else:
            sm[slot] = _ZERO

    @inline_device
    def acc_get(sm, slot, buf, off):
        """buf[off:off + 4] (vector mode) or buf[off] = sm's piece at ``slot``."""
        if vector:
            a = _ld16(sm, slot)
            for e in range(4):
                buf[off + e] = a[e]
        else:
            buf[off] = sm[slot]

    row_sums = _bwd_row_sums(dtype, vector, has_w)

    if given:
        @inline_device
        def chunk_groups(ng, kmax, ch, tpr):
            """[g_lo, g_hi) of chunk ``ch`` in 32-bit integers: with the first pass
            gone, the 64-bit forms left ptxas 8-16 bytes past 64 registers at 16-bit
            (the launcher gives these kernels rows of fewer than 2^31 groups)."""
            g_lo = np.int32(ch * kmax * tpr)
            return g_lo, np.int32(min(ng, g_lo + kmax * tpr))
    else:
        @inline_device
        def chunk_groups(ng, kmax, ch, tpr):
            g_lo = ch * kmax * tpr
            return g_lo, min(ng, g_lo + kmax * tpr)

    def norm_bwd_stream(dy, x, w, mean, rstd, dx, pw, pb, locks, m, n, ngroups, use_lock,
                        c12):
        """Streaming kernel: same math and arguments as the row kernel, for rows of
        any length. Grid ``(nch, R)``: block ``(tpr, 1)`` (ch, b) takes rows b, b + R,
        ... and column chunk ch of ``nch``: groups [g_lo, g_hi) with g_lo = ch kmax
        tpr, kmax = ceil(ceil(ng / nch) / tpr) groups per thread; thread t handles
        groups t, t + tpr, ... of the row ``unroll`` at a time. Pass 1 reads x, dy
        (and w) of the whole row for c1, c2; pass 2 reads its chunk again (from L2:
        the chunks of a row are neighbouring blocks, running together), writes dx and
        adds the row's dy * xhat, dy into the block's accumulators. Chunks (nch > 1)
        exist so that the shared-memory accumulators of rows too long for one block's
        shared memory still fit (N = 65536: three).

        Without sacc the accumulators are the partial rows in global memory: lock
        scheme row b % ngroups, under its lock for each row (the seed's per-row
        locking); else the block's own row b (stored by the block's first row, then
        added to). With sacc they are in dynamic shared memory (dw, then db; each
        ``ceil(ng / tpr) * tpr * VEC`` floats, ``ng = n / VEC``), each thread
        touching only its own groups' slots (so no barrier guards them), and the
        block adds them into its partial row once at the end (lock scheme: under
        lock b % ngroups, once). ``given``: no first pass; c1, c2 of row r are
        ``c12[2 r]``, ``c12[2 r + 1]`` (float32 ``[2 m]``, unread otherwise)."""
        red = cuda.shared.array((2, 2, 32), np.float32)
        flag = cuda.shared.array(1, np.int32)
        sm = cuda.shared.array(0, types.float32)
        xs = cuda.local.array(chunk, np.float32)
        ds = cuda.local.array(chunk, np.float32)
        ws = cuda.local.array(chunk, np.float32)
        t = cuda.threadIdx.x
        tpr = cuda.blockDim.x
        ch = cuda.blockIdx.x
        nch = cuda.gridDim.x
        bid = cuda.blockIdx.y
        ng = n // vec
        nf = np.float32(n)
        step = tpr * unroll
        kmax = ((ng + nch - 1) // nch + tpr - 1) // tpr
        g_lo, g_hi = chunk_groups(ng, kmax, ch, tpr)
        boff = np.uint32(kmax * quads * tpr if has_w else 0)
        if sacc:
            for k in range(kmax):
                for h in range(quads):
                    sl = acc_slot(k, h, t, tpr)
                    if has_w:
                        acc_zero(sm, sl)
                    if has_b:
                        acc_zero(sm, sl + boff)
        phase = 0
        row = bid
        while row < m:
            base = row * ng
            mu = np.float32(0.0)
            if not rms:
                mu = mean[np.uint64(row)]
            rs = rstd[np.uint64(row)]
            if given:
                c1 = c12[np.uint64(2 * row)]
                c2 = c12[np.uint64(2 * row + 1)]
            else:
                s1, s2 = row_sums(dy, x, w, mu, rs, base, ng, xs, ds, ws)
                s1, s2 = rsum2(s1, s2, red, phase)
                phase ^= 1
                c1 = s1 / nf
                c2 = np.float32(0.0) if rms else s2 / nf
            first = row == bid
            prow = bid
            if affine and use_lock and not sacc:
                prow = bid % ngroups
                first = _acquire(locks, prow, ngroups, flag)
            c = g_lo + t
            k0 = 0
            while c < g_hi:
                for u in range(unroll):
                    gi = c + u * tpr
                    if gi < g_hi:
                        load_group(x, base + gi, xs, u * vec)
                        load_group(dy, base + gi, ds, u * vec)
                        if has_w:
                            load_group(w, gi, ws, u * vec)
                for u in range(unroll):
                    gi = c + u * tpr
                    if gi < g_hi:
                        for j in range(vec):
                            o = u * vec + j
                            h = (xs[o] - mu) * rs
                            d = mul_rn(ds[o], ws[o]) if has_w else ds[o]
                            if rms and n == 1:
                                xs[o] = _rms_one_element_dx(xs[o], rs, d)
                            else:
                                xs[o] = (d - (h * c1 + c2)) * rs
                            ws[o] = ds[o] * h
                        store_group(dx, base + gi, xs, u * vec)
                        if sacc:
                            for hq in range(quads):
                                sl = acc_slot(k0 + u, hq, t, tpr)
                                if has_w:
                                    acc_add(sm, sl, ws, u * vec + 4 * hq)
                                if has_b:
                                    acc_add(sm, sl + boff, ds, u * vec + 4 * hq)
                        else:
                            e = prow * n + gi * vec
                            if has_w:
                                part_accum(pw, e, ws, u * vec, first, use_lock)
                            if has_b:
                                part_accum(pb, e, ds, u * vec, first, use_lock)
                c += step
                k0 += unroll
            if affine and use_lock and not sacc:
                _release(locks, prow)
            row += cuda.gridDim.y
        if sacc:
            first = True
            prow = bid
            lid = 0
            if use_lock:
                # One lock (and first-writer flag) per partial row and chunk: the
                # chunks of a row write disjoint columns.
                prow = bid % ngroups
                lid = prow * nch + ch
                first = _acquire(locks, lid, ngroups * nch, flag)
            for k in range(kmax):
                gi = g_lo + k * tpr + t
                if gi < g_hi:
                    for hq in range(quads):
                        sl = acc_slot(k, hq, t, tpr)
                        if has_w:
                            acc_get(sm, sl, ws, 4 * hq)
                        if has_b:
                            acc_get(sm, sl + boff, ds, 4 * hq)
                    e = prow * n + gi * vec
                    if has_w:
                        part_accum(pw, e, ws, 0, first, use_lock)
                    if has_b:
                        part_accum(pb, e, ds, 0, first, use_lock)
            if use_lock:
                _release(locks, lid)

    return Kernel(name, norm_bwd_stream, argtypes + (_F32_1D,), **_JIT)


DWDB_UNROLLS = (4, 8, 16)
# The dW/dB reduction's launch bounds: 1024-thread blocks an SM (tuning dwdb_min_blocks).
DWDB_MIN_BLOCKS = (1, 2)


@functools.lru_cache(maxsize=None)
def _dwdb_column_out(dtype):
    """Device function ``column_out(tile, part, o0, o1, col, n, second)`` ending the dW /
    dB kernels: thread (tx, ty)'s partial sum ``part`` of column ``col`` into shared
    ``tile[ty, tx]``, a block barrier, then threads ty = 0 add the blockDim.y partials
    in ty order and store the column (into o1 if ``second``, else o0; columns < n)."""
    store = dtypes.storer(dtype)

    @inline_device
    def column_out(tile, part, o0, o1, col, n, second):
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        tile[ty, tx] = part
        cuda.syncthreads()
        if ty == 0 and col < n:
            acc = np.float32(0.0)
            for k in range(cuda.blockDim.y):
                acc += tile[k, tx]
            if second:
                store(o1, col, acc)
            else:
                store(o0, col, acc)

    return column_out


def make_dwdb_kernel(dtype, unroll=4, min_blocks=1, dependent=False):
    """Column sums of float32 partial rows into ``dtype`` outputs; ``unroll`` (4, 8 or
    16): partial rows a thread loads before adding any (DWDB_UNROLLS); ``min_blocks``
    (DWDB_MIN_BLOCKS): launch bounds for that many 1024-thread blocks an SM (tuning
    dwdb_min_blocks); ``dependent`` (tuning bwd_pdl, sm_90): a dependent launch
    (:class:`~numba_fused.launch.Kernel`'s ``dependent``), its blocks scheduled
    while the row kernel before it finishes, each waiting for that kernel's partial
    rows before its first load. One kernel object per (dtype, unroll, min_blocks,
    dependent), however the arguments are spelled."""
    if unroll not in DWDB_UNROLLS:
        raise ValueError(f"unroll must be one of {DWDB_UNROLLS}, got {unroll!r}")
    if min_blocks not in DWDB_MIN_BLOCKS:
        raise ValueError(f"min_blocks must be one of {DWDB_MIN_BLOCKS}, got {min_blocks!r}")
    if not isinstance(dependent, bool):
        raise ValueError(f"dependent must be a bool, got {dependent!r}")
    return _dwdb_kernel(dtype, unroll, min_blocks, dependent)


@functools.lru_cache(maxsize=None)
def _dwdb_kernel(dtype, unroll, min_blocks, dependent):
    column_out = _dwdb_column_out(dtype)
    st = types.Array(dtypes.numba_storage_type(dtype), 1, "C")

    def norm_dwdb(p0, p1, o0, o1, r, n):
        """o[c] = sum_{i < r} p[i * n + c] for c < n, with (p, o) = (p0, o0) for
        blockIdx.y == 0 and (p1, o1) for blockIdx.y == 1.

        p0, p1: float32 partial rows, flattened ``[r, n]``. o0, o1: ``[n]`` outputs
        in ``dtype``. Block (bx <= 32, by <= 32): thread (tx, ty) sums rows ty,
        ty + by, ... of column blockIdx.x * bx + tx in four interleaved float32
        accumulators (row ty + k by into accumulator k % 4, in row order, at any
        unroll); the by partials are added in ty order: the result depends only
        on (r, n, block shape), never on timing or unroll.
        """
        tile = cuda.shared.array((32, 33), np.float32)
        vals = cuda.local.array(unroll, np.float32)
        accs = cuda.local.array(4, np.float32)
        if dependent:
            grid_dependency_wait()
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        by = cuda.blockDim.y
        col = cuda.blockIdx.x * cuda.blockDim.x + tx
        second = cuda.blockIdx.y == 1
        p = p1 if second else p0
        a0 = np.float32(0.0)
        a1 = np.float32(0.0)
        a2 = np.float32(0.0)
        a3 = np.float32(0.0)
        if col < n and unroll == 4:
            # Four independent loads in flight per step.
            i = ty
            while i < r:
                a0 += p[i * n + col]
                i1 = i + by
                if i1 < r:
                    a1 += p[i1 * n + col]
                i2 = i1 + by
                if i2 < r:
                    a2 += p[i2 * n + col]
                i3 = i2 + by
                if i3 < r:
                    a3 += p[i3 * n + col]
                i = i3 + by
        elif col < n:
            # unroll independent loads in flight a step (each round costs an L2
            # latency: the partial rows were written just before), added in the
            # same order as above.
            for k in range(4):
                accs[k] = np.float32(0.0)
            i = ty
            while i < r:
                for k in range(unroll):
                    ik = i + k * by
                    vals[k] = p[ik * n + col] if ik < r else np.float32(0.0)
                for k in range(unroll):
                    if i + k * by < r:
                        accs[k % 4] += vals[k]
                i += unroll * by
            a0, a1, a2, a3 = accs[0], accs[1], accs[2], accs[3]
        column_out(tile, (a0 + a1) + (a2 + a3), o0, o1, col, n, second)

    return Kernel(f"norm_dwdb_{dtype}" + ("" if unroll == 4 else f"_u{unroll}")
                  + ("" if min_blocks == 1 else f"_mb{min_blocks}")
                  + ("_dep" if dependent else ""), norm_dwdb,
                  (_F32_1D, _F32_1D, st, st, types.int64, types.int64),
                  dependent=dependent, **_jit_for(_MAX_BLOCK, min_blocks))


def _zero_kernel_fn(a, n):
    """a[i] = 0 for i < n (a: uint8 bytes of a buffer to clear)."""
    i = cuda.grid(1)
    if i < n:
        a[i] = np.uint8(0)


@functools.lru_cache(maxsize=None)
def _zero_kernel():
    return Kernel("norm_zero_u8", _zero_kernel_fn, (types.Array(types.uint8, 1, "C"), types.int64))


def _variants():
    """(rms, has_w, has_b) of every norm the launchers can be asked for."""
    for has_w in (False, True):
        for has_b in (False, True):
            yield False, has_w, has_b
        yield True, has_w, False


def _shipped_rows(factory, bwd, trigger, rms, *args, **kwargs):
    """The row kernels shipped_kernels lists for one layout: the forward's one; the
    backward's with ``trigger`` and, for RMSNorm, as bwd_rms_sum1's default picks them
    (v37): the one-sum kernel, and where the kernel can run blocks of several rows of
    several warps (not a one-row kernel) the pair's as well; where bwd_w_regs's default
    keeps w in registers (v38: 16-bit rows with w of two groups a thread), that form and
    the one with w in shared memory (tuning bwd_w_regs=False); where bwd_row_bar's
    default takes a named barrier a row (v39: 16-bit blocks of several rows of several
    warps, so not one-row kernels), the pair's step with it as well."""
    if not bwd:
        return [factory(*args, **kwargs)]
    dtype, has_w, vector, words = args[0], args[2], args[4], args[5]
    one_row = kwargs.get("one_row")
    row_bar = (not one_row and not kwargs.get("wide")
               and _bwd_row_bar(None, _vec_of(dtype, vector)))
    out = []
    for w_regs in ((False, True) if has_w and not kwargs.get("wide")
                   and _bwd_w_regs(None, dtype, words) else (False,)):
        kw = dict(kwargs, w_regs=True) if w_regs else kwargs
        out.append(factory(*args, trigger=trigger, sum1=rms, **kw))
        if rms and not one_row:
            out.append(factory(*args, trigger=trigger, **kw))
        if row_bar:
            out.append(factory(*args, trigger=trigger, row_bar=True, **kw))
    return out


def shipped_kernels():
    """Every kernel specialisation the launchers can pick: row kernels for every
    ``words`` in the exact-layout form (``full``) and, unless fat, the checked form;
    the lean (two-pass statistics; rows of a warp or more, or
    sub-warp rows; v26's 16-bit ones with w / b loaded with the row, one row a slot,
    RMSNorm's with and without the statistics),
    the plain kernel at its layouts for the sweep's rows (v27, v28) and v61's
    widths off it (with and without the statistics) and its sub-warp /
    bounded candidates, and staged forward row kernels (LayerNorm's with compensated
    statistics; with register groups); the wide and lean wide (16-bit,
    checked forms) backward row kernels; the
    backward row kernels' exact forms also for one-row blocks;
    the streaming and scalar kernels (the backward's also with given statistics, and
    their statistics pass); the dW/dB reduction, also as bwd_pdl's dependent launch
    (the backward row and lean kernels before it carry its trigger). RMSNorm's
    backward kernels reduce one row sum (bwd_rms_sum1, v37), 16-bit backward row
    kernels of several rows a block take a named barrier a row (bwd_row_bar, v39;
    :func:`_shipped_rows`)."""
    for dtype in dtypes.DTYPES:
        vec = _vec_of(dtype, True)
        for rms, has_w, has_b in _variants():
            for direction, factory in (("fwd", make_forward_kernel), ("bwd", make_backward_kernel)):
                # Backward row and lean kernels as the launcher picks them on sm_90:
                # with bwd_pdl's trigger when a dW / dB reduction follows them.
                trig = direction == "bwd" and (has_w or has_b) and _TUNING_DEFAULTS["bwd_pdl"]
                row = functools.partial(_shipped_rows, factory, direction == "bwd", trig, rms)
                for words in _WORDS[(direction, vec)]:
                    yield from row(dtype, rms, has_w, has_b, True, words, True, True)
                    if direction == "bwd":  # exact layouts of one-row blocks (bwd_one_row)
                        yield from row(dtype, rms, has_w, has_b, True, words, True, True,
                                       one_row=True)
                        # bwd_red_direct's kernels: the default's on rows with w
                        # (v32, v41), the tuning's on rows without.
                        if vec == 8 and words == 2:
                            for nw in _RED_DIRECT_DEFAULT:
                                yield from row(dtype, rms, has_w, has_b, True, words, True,
                                               True, one_row=True, red_warps=nw)
                    if not _fat(direction, vec, words):
                        yield from row(dtype, rms, has_w, has_b, True, words, True, False)
                if direction == "fwd":
                    for words in _LEAN_WORDS:
                        for full in (True, False):
                            yield factory(dtype, rms, has_w, has_b, True, words, True, full,
                                          True)
                        # fwd_lean_regs: register-capped exact layouts.
                        for bounds in sorted({(tpr * rpb, blocks) for (dt, wd, tpr, r), (
                                rpb, blocks) in _LEAN_CAPS.items()
                                if (dt, wd, r) == (dtype, words, rms)}):
                            yield factory(dtype, rms, has_w, has_b, True, words, True,
                                          True, True, bounds=bounds)
                        # Sub-warp rows (tuning fwd_subwarp): always exact layouts.
                        yield factory(dtype, rms, has_w, has_b, True, words, True, True,
                                      True, subwarp=True)
                        # v26 (_fwd_early_once): 16-bit RMSNorm rows, LayerNorm rows of
                        # two groups, with w / b loaded with the row, one row a slot.
                        if vec == 4 or not (rms or words == 2):
                            continue
                        caps = sorted({(tpr * rpb, blocks) for (dt, wd, tpr, r), (
                            rpb, blocks) in _LEAN_CAPS.items() if (dt, wd, r) == (
                                dtype, words, rms)})
                        # RMSNorm's also without rstd (stats=False: _nostats).
                        for stats in ((True, False) if rms else (True,)):
                            for full, bounds in ([(True, None), (False, None)]
                                                 + [(True, c) for c in caps]):
                                yield factory(dtype, rms, has_w, has_b, True, words, True,
                                              full, True, bounds=bounds, early=True,
                                              once=True, stats=stats)
                            if rms:
                                yield factory(dtype, rms, has_w, has_b, True, words, True,
                                              True, True, subwarp=True, early=True,
                                              once=True, stats=stats)
                    # The plain kernel (tuning fwd_plain) at its layouts for the
                    # sweep's rows, exact and ragged grids.
                    # With and without the statistics (stats=False: _nostats).
                    # (v50: the _nostats kernel's own bounds where they differ.)
                    # At v62's rows, also the layouts tuning fwd_plain_stats_block=False
                    # gives back (the ones shipped before them).
                    lays = set()
                    for sb in (None, False):
                        with tuning(fwd_plain_stats_block=sb):
                            lays |= {(lay, _plain_nostats_bounds(n, vec, rms, dtype, lay[4]))
                                     for n in _PLAIN_SHIPPED_N + _PLAIN_OFFGRID_SHIPPED_N
                                     for lay in (_plain_layout(n, vec, rms, dtype),) if lay}
                    for lay, bare in sorted(lays, key=repr):
                        for ragged in ((False, True) if lay[2] > 1 else (False,)):
                            for stats in (True, False):
                                yield make_plain_forward_kernel(dtype, rms, has_w, has_b,
                                                                *lay[:4], ragged,
                                                                lay[4] if stats else bare,
                                                                stats)
                    # v60's candidate rows (_PLAIN_RELOAD_L2): the two-read form.
                    for cls, r, groups in _PLAIN_RELOAD_L2:
                        if (cls, r) != (_dtype_class(dtype), rms):
                            continue
                        lay = _plain_layout(groups * vec, vec, rms, dtype)
                        for stats in ((False,) if (cls, r, groups) in
                                      _PLAIN_RELOAD_L2_NOSTATS_ONLY else (True, False)):
                            yield make_plain_forward_kernel(
                                dtype, rms, has_w, has_b, *lay[:4], False,
                                lay[4] if stats else _plain_nostats_bounds(
                                    groups * vec, vec, rms, dtype, lay[4]), stats,
                                reload="l2")
                    # Its opt-in candidates: sub-warp rows (16 threads, eight rows a
                    # block) and, at float32, launch bounds for two blocks an SM.
                    yield make_plain_forward_kernel(dtype, rms, has_w, has_b, 4, 16, 8,
                                                    True, True)
                    if dtype == "float32":
                        yield make_plain_forward_kernel(dtype, rms, has_w, has_b, 8, 512, 1,
                                                        False, False, 2)
                    # v62 (fwd_plain_stats_block): its rows' layouts, and warp rows
                    # eight a block and sub-warp rows 16 a block (tuning True), the
                    # statistics a block at a time.
                    sbs = {(words, _plain_tpr(groups, words, sub=True), rpb)
                           for (cls, r, groups), (words, rpb) in _PLAIN_STATS_BLOCK.items()
                           if (cls, r) == (_dtype_class(dtype), rms)}
                    for words, tpr, rpb in sorted(sbs):
                        for ragged in (False, True):
                            yield make_plain_forward_kernel(dtype, rms, has_w, has_b, words,
                                                            tpr, rpb, words <= 4, ragged,
                                                            stats_block=True)
                    for words, tpr, rpb, ragged in ((4, 32, 8, False), (4, 16, 16, True)):
                        yield make_plain_forward_kernel(dtype, rms, has_w, has_b, words, tpr,
                                                        rpb, True, ragged, stats_block=True)
                    # v63 (fwd_plain_checked): its layouts at the models' widths no
                    # exact layout splits, with and without the statistics.
                    for n in _PLAIN_CHECKED_N:
                        for stats in (True, False):
                            lay = _plain_offgrid(n, vec, rms, dtype, stats, True,
                                                 _plain_checked_only(n, vec, rms, dtype))
                            if lay is None or lay[0] * lay[1] * vec == n:
                                continue
                            for ragged in ((False, True) if lay[2] > 1 else (False,)):
                                yield make_plain_forward_kernel(
                                    dtype, rms, has_w, has_b, *lay[:4], ragged, None, stats,
                                    checked=True)
                    for words in _STAGED_WORDS:
                        for full in (True, False):
                            yield factory(dtype, rms, has_w, has_b, True, words, True,
                                          full, staged=True)
                    # With register groups (tuning fwd_staged_regs).
                    for rwords in range(1, _STAGED_REGS + 1):
                        for full in (True, False):
                            yield factory(dtype, rms, has_w, has_b, True, _HYBRID_WORDS,
                                          True, full, staged=True, rwords=rwords)
                # Streaming kernels (rows of one block, so one-sum under v37).
                one = {"sum1": rms} if direction == "bwd" else {}
                yield factory(dtype, rms, has_w, has_b, True, 0, **one)
                yield factory(dtype, rms, has_w, has_b, False, 0, **one)
                if direction == "fwd" and not rms:
                    # One-pass row statistics (tuning fwd_welford).
                    for vector in (True, False):
                        yield factory(dtype, rms, has_w, has_b, vector, 0, welford=True)
                if direction == "bwd":
                    # Wide row kernels (tuning bwd_wide2): float32, two groups.
                    for full in ((True, False) if vec == 4 else ()):
                        for r1 in ((False, True) if full else (False,)):
                            yield from row(dtype, rms, has_w, has_b, True, 2, False, full,
                                           wide=True, one_row=r1)
                if direction == "bwd":
                    # v30: the exact layouts of _BWD_NO_PREFETCH's rows without it.
                    for cls, r, groups in sorted(_BWD_NO_PREFETCH):
                        if (cls, r) != (_dtype_class(dtype), rms):
                            continue
                        words = _row_layout(groups * vec, vec, "bwd")[0]
                        for r1 in (False, True):
                            yield from row(dtype, rms, has_w, has_b, True, words, False, True,
                                           one_row=r1)
                    # The lean wide backward (tuning bwd_lean, bwd_lean_f32): checked forms.
                    for pf in (True, False):
                        yield make_lean_backward_kernel(dtype, rms, has_w, has_b, False, pf,
                                                        trig, rms)
                if direction == "bwd" and (has_w or has_b):
                    for vector in (True, False):
                        yield factory(dtype, rms, has_w, has_b, vector, 0, sacc=True,
                                      sum1=rms)
                        # Given statistics (tuning bwd_stats_pass) and their pass.
                        yield factory(dtype, rms, has_w, has_b, vector, 0, sacc=True,
                                      given=True, sum1=rms)
                        if not (has_w and has_b):  # once per (rms, has_w)
                            yield make_bwd_stats_kernel(dtype, rms, has_w, vector, rms)
        yield make_dwdb_kernel(dtype)
        yield make_dwdb_kernel(dtype, min_blocks=2)
        yield make_dwdb_kernel(dtype, min_blocks=2, dependent=True)
    yield _zero_kernel()


# ---------------------------------------------------------------------------------
# Launch heuristics
# ---------------------------------------------------------------------------------

# The most register groups the staged forward takes besides its shared-memory ones
# (kernels are listed for 1 and 2: float32 rows up to N = 65536, 16-bit up to 131072).
_STAGED_REGS = 2

# The backward entries' figures up to the forty-seventh session were taken while every
# kernel with dynamic shared memory ran under a carveout leaving ~23 KB of L1
# (launch.Kernel._ensure_smem, fixed in v42, forty-eighth session: 16-bit LayerNorm
# backward with w and b at 16384 x 4096 114 -> 107 us): their A/Bs between layouts with
# and without shared memory may read differently now (bench/ab/pending_s49.sh).
_TUNING_DEFAULTS = {
    # Largest threads-per-row (multiple of 32); rows needing more stream.
    "max_tpr": _MAX_BLOCK,
    # Forward row kernels: rows per block = fwd_block // tpr (at least 1); the capped
    # lean layouts (_LEAN_CAPS, under fwd_lean_regs) take their own.
    "fwd_block": 256,
    # Backward row kernels: rows per block = bwd_block // tpr (at least 1). v20: 128
    # (was 256): rows of fewer than 256 threads run half as many a block, in more and
    # smaller blocks an SM (fp16 N = 2048: four blocks of 128 threads for two of 256,
    # the same threads; why that helps is not profiled yet). H100, M x N = 2^26, us, 256 ->
    # 128: fp16 LayerNorm / RMSNorm N = 768 175.8 / 161.3 -> 150.7 / 149.3, 1024
    # 157.7 / 155.8 -> 153.3 / 151.3, 2048 158.7 / 156.2 -> 150.2 / 147.1; float32 N
    # = 512 295.6 / 297.9 -> 288.4 / 283.2, 768 319.2 / 286.7 -> 285.3 / 287.0, 1024
    # 296.5 / 298.4 -> 283.7 / 285.9; the same at N = 512 fp16 and from float32 2048
    # and 16-bit 4096, whose rows fill a block of 128 alone (bench/notes_layer_norm.md).
    # None (v39, the default): _bwd_block's pick, 512 for 16-bit rows with w of two
    # or more groups over 64, 128 or 256 threads (N = 1024, 2048, 4096: 8, 4, 2 rows a
    # block under bwd_row_bar's named barriers), 128 elsewhere. The SM holds the same 16
    # warps of those 128-register kernels either way (one block of 512 instead of 4 / 4
    # / 2 smaller), and 132 blocks leave 132 dW / dB partial rows instead of 528 / 528
    # / 264. H200 (forty-fifth session, A/B/B/A, us, 128 / 512 + bwd_row_bar): fp16
    # LayerNorm 65536 x 1024 112.3, 112.0 / 112.2, 111.6; 32768 x 2048 116.5, 116.5 /
    # 111.9, 112.0; 16384 x 4096 115.7, 115.3 / 113.1, 113.4; bf16 111.6, 111.7 /
    # 112.0, 112.1; 115.4, 116.0 / 110.6, 112.0; 115.4, 114.7 / 113.1, 112.7; fp16
    # RMSNorm 110.9, 110.6 / 109.4, 109.5; 111.0, 111.7 / 109.0, 109.7; 112.2, 112.2 /
    # 109.9, 112.0; bf16 111.0, 111.0 / 110.5, 110.2; 112.4, 112.0 / 109.9, 110.4;
    # 111.8, 111.8 / 111.8, 112.5. 512 with the block's barrier was slower (LayerNorm
    # fp16 116.5, 116.2 / 115.8, 115.4 / 114.5, 114.1). v65: float32 rows with w over
    # 64-256 threads take 512 too (H100, 8-12 us at N = 512-1024: _bwd_block); v66:
    # 16-bit RMSNorm N = 768 rows take 384 (H100, -5 to -6.5 us at 2^26).
    "bwd_block": None,
    # Backward persistent grid: SMs x (bwd_threads_per_sm // block) blocks. More
    # resident threads would not fit the registers (~56 per thread) and would add
    # partial rows for _dwdb to read.
    "bwd_threads_per_sm": 1024,
    # dW/dB scheme of deterministic=False: "partials" (a partial row per block of the
    # persistent grid, summed in a fixed order: what deterministic=True runs, measured
    # as fast or faster at every shape of the H100 runs of 2026-11-25, and with no lock
    # buffer to clear) or "lock" (the seed's GROUP_SIZE_M buffers under spin locks).
    "bwd_scheme": "partials",
    # Streaming backward: dw/db accumulators in shared memory when they take at most
    # this many bytes per block (else a partial row in global memory per block,
    # read-modified-written for every row). 0 turns it off.
    "sacc_bytes": 192 * 1024,
    # Streaming backward, rows with w and without b: dw in a global partial row per
    # block even where the shared accumulator fits (opt-in). v46 made it the default
    # for float32 rows of N <= 16384 (fiftieth session: 12288 LayerNorm w 316.6 ->
    # 295.3 us, when the shared accumulators cost the kernel its L1); under v48
    # (fit_carveout) it lost everywhere it held and was retired (fifty-second session,
    # float32, affine_share, us, global / shared, two processes' four passes: LayerNorm
    # w 10240 319.8 / 281.2, 12288 295.0 / 247.9, 16384 307.1 / 234.2; RMSNorm w 313.2 /
    # 274.8, 285.8 / 242.8, 303.8 / 232.9).
    "bwd_global_dw": False,
    # v48: persistent row kernels whose dynamic shared memory is over the 48 KB default
    # prefer the L1 / shared carveout that holds their resident blocks, not all 228
    # KB (launch.Kernel.fit_carveout): the float32 streaming backward kept ~23 KB of L1
    # and its row's second read missed there (ncu, fifty-first session, 5461 x 12288 w
    # and b: L1 hit rate 0.5%, 316 us; with dw in global memory and no shared, 57%).
    # H200, affine_share, us, fit / False (medians of two processes' four passes):
    # float32 5461 x 12288 LayerNorm w and b 273.4 / 331.5, b 236.3 / 279.4; fp16
    # (lean2 rows, 96-192 KB of dW / dB) 5461 x 12288 w and b 119.5 / 132.8, w 109.5
    # / 120.9, b 107.7 / 117.3, RMSNorm w 107.8 / 118.0; 4096 x 16384 w and b 122.5 /
    # 142.8, w 121.1 / 126.7, RMSNorm w 120.8 / 121.4; the rest even. False keeps the
    # whole carveout as shared memory (v47 and before).
    "fit_carveout": True,
    # _dwdb block (columns, row slices), each at most 32. H200, fortieth session, fp16
    # LayerNorm bwd 16384 x 4096, us: (32, 32) 116.8, 116.4; (16, 32) 116.3; (8, 32)
    # 116.8; (32, 16) 117.3: even.
    "reduce_block": (32, 32),
    # _dwdb: partial rows a thread loads before adding (4, 8, 16). Measured (H100,
    # back to back, CUPTI): 4 is fastest; 16 took the fp16 16384 x 4096 reduction
    # from 5.9 to 7.0 us and 8192 x 8192 from 8.3 to 12.9 (bench/notes_layer_norm.md).
    "dwdb_unroll": 4,
    # _dwdb: launch bounds for this many 1024-thread blocks an SM (1 or 2). v31: ncu
    # (H200, fp16 16384 x 4096) read the reduction 6.7 us at 36 registers, one block
    # an SM: its 256 blocks (128 column blocks x dW / dB) ran in 1.94 waves of L2
    # latency chains; 2 fits ptxas in 32 registers, no spills, and the 256 blocks in
    # one wave of 264. H200, LayerNorm bwd, us, 1 / 2, two runs: fp16 4096 120.4,
    # 120.2 / 118.9, 118.7; 8192 125.9, 126.0 / 124.8, 123.5; bf16 4096 120.5, 120.0
    # / 119.4, 119.1; 8192 126.3, 127.0 / 123.9, 124.3; float32 4096 223.1, 224.0 /
    # 222.6, 221.7; 8192 231.7, 230.7 / 228.8, 229.6; even at 16-bit N = 1024 and
    # fp16 RMSNorm 4096 (bench/NOTES.md).
    "dwdb_min_blocks": 2,
    # The backward's row (and lean) kernels and the dW / dB reduction after them as a
    # programmatic dependent launch (sm_90; other devices launch as before): every
    # row block first triggers the reduction's launch, whose blocks then wait in
    # griddepcontrol.wait for the row kernel's partial rows, so its launch and
    # block scheduling overlap the row kernel's tail instead of following it.
    # Thirty-second session, H200, LayerNorm bwd (partials scheme), us, plain / pdl,
    # two alternating passes: fp16 16384 x 4096 117.0, 116.6 / 115.2, 115.8; 8192 x
    # 8192 122.2, 122.1 / 120.5, 120.3; float32 16384 x 4096 219.7, 220.1 / 218.9,
    # 218.2 (the lock scheme likewise, bench/NOTES.md). Thirty-third session, same
    # method: bf16 4096 116.9, 116.2 / 115.2, 115.3; RMSNorm fp16 4096 112.0, 111.6 /
    # 111.1, 111.3; float32 LayerNorm 8192 x 8192 (lean) 227.7, 228.0 / 225.8, 225.2;
    # RMSNorm 768 214.3, 214.3 / 213.1, 213.3; 4096 214.0, 214.0 / 214.3, 213.9;
    # fp16 1024 122.0, 122.5 / 122.3, 122.6 and 16384 146.5, 147.2 / 146.2, 145.0
    # (within the runs' spread): on by default since.
    "bwd_pdl": True,
    # RMSNorm's backward kernels reduce its one row sum (_row_sum1; the direct step
    # with rms=True) instead of LayerNorm's pair, whose second they dropped (v37): same
    # bits (simulator, every kernel kind; H200, every sweep row length: 300 of 300
    # outputs); ptxas, sm_90: SHFL 1916 -> 1020 over 98 kernels, no spills. None (the
    # default): everywhere but blocks of several rows of several warps, where it lost
    # (H200, thirty-sixth session, two passes, us: 16-bit 65536 x 1024 113.4, 113.3 ->
    # 119.6, 118.9 and bf16 112.1, 112.0 -> 119.7, 119.5; ncu: more waiting on the next
    # row's loads, the shorter step hid less of them); elsewhere even or faster, e.g.
    # 16-bit 32768 x 2048 115.4, 115.7 -> 113.2, 115.1 and 115.1, 115.5 -> 112.7,
    # 113.9; 13107 x 5120 123.6, 123.2 -> 122.3, 122.3; float32 5120 215.3, 215.5 ->
    # 213.5, 213.7. True / False: everywhere / nowhere.
    "bwd_rms_sum1": None,
    # Backward row kernels (not the wide or lean ones) compiled with launch bounds
    # for this many of their blocks an SM (None: (_FAT_BLOCK, 1), up to 128
    # registers). The fp16 LayerNorm row kernel at N = 4096 (256 threads) without the
    # prefetch fits 80 registers at 3 blocks, no spills (122 unbounded, 2 blocks);
    # with the prefetch it spills 144 bytes. Refuted (H200, fortieth session, us,
    # 16384 x 4096 fp16 / bf16): shipped 116.3-116.9, prefetch off at 3 blocks 121.6 /
    # 122.4, prefetch off at 2 blocks 129.3 / 129.1.
    "bwd_min_blocks": None,
    # Backward row kernels (not the wide or lean ones) with x and dy brought through
    # a cp.async ring of this many row buffers in shared memory, that many - 1 rows
    # ahead (0: the register prefetch, one row ahead). Written for the 16-bit row
    # kernel at N = 4096 (2 blocks of 256 threads an SM, 32 KB of loads in flight);
    # rows whose ring does not fit the device's shared memory keep their plain
    # kernel. Refuted (H200, thirty-fourth session; us, default / 2 / 3 / 4 buffers):
    # fp16 LayerNorm bwd 4096 115.6 / 119.0 / 120.0 / 120.4, bf16 115.1 / 119.5 /
    # 119.6 / 121.4, fp16 RMSNorm 4096 111.6 / 117.0 / 117.3 / 118.4; N = 8192 even
    # to +1 us. The row loop waits on MIO, and the ring adds a shared-memory round
    # trip an element to it. On 3 blocks an SM (bwd_min_blocks 3; forty-fourth
    # session, A/B/B/A, us, 16384 x 4096, default / 2 / 3 buffers): fp16 LayerNorm
    # 115.5, 115.6 / 128.1, 127.9 / 129.2, 130.5, bf16 115.5, 115.8 / 128.1, 127.7 /
    # 128.7, 129.7; RMSNorm fp16 112.2, 112.2 / 119.7, 120.0 / 122.8, 120.8. Refuted.
    "bwd_stages": 0,
    # Backward row kernels with w (16-byte groups, not the wide ones, no ring): each
    # thread keeps its groups of w in registers as raw words (v38, make_backward_kernel's
    # w_regs) instead of reading float32 w from shared memory every row. ptxas fits
    # the 16-bit LayerNorm row kernel at N = 4096 in its 128 registers without spills,
    # its row loop 300 -> 297 SASS instructions, 8 LDS.128 -> 4. H200 (forty-third
    # session, A/B/B/A, us, 16-bit LayerNorm bwd, shipped / w_regs): fp16 65536 x 1024
    # 114.0, 114.0 / 111.4, 111.7, bf16 113.1, 113.1 / 111.3, 111.7; fp16 8192 x 8192
    # 120.3, 119.8 / 119.0, 119.1, bf16 120.6, 120.2 / 119.8, 119.4; 16384 x 4096
    # even (fp16 115.3, 114.8 / 115.6, 115.0; bf16 115.1, 115.2 / 115.3, 115.4).
    # 16-bit RMSNorm 16384 x 4096 even (111.8, 111.8 / 111.7, 111.7). Forty-fourth
    # session (A/B/B/A, us, off / on): 16-bit LayerNorm fp16 131072 x 512 112.9, 113.1
    # / 111.8, 111.8; 32768 x 2048 116.9, 117.3 / 116.4, 116.8; 13107 x 5120 126.4,
    # 126.4 / 124.9, 124.9; 12288 and 16384 even (wide kernels, unchanged); bf16 the
    # same. But 87381 x 768 (one group a thread) 116.3, 116.2 / 125.3, 125.0: 80 -> 89
    # registers, 8 -> 6 blocks an SM. 16-bit RMSNorm fp16 65536 x 1024 112.4, 112.0 /
    # 110.9, 110.9; 8192 x 8192 114.0, 113.6 / 112.3, 112.3 (bf16 113.5, 113.5 /
    # 112.8, 112.3). float32 LayerNorm even (1024: 210.4, 209.6 / 211.6, 211.4; 4096
    # 215.7, 215.4 / 215.6, 215.7; 8192 222.1, 221.5 / 221.2, 221.0). At this default
    # (off / default): 16-bit RMSNorm fp16 1024 113.3, 113.1 / 112.0, 111.8; 4096 113.0,
    # 113.2 / 113.3, 113.2; 8192 114.8, 114.8 / 113.6, 113.6; bf16 1024 112.3, 111.9 /
    # 112.0, 111.6; 4096 113.1, 113.0 / 112.1, 112.5; 8192 114.6, 114.2 / 113.5, 113.7.
    # One group a thread forced on: LayerNorm fp16 768 117.6, 117.3 / 126.3, 126.4;
    # 1600 (224 threads) 133.6, 133.2 / 156.1, 155.7: 80 -> 91 registers, 3 -> 2
    # blocks an SM (bf16 the same). None: 16-bit rows of two or more groups a thread,
    # LayerNorm and RMSNorm (_bwd_w_regs); True / False: every row kernel with w /
    # none.
    "bwd_w_regs": None,
    # Row kernels of several rows of several warps a block: each row's cross-warp step
    # waits at a named barrier of its own warps instead of the block's
    # (make_backward_kernel's row_bar), so blocks of several rows cost no more barrier
    # waits than one-row blocks do (the thirty-fifth session's ncu had the one-row
    # kernel at 16-bit N = 4096 38% at its row's barrier). None (v39, the default):
    # 16-bit rows (_bwd_row_bar), with bwd_block's 512-thread blocks (numbers there);
    # at bwd_block 128 alone even (H200, forty-fifth session, A/B/B/A, us, 65536 x
    # 1024, two rows of 64 a block, off / on: LayerNorm fp16 112.3, 112.0 / 112.1,
    # 112.3; bf16 111.6, 111.7 / 111.7, 112.2; RMSNorm fp16 110.9, 110.6 / 110.4,
    # 110.4; bf16 111.0, 111.0 / 111.6, 111.5). float32 not timed: off. True / False:
    # every such row kernel / none.
    "bwd_row_bar": None,
    # Row kernels: load the next row before reducing the current one. None: the
    # forward's always, the backward's but at _BWD_NO_PREFETCH's rows (v30).
    "prefetch": None,
    # Backward row kernels whose blocks hold one row: compiled with the row slot a
    # constant (v12, make_backward_kernel's one_row; H100 fp16 16384 x 4096 163.0 ->
    # 152.1 us, 8192 x 8192 207.6 -> 156.5, float32 29127 x 2304 364.8 -> 283.6).
    "bwd_one_row": True,
    # Backward one-row kernels of 4, 8 or 16 warps a row: the rows' two sums cross
    # warps by broadcast 16-byte shared loads and a fixed add tree, not shuffles
    # (_row_sum2_direct; same bits). The fp16 LayerNorm backward's row kernel at N =
    # 4096 (8 warps) stalls on MIO (ncu, H200, twenty-sixth session); per warp and row
    # this trades 10 SHFL + 2 LDS for 4 LDS.128. v32: None (the default) takes it for
    # 16-bit rows of 8 or 16 warps (_RED_DIRECT_DEFAULT), True for any of
    # RED_DIRECT_WARPS, False never. H200, M x N = 2^26, us, shuffles / direct, two
    # passes each: fp16 LayerNorm 4096 118.1, 117.6 / 117.3, 117.8; 8192 123.5, 123.0 /
    # 122.4, 121.9; bf16 4096 117.5, 117.7 / 117.0, 117.6; RMSNorm fp16 4096 113.3,
    # 113.2 / 111.4, 111.4; 8192 117.4, 116.4 / 115.0, 116.3; float32 LayerNorm 4096
    # (16 warps) 220.1, 219.8 / 219.8, 219.4, within the spread, so not taken there.
    # v41: only on rows with w. Forty-seventh session, H200, affine_share, A/B/B/A
    # medians, 16384 x 4096 default / False: rows without w RMSNorm fp16 104.9 /
    # 99.8 (bf16 104.6 / 99.9), LayerNorm neither 102.1 / 100.1, b alone 108.2 /
    # 106.7; with w within 0.5 or slower with shuffles (LayerNorm w 113.4 / 113.4, w
    # and b 114.7 / 114.6, bf16 RMSNorm w 112.5 / 113.2); 8192 x 8192 without w -0.3 to
    # -1.1, with w +0.3 to +0.9.
    "bwd_red_direct": None,
    # Backward, 16-bit rows longer than the row kernels hold (more than bwd_lean_min
    # groups, None: 2 * _FAT_BLOCK, i.e. N > 8192) and at most 2 max_tpr groups: the
    # lean wide kernel (v13, make_lean_backward_kernel), with its next-row prefetch
    # unless bwd_lean_prefetch is False. H100, M x N = 2^26: fp16 N = 12288 243.5 ->
    # 165.4 us, 16384 236.0 -> 175.8, bf16 267.2 -> 164.8 / 259.0 -> 175.9 (without
    # the prefetch 188-191); at N = 8192 (bwd_lean_min 0) 157.9 -> 167.2 against the
    # v12 row kernel, hence the row kernels up to 1024 groups.
    "bwd_lean": True,
    # The same for float32 rows of N = 4100-8192 (v15): True, in place of the wide2
    # kernel without a prefetch (8192) and the streaming one (5120). H100, M x N = 2^26,
    # lock / partials: N = 5120 431.2 / 430.8 -> 288.5 / 288.4 us, 8192 315.1 / 315.2
    # -> 289.3 / 290.0 (without the prefetch 359.2 / 318.8). None (v44, the default):
    # only rows the wide2 kernel does not hold (_bwd_wide_words), so N = 7940-8192
    # (1985-2048 groups: 1024 threads of two) go back to wide2 (measured at 8192).
    # H200 (forty-ninth session, 8192 x 8192, us, lean / wide2, the mean of two
    # processes' medians): LayerNorm w and b 223.5 / 206.1, w 215.1 / 202.0, b 206.9
    # / 201.0, neither 201.3 / 195.5; RMSNorm w 214.0 / 202.4, neither 200.8 / 194.7.
    # v15's H100 verdict was measured before v42, when the wide2 kernel's 32 KB of
    # shared w ran in the 233 KB carveout.
    "bwd_lean_f32": None,
    "bwd_lean_min": None,
    "bwd_lean_prefetch": True,
    # Backward, float32: rows of max_tpr / 2 to 2 max_tpr groups whose rows of two
    # groups a thread fill the SM's 1024 threads (512 or 1024 threads a row) in
    # kernels compiled for 1024 threads, without the prefetch (v10b, v10c; H100,
    # bench/notes_layer_norm.md: N = 8192 0.404 -> 0.318 ms, N = 4096 0.353 -> 0.289;
    # at N = 5120, 640 threads a row, one row an SM, 0.342 -> 0.356, not taken).
    "bwd_wide2": True,
    # bwd_wide2 for rows of more than this many groups (None: max_tpr / 2).
    "bwd_wide2_min": None,
    # Backward, streaming over several column chunks: the rows' c1, c2 from a pass of
    # their own (make_bwd_stats_kernel) instead of every chunk's block reading the
    # whole row for them (v11). None: 16-bit rows (H100, 1024 x 65536: fp16 / bf16
    # 0.346 / 0.363 -> 0.318 / 0.320 ms; float32 0.527 -> 0.547, not taken) and, since
    # v45, float32 rows with w. H200 (forty-ninth session, float32 1024 x 65536, us,
    # without / with the pass, the mean of two processes' medians): LayerNorm w and b
    # 460.0 / 408.5, w 398.5 / 379.0, RMSNorm w 391.8 / 378.5; b alone 349.2 / 357.7
    # (slower, so not there).
    "bwd_stats_pass": None,
    # Forward: the lean row kernel (raw words, w and b from global memory; None: where
    # _fwd_lean measured it faster); fwd_words forces the forward row kernels' groups
    # per thread (None: the layout functions' pick).
    "fwd_lean": None,
    "fwd_words": None,
    # Forward, lean kernel: load w and b into registers with the row's x, before the
    # reductions, and store mean / rstd ahead of y (fwd_early); on a grid of a block
    # per pass of row slots, compiled to take one row a slot and stop, without the
    # grid-stride loop's state (fwd_once). None: where _fwd_early_once measured them
    # faster (v26).
    "fwd_early": None,
    "fwd_once": None,
    # Forward: the plain kernel (make_plain_forward_kernel at _plain_layout's layout)
    # where True, never where False; None: v27 / v28's picks (_fwd_plain).
    "fwd_plain": None,
    # The plain kernel's layout, (words, rpb): words 16-byte groups a thread, rpb rows
    # a block, the row's threads whatever that leaves (a whole number of warps, or 8
    # / 16: sub-warp rows, slots in whole warps), in place of _plain_layout's; None:
    # _plain_layout's.
    "fwd_plain_layout": None,
    # The plain kernel compiled with launch bounds (block, this): ptxas fits this many
    # blocks an SM (opt-in candidate, twenty-fourth session: float32 LayerNorm's
    # corrected kernel takes 68-79 registers, one to three blocks an SM); None: none
    # up to 512 threads, (block, 1) above.
    "fwd_plain_min_blocks": None,
    # The plain kernel in inductor's two-loop shape: x read again from L1 for y, not
    # held across the reductions (make_plain_forward_kernel's reload: True, "word", or
    # "l2" with inductor's L2 cache policies; opt-in candidates, sixty-first and
    # sixty-third sessions).
    "fwd_plain_reload": False,
    # The plain kernel's carveout preference (percent, launch.Kernel.prefer_carveout;
    # -1: the driver's choice); None: v56's rule (_plain_carveout).
    "fwd_plain_carveout": None,
    # v60 candidate (sixty-fourth session, opt-in until a sweep runs it): the rows of
    # _PLAIN_RELOAD_L2 take the plain kernel's two-read form with inductor's cache
    # policies (fwd_plain_reload "l2") at the table's carveout preference.
    "fwd_plain_reload_rows": False,
    # v62 (sixty-fifth session; shipped at its rows in the sixty-eighth): the plain
    # kernel's statistics stored a block's rows at a time (make_plain_forward_kernel's
    # stats_block). None: at _PLAIN_STATS_BLOCK's rows and layouts; True: wherever it
    # writes them at two rows a block or more; False: row by row everywhere.
    "fwd_plain_stats_block": None,
    # v63 (sixty-sixth session; on since the sixty-eighth): the plain kernel at widths
    # in v61's range that no exact layout splits (16-bit LayerNorm 1152, 1600, 4544,
    # 6656, 8768; float32 1600, 4544), its last word checked (make_plain_forward_
    # kernel's checked, _plain_checked_splits). H100, us, lean kernel -> checked (torch.
    # compile): fp16 LayerNorm 1152 133.1 -> 91.2 (222.9), 1600 148.2 -> 91.2 (164.9),
    # 4544 95.6 -> 92.5 (132.2), 6656 121.0 -> 92.0 (109.9), 8768 96.6 -> 92.4 (110.7);
    # float32 LayerNorm 1600 266.5 -> 183.3 (210.3), 4544 183.9 -> 183.2 (182.7);
    # float32 RMSNorm 1600 215.3 -> 182.0 (180.5), 4544 182.9 -> 182.1 (181.2).
    "fwd_plain_checked": True,
    # v64 (sixty-ninth session, H100): with fwd_plain_checked, the classes of
    # _PLAIN_OFFGRID_CHECKED_ONLY (16-bit RMSNorm) take the checked kernel at rows no
    # exact layout splits where the lean kernel would run one group a thread (lean ->
    # checked, us: fp16 1152 94.8 -> 90.6, 1600 98.0 -> 94.5, 3200 103.2 -> 93.6).
    "fwd_plain_checked_only": True,
    # Forward, lean kernel: 40 compiles float32 exact-layout kernels of two groups a
    # thread in blocks of 256 or 512 threads with launch bounds that cap ptxas at 40
    # registers (6 blocks of 256 or 3 of 512 an SM; at their own 48 registers 5 or
    # 2), for more rows resident, and float32 rows whose two-group blocks get those
    # bounds take two groups (_lean_layout; N = 1024 / 2048 / 4096). H100, two passes
    # each: 184.1 / 184.7 / 184.0 us -> 183.2 / 182.7 / 182.0 (two groups uncapped
    # at 4096: 206). v21: 16-bit RMSNorm rows of N = 1024 / 2048 / 4096 likewise take
    # two groups in blocks of 256 at 48 registers, 5 blocks an SM (fp16, two passes:
    # 95.1 / 95.8, 95.2 / 95.2, 95.4 / 95.4 us -> 94.1 / 94.1, 93.9 / 94.6, 93.7 /
    # 93.9); v23: 16-bit RMSNorm N = 5120 (4 blocks of 320 at 48 registers) and fp16
    # RMSNorm N = 8192 / 12288 (40 registers: 3 blocks of 512, 2 of 768), two passes:
    # fp16 95.7 / 95.6, 95.8 / 95.8, 95.2 / 95.0 -> 93.4-94.0, 94.2 / 94.5, 94.2 /
    # 94.0; bf16 N = 5120 95.6 / 95.3 -> 93.4-93.9. v24: 16-bit LayerNorm N = 1024 /
    # 2048 take two groups in one-row blocks (64 / 128 threads) at 48 registers
    # (fp16, s21_b / s21_c: 95.4-96.1 -> 94.4-95.1, 95.6-96.0 -> 94.2-94.5); v25:
    # 16-bit N = 512 two groups, a warp a row, eight rows a block at 48 registers (0.5
    # us on average, LayerNorm and RMSNorm). None: four groups there, no cap.
    # Only 40 (the value that names these caps; each entry of _LEAN_CAPS compiles
    # without spills); see _lean_cap and _lean_bounds.
    "fwd_lean_regs": 40,
    # Forward, lean kernel (opt-in, for A/Bs): launch bounds of the launched block and
    # fwd_lean_tpsm // block blocks an SM, so ptxas fits that many threads an SM in
    # the registers (2048: 32 registers, 1536: 40). Overrides fwd_lean_regs; not for
    # sub-warp rows. Twentieth session, H100, M x N = 2^26: one group a thread at
    # inductor's occupancy (2048 threads an SM; 1536 for 16-bit LayerNorm, which
    # spills 20 bytes at 32 registers) is slower everywhere (fp16 LayerNorm N =
    # 1024-4096 95.6-96.4 -> 112-125 us, float32 182-183 -> 183-310); two groups at
    # 1280-1536 gave RMSNorm v21 / v23 (_LEAN_CAPS) and, in blocks of several rows,
    # LayerNorm nothing (in one-row blocks: v24).
    "fwd_lean_tpsm": None,
    # Forward, lean kernel: fewer groups a thread for 16-bit batches that one wave of
    # resident threads holds (v22, see _wave_words); False: the layout's own pick.
    "fwd_wave": True,
    # Forward, streaming LayerNorm kernel: the row's statistics in one pass (Chan's
    # merge of chunk means and squared deviations) instead of two, two reads of the
    # row instead of three (v14; inductor's kernels make two passes, Welford then the
    # normalisation). None: 16-byte rows (by default only the long ones stream:
    # float32 N >= 65536, 16-bit past the staged kernel's 96K); the scalar rows keep
    # three passes (not measured; at float32 N = 16384 forced to stream over 512
    # threads, where the row stays in cache, welford was slower: 203.4 -> 213.9 us).
    # H100, float32 1024 x 65536: 315.1 / 316.1 -> 298.8 us (fwd_blocks_per_sm 1:
    # 295.5; inductor 278-280).
    "fwd_welford": None,
    # Forward: every row through the streaming kernel (inductor's LayerNorm forwards
    # are all of that shape, two loops over the row, 32-48 registers). Measured
    # slower everywhere (H100, M x N = 2^26, us, shipped -> streaming over 1024 / 512
    # threads): float32 N = 4096 182.3 -> 285.9 / 286.7, 16384 199.3 -> 239.8 /
    # 213.9; fp16 4096 95.7 -> 255.9 / 256.7, 16384 95.6 -> 200.7 / 151.6.
    "fwd_stream": False,
    # Forward, streaming kernel: threads a row (None: _stream_tpr's, an unroll-group
    # chunk a thread within max_tpr) and launch bounds (that many threads, at least
    # fwd_stream_blocks blocks an SM, so ptxas caps the registers; None: the default
    # 1024 x 1). Candidates (opt-in until measured): v14 at float32 N = 65536 runs
    # 1024 threads of 48 registers, one block an SM; over 256 threads (5 an SM) it
    # measured 298.0 -> 291.4 us, inductor's kernel runs 4 blocks of 512 an SM.
    "fwd_stream_tpr": None,
    "fwd_stream_blocks": None,
    # Forward: the staged row kernel (_lean_forward's staged form: the row in shared
    # memory); None: where the lean kernel has no layout (see _fwd_staged).
    "fwd_staged": None,
    # Forward, staged kernel: up to this many groups a thread in registers besides
    # the 14 in shared memory, for rows past what the shared memory holds (v16: 2,
    # float32 N up to 65536, 16-bit up to 131072; at most _STAGED_REGS), the row read
    # once instead of streamed twice. H100, M x N = 2^26, us: float32 N = 65536
    # LayerNorm 298.6 / 299.2 -> 232.7 / 231.5 (inductor 278-281), RMSNorm 280.4 /
    # 280.2 -> 210.8 / 209.5; N = 131072 fp16 170.8 -> 120.8, bf16 186.1 -> 121.2.
    # 0: none (those rows stream).
    "fwd_staged_regs": _STAGED_REGS,
    # Row kernels are persistent: grid = SMs x resident blocks per SM (the driver's
    # occupancy for the kernel, block and shared memory), capped by these (None: no cap).
    "fwd_blocks_per_sm": None,
    "bwd_blocks_per_sm": None,
    # The lean forward on rows of 8 or 16 threads (several rows a warp, for short
    # rows: 16-bit N = 512 as 16 threads of 4 groups; H200, bench/notes_layer_norm.md
    # v9: 16-bit N = 256 / 512 0.072 / 0.072 ms against the row kernel's 0.086 / 0.075).
    "fwd_subwarp": True,
    # The lean forward: persistent too (True), or one pass of row slots per block
    # where _lean_block_per_row measured it faster (False: rows of fewer than 1024
    # threads, 5-16% on the H200 at N = 1024-8192, bench/notes_layer_norm.md v8; rows
    # of 1024 threads at four groups, v17 / v18).
    "fwd_lean_persistent": False,
    # Tests and benchmarks: force the forward (row kernels) / backward grid, the lock
    # scheme's buffer count.
    "fwd_grid": None,
    "bwd_grid": None,
    "group_size": None,
    # None: ask the device.
    "sm_count": None,
}
if SIMULATOR:
    # Simulated threads are Python threads: small blocks keep CI fast.
    _TUNING_DEFAULTS.update(fwd_block=64, bwd_block=64, bwd_threads_per_sm=64,
                            reduce_block=(8, 4), sm_count=2)
_tune = dict(_TUNING_DEFAULTS)


# v17 / v18: the lean forward's groups a thread at which rows of 1024 threads run a
# block per row (see _lean_block_per_row).
_BLOCK_PER_ROW_WORDS = 4


def _lean_block_per_row(tpr, words):
    """Whether the lean forward launches a block per pass of row slots (else a
    persistent grid): rows of fewer than 1024 threads always (v8); rows of 1024
    threads at four groups a thread (v17: float32 N = 12289-16384; v18: 16-bit N =
    24577-32768). H100, us, persistent -> a block per row: float32 4096 x 16384
    LayerNorm 199.0 / 199.9 -> 186.6 / 187.1, RMSNorm 198.3 / 198.0 -> 183.9 / 184.5
    (inductor's one-row blocks: ~181); 2048 x 32768 LayerNorm fp16 105.9 / 106.7 ->
    102.6-103.2, bf16 106.4 / 106.1 -> 102.7-103.3, RMSNorm fp16 / bf16 105.0 / 104.7
    -> 96.3-96.9. The lean kernel prefetches nothing, so a
    persistent grid buys it nothing; the row kernel, which prefetches the next row of
    its grid-stride loop, keeps its persistent grid (float32 5461 x 12288, three
    groups of 1024 threads: 189.3 persistent, 250.0 with a block per row)."""
    return tpr < _MAX_BLOCK or words == _BLOCK_PER_ROW_WORDS


@contextlib.contextmanager
def tuning(**overrides):
    """Temporarily override the launch heuristics (for tests and benchmarks).

    Keys: bwd_scheme ("partials" | "lock": the dW/dB scheme of
    deterministic=False), max_tpr (multiple of 32, <= 1024), fwd_block, bwd_block
    (None: _bwd_block's pick, v39),
    bwd_threads_per_sm, fit_carveout (bool: persistent kernels over the default
    shared-memory cap prefer the carveout holding their resident blocks; v48),
    sacc_bytes (0: no shared-memory accumulators in the
    streaming backward), bwd_global_dw (bool: the streaming backward of rows
    with w alone keeps dw in global memory; v46's default until v48), bwd_wide2,
    bwd_wide2_min, bwd_stats_pass (None, bool: None, 16-bit rows and, v45, float32
    rows with w), bwd_one_row, bwd_red_direct,
    bwd_lean, bwd_lean_f32 (None, bool: None, v44, where the wide2 kernel does not
    hold the row), bwd_lean_min, bwd_lean_prefetch,
    reduce_block ((cols, rows), each <= 32), dwdb_unroll (4, 8, 16), dwdb_min_blocks
    (1, 2: the dW/dB reduction's launch bounds, blocks an SM), bwd_min_blocks (the
    row kernels' launch bounds, blocks an SM), bwd_stages (0, 2, 3, 4: the row
    kernels' cp.async ring of row buffers), bwd_w_regs (None, bool: the row kernels
    keep w in registers; None: 16-bit rows of two or more groups a thread, v38),
    bwd_row_bar (None, bool: a named barrier a row in row kernels of several rows of
    several warps a block; None: 16-bit rows, v39), bwd_pdl (bool: the dW/dB
    reduction as a dependent launch of the row kernels, sm_90), bwd_rms_sum1 (None, bool:
    RMSNorm's backward reduces its one row sum, not a pair; v37), bwd_grid (force the
    backward grid; a block per row reproduces the seed's per-row locking),
    group_size (force the lock scheme's GROUP_SIZE_M), sm_count, and the forward's:
    fwd_lean, fwd_words, fwd_early, fwd_once, fwd_plain, fwd_plain_layout
    ((words, rows a block) of the plain kernel), fwd_plain_min_blocks (its launch
    bounds' blocks an SM), fwd_plain_reload (bool, "word" or "l2": x read again from
    L1 for y, not held; "word": y's pass word by word; "l2": with inductor's L2 cache
    policies), fwd_plain_carveout (its carveout preference, percent; -1: the driver's
    choice), fwd_plain_reload_rows
    (bool: v60's rows, _PLAIN_RELOAD_L2, read x twice with L2 policies),
    fwd_plain_stats_block (None, bool: the statistics stored a block's rows at a time;
    None: at v62's rows),
    fwd_plain_checked (bool: the plain kernel where no exact layout splits the row),
    fwd_plain_checked_only (bool: that too for 16-bit RMSNorm where the lean kernel
    would run one group a thread, v64),
    fwd_lean_regs, fwd_lean_tpsm, fwd_wave, fwd_welford, fwd_stream, fwd_stream_tpr,
    fwd_stream_blocks, fwd_staged, fwd_staged_regs, fwd_grid, fwd_blocks_per_sm,
    fwd_lean_persistent, fwd_subwarp.
    """
    unknown = set(overrides) - set(_TUNING_DEFAULTS)
    if unknown:
        raise TypeError(f"unknown tuning keys {sorted(unknown)}")
    for key in ("max_tpr", "fwd_stream_tpr"):
        tpr = overrides.get(key, _tune[key])
        if key != "max_tpr" and tpr is None:
            continue
        if not (isinstance(tpr, int) and 32 <= tpr <= _MAX_BLOCK and tpr % 32 == 0):
            raise ValueError(f"{key} must be a multiple of 32 in [32, {_MAX_BLOCK}], got {tpr!r}")
    sr = overrides.get("fwd_staged_regs", _tune["fwd_staged_regs"])
    if not (isinstance(sr, int) and 0 <= sr <= _STAGED_REGS):
        raise ValueError(f"fwd_staged_regs must be an int in [0, {_STAGED_REGS}], got {sr!r}")
    sb = overrides.get("fwd_stream_blocks", _tune["fwd_stream_blocks"])
    if sb is not None and not (isinstance(sb, int) and 1 <= sb <= 32):
        raise ValueError(f"fwd_stream_blocks must be None or an int in [1, 32], got {sb!r}")
    scheme = overrides.get("bwd_scheme", _tune["bwd_scheme"])
    if scheme not in ("partials", "lock"):
        raise ValueError(f"bwd_scheme must be 'partials' or 'lock', got {scheme!r}")
    ts = overrides.get("fwd_lean_tpsm", _tune["fwd_lean_tpsm"])
    if ts is not None and not (isinstance(ts, int) and 32 <= ts <= 2048 and ts % 32 == 0):
        raise ValueError("fwd_lean_tpsm must be None or a multiple of 32 in [32, 2048], "
                         f"got {ts!r}")
    pl = overrides.get("fwd_plain_layout", _tune["fwd_plain_layout"])
    if pl is not None and not (isinstance(pl, (tuple, list)) and len(pl) == 2
                               and all(isinstance(v, int) for v in pl)
                               and 1 <= pl[0] <= 8 and 1 <= pl[1] <= 32):
        raise ValueError("fwd_plain_layout must be None or (words in [1, 8], rows a block "
                         f"in [1, 32]), got {pl!r}")
    mb = overrides.get("fwd_plain_min_blocks", _tune["fwd_plain_min_blocks"])
    if mb is not None and not (isinstance(mb, int) and 1 <= mb <= 32):
        raise ValueError(f"fwd_plain_min_blocks must be None or an int in [1, 32], got {mb!r}")
    rl = overrides.get("fwd_plain_reload", _tune["fwd_plain_reload"])
    if not (isinstance(rl, bool) or rl in ("word", "l2")):
        raise ValueError(f"fwd_plain_reload must be a bool, 'word' or 'l2', got {rl!r}")
    pc = overrides.get("fwd_plain_carveout", _tune["fwd_plain_carveout"])
    if pc is not None and (isinstance(pc, bool) or not isinstance(pc, int)
                           or not -1 <= pc <= 100):
        raise ValueError(f"fwd_plain_carveout must be None or an int in [-1, 100], got {pc!r}")
    for key in ("fwd_plain_reload_rows", "fwd_plain_checked", "fwd_plain_checked_only"):
        if not isinstance(overrides.get(key, _tune[key]), bool):
            raise ValueError(f"{key} must be a bool, got {overrides[key]!r}")
    psb = overrides.get("fwd_plain_stats_block", _tune["fwd_plain_stats_block"])
    if not (psb is None or isinstance(psb, bool)):
        raise ValueError(f"fwd_plain_stats_block must be None or a bool, got {psb!r}")
    lr = overrides.get("fwd_lean_regs", _tune["fwd_lean_regs"])
    if lr not in (None, _LEAN_REGS):
        raise ValueError(f"fwd_lean_regs must be None or {_LEAN_REGS}, got {lr!r}")
    du = overrides.get("dwdb_unroll", _tune["dwdb_unroll"])
    if du not in DWDB_UNROLLS:
        raise ValueError(f"dwdb_unroll must be one of {DWDB_UNROLLS}, got {du!r}")
    bm = overrides.get("bwd_min_blocks", _tune["bwd_min_blocks"])
    if bm is not None and not (isinstance(bm, int) and 1 <= bm <= 32):
        raise ValueError(f"bwd_min_blocks must be None or an int in [1, 32], got {bm!r}")
    for key in ("bwd_w_regs", "bwd_row_bar", "bwd_rms_sum1"):
        v = overrides.get(key, _tune[key])
        if not (v is None or isinstance(v, bool)):
            raise ValueError(f"{key} must be None or a bool, got {v!r}")
    for key in ("bwd_global_dw", "bwd_pdl", "fit_carveout"):
        v = overrides.get(key, _tune[key])
        if not isinstance(v, bool):
            raise ValueError(f"{key} must be a bool, got {v!r}")
    bb = overrides.get("bwd_block", _tune["bwd_block"])
    if bb is not None and not (isinstance(bb, int) and not isinstance(bb, bool) and bb >= 1):
        raise ValueError(f"bwd_block must be None or a positive int, got {bb!r}")
    bs = overrides.get("bwd_stages", _tune["bwd_stages"])
    if bs not in BWD_STAGES or isinstance(bs, bool):
        raise ValueError(f"bwd_stages must be one of {BWD_STAGES}, got {bs!r}")
    dm = overrides.get("dwdb_min_blocks", _tune["dwdb_min_blocks"])
    if dm not in DWDB_MIN_BLOCKS:
        raise ValueError(f"dwdb_min_blocks must be one of {DWDB_MIN_BLOCKS}, got {dm!r}")
    rb = overrides.get("reduce_block", _tune["reduce_block"])
    if not (len(rb) == 2 and all(isinstance(v, int) and 1 <= v <= 32 for v in rb)):
        raise ValueError(f"reduce_block must be two ints in [1, 32], got {rb!r}")
    saved = dict(_tune)
    _tune.update(overrides)
    try:
        yield
    finally:
        _tune.clear()
        _tune.update(saved)


def group_size_m(n):
    """The seed's GROUP_SIZE_M (lock-scheme partial buffers) for rows of length n."""
    if n <= 1024:
        return 256
    if n <= 4096:
        return 128
    if n <= 8192:
        return 96
    return 64


def _persistent_grid(kernel, arr, threads, shared, units, force, cap):
    """Grid of a persistent row kernel: ``units`` (row blocks) at most, else SMs x
    resident blocks per SM (at most ``cap`` per SM); ``force`` overrides. With
    ``fit_carveout`` (v48), a kernel whose shared memory is over the default cap
    prefers the carveout that holds just those blocks (launch.Kernel.fit_carveout)."""
    if force is not None:
        return max(1, min(units, int(force)))
    per_sm = _blocks_per_sm(kernel, arr.device, threads, shared, cap, _tune["fit_carveout"])
    return max(1, min(units, _sm_count(arr) * per_sm))


@functools.lru_cache(maxsize=4096)
def _blocks_per_sm(kernel, device, threads, shared, cap, fit):
    # Keyed by the device, not the array: v2 to v47 cached the whole grid on the
    # KernelArray, a new key for every call that kept each caller's x / dy alive
    # (fifty-first session).
    per_sm = kernel.resident_blocks(threads, shared, device)
    if cap is not None:
        per_sm = min(per_sm, int(cap))
    if fit and shared:
        _fit_carveout(kernel, device, threads, shared, per_sm)
    return per_sm


@functools.lru_cache(maxsize=4096)
def _fit_carveout(kernel, device, threads, shared, blocks):
    # Once per plan: fit_carveout asks the driver.
    return kernel.fit_carveout(threads, shared, blocks, device)


def _sm_count(arr):
    # Not cached here (launch.sm_count is, per device): v1 cached on the array object,
    # which kept every grad_out it saw alive and ignored later tuning(sm_count=...).
    if _tune["sm_count"] is not None:
        return int(_tune["sm_count"])
    return sm_count(arr.device)


def _round_warp(v):
    return cdiv(v, WARP) * WARP


def _fat(direction, vec, words):
    """Whether the row kernel holds so many values per thread that it is compiled for
    blocks of at most _FAT_BLOCK threads (more registers per thread). The load is
    counted in 32-bit registers: raw 16-byte groups in flight (x; bwd: x and dy)
    plus float32 values (x; bwd: xhat, w*dy, and the dw, db accumulators)."""
    elems = words * vec
    if direction == "fwd":
        load = 4 * words + elems
    else:
        load = 8 * words + 4 * elems
    return load > _FAT_LOAD[direction]


# v30 (twenty-sixth session, H200): backward row kernels that by default load each
# row when they reach it, no prefetch of the next, (dtype class, rms, 16-byte groups a
# row). M x N = 2^26, us, prefetch / none, each pass (bench/ab/pending_s26.sh b,
# s26_d.sh, s26_e.sh): float32 LayerNorm N = 512 225.6, 225.5 / 215.5, 215.7 (105 ->
# 77 registers: 4 -> 6 blocks of 128 an SM); float32 RMSNorm N = 512 218.7, 218.9,
# 216.5, 216.6 / 213.6, 213.9, 212.5, 211.4; 16-bit RMSNorm N = 512 fp16 113.6, 114.1
# / 112.4, 112.5, bf16 114.4, 113.8 / 113.1, 112.7. Slower or even elsewhere: float32
# LayerNorm N = 768 / 1024 +1.5 / +2.4, 4096 / 8192 even; float32 RMSNorm N = 768
# -0.6, 2048 +2.3, 4096-8192 even; 16-bit LayerNorm N = 512 +2.8, 768 +13; 16-bit
# RMSNorm N = 768 +8; fp16 LayerNorm N = 4096 +15. At blocks of fewer than _FAT_BLOCK
# threads only (v65: _bwd_prefetch).
_BWD_NO_PREFETCH = frozenset({("float32", False, 128), ("float32", True, 128),
                              ("16-bit", True, 64)})


def _bwd_prefetch(dtype, rms, groups, vector=True, threads=128):
    """Whether the backward row kernels load the next row before reducing the current
    one, for ``dtype`` rows of ``groups`` 16-byte groups (``rms``: RMSNorm; ``vector``
    False: scalar rows, always) in blocks of ``threads``: tuning's prefetch where set,
    else all but _BWD_NO_PREFETCH's rows in blocks of fewer than _FAT_BLOCK threads.
    v30 dropped the prefetch there to fit more blocks of 128 an SM; v65's float32
    blocks of _FAT_BLOCK threads are one an SM either way, and without the prefetch
    their 16 warps keep too few loads in flight (H100, float32 N = 512, 512 threads, us:
    RMSNorm 304.8 without / 279.6 with, LayerNorm 306.4 / 280.8)."""
    pf = _tune["prefetch"]
    if pf is not None:
        return bool(pf)
    return not (vector and threads < _FAT_BLOCK
                and (_dtype_class(dtype), bool(rms), groups) in _BWD_NO_PREFETCH)


def _row_layout(n, vec, direction, m=1):
    """(words, tpr): register groups per thread (0 = streaming kernel) and threads
    per row. Prefers no idle lanes, then the most values per thread (the per-row
    reductions and bookkeeping are spread over more values). Layouts that would need
    more threads than their kernel allows are skipped; rows too long for any layout,
    and more than 2**30 rows (row indices are 32-bit), stream."""
    ng = n // vec
    max_tpr = _tune["max_tpr"]
    best = None
    forced = _tune["fwd_words"] if direction == "fwd" else None
    wide = _bwd_wide_words(ng, vec) if direction == "bwd" else 0
    if wide:
        forced = wide
    if vec > 1 and m < 2**30:
        for words in ((forced,) if forced else _WORDS[(direction, vec)]):
            tpr = _round_warp(cdiv(ng, words))
            fat = _fat(direction, vec, words) and not wide
            narrow = fat or (direction == "bwd" and not wide)
            if tpr > (min(max_tpr, _FAT_BLOCK) if narrow else max_tpr):
                continue
            if fat and tpr * words != ng:
                continue  # fat kernels are shipped for exact layouts only
            key = (tpr * words - ng, -words)
            if best is None or key < best[0]:
                best = (key, words, tpr)
    if best is not None:
        return best[1], best[2]
    return 0, _stream_tpr(ng, vec)


def _stream_bounds(tpr):
    """Launch bounds of the streaming forward kernel over ``tpr`` threads a row:
    ``(tpr, fwd_stream_blocks)`` under tuning's fwd_stream_blocks (ptxas then fits
    that many blocks an SM in the registers), else None (the default 1024 x 1)."""
    blocks = _tune["fwd_stream_blocks"]
    return None if blocks is None else (tpr, int(blocks))


def _stream_tpr(ng, vec):
    """Threads a row of the streaming kernels for rows of ``ng`` groups of ``vec``:
    one ``unroll``-group chunk a thread, within ``max_tpr``."""
    return min(_tune["max_tpr"], _round_warp(cdiv(ng, _UNROLL[vec])))


# Lean forward row kernels (_lean_forward): groups per thread they are built for.
_LEAN_WORDS = (1, 2, 3, 4)
# The default takes the lean forward from this row length (the shortest measured,
# v9); shorter rows keep the row kernel.
_LEAN_MIN_N = 256
# v19: the longest float32 rows the lean forward takes (a block per row, four groups
# a thread) ahead of the row kernel (persistent, prefetching its next row), by op.
# H100, us, row kernel -> lean: RMSNorm N = 9216 192.6 / 194.2 -> 185.0, 10240 191.4
# / 191.1 -> 192.0, 11264 192.0 / 191.8 -> 187.2, 12288 194.6 / 194.0 -> 185.2;
# LayerNorm N = 9216 191.8 / 191.7 -> 185.2 (576 threads, two blocks an SM), but 10240
# 189.7 / 191.0 -> 206.0, 11264 189.4 / 189.7 -> 198.2, 12288 190.4 / 189.9 -> 193.6
# (640-768 threads of 56 registers: one block an SM).
_LEAN_F32_MAX_N = {False: 9216, True: 12288}


def _fwd_lean(n, vec, rms=False):
    """Whether the forward takes the lean row kernel for rows of n (16-byte groups of
    vec; ``rms``: RMSNorm): tuning's ``fwd_lean``; None picks by the A/Bs of
    2026-11-25 (H100, v5) and 2026-11-26 (H200, v8 and v9; bench/notes_layer_norm.md):
    16-bit rows of N >= 256, float32 rows of 256 <= N <= 8192 (v8, N >= 1024: 4 groups
    a thread, one pass of row slots a block: 0.071-0.076 ms at 16-bit, 0.134-0.137 at
    float32, against the row kernel's 0.076-0.086 / 0.148-0.151; v9, N < 1024:
    sub-warp rows where they fit, fp16 N = 256-768 0.072-0.074 against 0.075-0.086,
    float32 N = 256 / 512 0.136 / 0.135 against 0.142 / 0.141), float32 rows up to
    :data:`_LEAN_F32_MAX_N` (v19), and rows the row kernel would stream (float32 N =
    16384)."""
    lean = _tune["fwd_lean"]
    if (lean is not None and not lean) or _lean_layout(n, vec)[0] == 0:
        return False
    if lean is not None or _row_layout(n, vec, "fwd")[0] == 0:
        return True
    return n >= _LEAN_MIN_N and (vec == 8 or n <= _LEAN_F32_MAX_N[bool(rms)])


# Dynamic shared memory the staged forward may take for one row (16-bit N = 65536
# needs 128 KiB; the H100 allows 227 KiB a block).
_STAGED_BYTES = 200 * 1024


def _fwd_staged(n, vec, limit=None):
    """Whether the forward takes the staged row kernel for rows of n: where its layout
    fits (:func:`_staged_layout`, ``limit`` as there) and tuning's ``fwd_staged`` is True (ahead of the lean
    kernel: the A/B of the two at one layout) or None and the lean kernel has no
    layout. Measured 2026-11-26 (H200, bench/notes_layer_norm.md v6): 16-bit N = 65536
    0.098 ms against the streaming kernel's 0.159-0.178 (inductor 0.121), N = 49152
    0.098 against 0.165-0.188; float32 N = 32768 0.163 against 0.199; but at 16-bit
    N = 32768, where the lean kernel fits, 0.120 against its 0.088."""
    staged = _tune["fwd_staged"]
    if staged is not None and not staged:
        return False
    if _staged_layout(n, vec, limit)[0] == 0:
        return False
    return bool(staged) or _lean_layout(n, vec)[0] == 0


# fwd_lean_regs: the value that turns on the register caps of _LEAN_CAPS.
_LEAN_REGS = 40
# The capped lean layouts, keyed (dtype, words, threads a row, rms): (rows a block,
# blocks an SM); the launch bounds are (rows a block x threads a row, blocks an SM).
# Float32 (fifteenth / sixteenth sessions): N = 1024 / 2048 / 4096 at 40 registers.
# v21: 16-bit RMSNorm N = 1024 / 2048 / 4096 in blocks of 256 threads at 48 registers
# (5 blocks an SM); v23: the same at N = 5120 (blocks of 320, 4 an SM), and fp16's at
# N = 8192 / 12288 at 40 (one-row blocks, 3 / 2 an SM), where bf16 RMSNorm with w
# spills 4 bytes and gained 0.6 / 0 us. v24: 16-bit LayerNorm N = 1024 / 2048 in
# one-row blocks at 48 registers (20 / 10 an SM). v25: 16-bit N = 512, a warp a row,
# eight rows a block at 48 registers (5 an SM).
_LEAN_CAPS = {
    ("float32", 2, 128, False): (2, 6), ("float32", 2, 256, False): (1, 6),
    ("float32", 2, 512, False): (1, 3), ("float32", 2, 128, True): (2, 6),
    ("float32", 2, 256, True): (1, 6), ("float32", 2, 512, True): (1, 3),
    ("float16", 2, 64, True): (4, 5), ("bfloat16", 2, 64, True): (4, 5),
    ("float16", 2, 128, True): (2, 5), ("bfloat16", 2, 128, True): (2, 5),
    ("float16", 2, 256, True): (1, 5), ("bfloat16", 2, 256, True): (1, 5),
    ("float16", 2, 320, True): (1, 4), ("bfloat16", 2, 320, True): (1, 4),
    ("float16", 2, 512, True): (1, 3), ("float16", 2, 768, True): (1, 2),
    ("float16", 2, 64, False): (1, 20), ("bfloat16", 2, 64, False): (1, 20),
    ("float16", 2, 128, False): (1, 10), ("bfloat16", 2, 128, False): (1, 10),
    ("float16", 2, 32, False): (8, 5), ("bfloat16", 2, 32, False): (8, 5),
    ("float16", 2, 32, True): (8, 5), ("bfloat16", 2, 32, True): (8, 5),
}


def _lean_cap(dtype, words, tpr, full, rms=False):
    """(rows a block, blocks an SM) of the capped lean layout for ``dtype`` rows of
    ``tpr`` threads of ``words`` groups (:data:`_LEAN_CAPS`), exact rows (``full``)
    under tuning's ``fwd_lean_regs`` (40, the default); else None."""
    if dtype is None or _tune["fwd_lean_regs"] is None or not full:
        return None
    return _LEAN_CAPS.get((dtype, words, tpr, bool(rms)))


def _lean_bounds(dtype, tpr, rpb, words, full, rms=False):
    """Launch bounds of the lean forward kernel (two-pass statistics, rows of a warp or
    more) for ``dtype`` rows of ``tpr`` threads, ``rpb`` rows a block and ``words``
    groups a thread; None: the default ``_JIT`` bounds (1024 threads, 1 block).
    Where :func:`_lean_cap` has the layout at this many rows a block, its bounds cap
    ptxas (each entry compiles without spills): float32 rows of two groups at 40
    registers (6 blocks of 256 or 3 of 512 an SM; H100, fifteenth and sixteenth
    sessions: N = 4096 184.0 -> 182.0 us, N = 2048 184.7 -> 182.7); 16-bit RMSNorm at
    48 / 40 (v21, v23); 16-bit LayerNorm N = 1024 / 2048 at 48 in one-row blocks
    (v24); 16-bit N = 512 at 48 (v25). 16-bit LayerNorm kernels of two groups spill 8
    bytes at 40 (with w and b) and gain nothing at 48 in blocks of several rows of 64
    or more threads. tuning's ``fwd_lean_tpsm``, if set, takes over: ``(block,
    fwd_lean_tpsm // block)`` for every layout, ``block = tpr * rpb``."""
    block = tpr * rpb
    tpsm = _tune["fwd_lean_tpsm"]
    if tpsm is not None:
        return block, max(1, tpsm // block)
    cap = _lean_cap(dtype, words, tpr, full, rms)
    return (block, cap[1]) if cap and cap[0] == rpb else None


def _fwd_early_once(dtype, rms, words, tpr, lean, per_row):
    """(early, once) for the lean forward (make_forward_kernel's flags): tuning's
    fwd_early / fwd_once where set (once only on a grid of a block per pass of row
    slots, ``per_row``), else v26's picks: both for 16-bit RMSNorm and for 16-bit
    LayerNorm rows of 64 threads of two groups (N = 1024), neither elsewhere.

    Early loads w and b while x's loads are in flight instead of after the reductions
    (a round trip a group, each after the last group's y store), which the plain fp16
    LayerNorm of bench/ab/copy_ceiling.py found worth 1-1.3 us at two groups a thread;
    it needs 8 registers a group, which once (no loop state) frees. H100, M x N = 2^26,
    fp16, us, against the default bracketing it (bench/ab/s22_b.sh): RMSNorm N = 768
    94.9 / 94.8 -> 94.1, 5120 93.6 / 93.5 -> 92.9, 8192 94.2 / 94.2 -> 93.3, 12288
    94.1 / 93.9 -> 93.2, 16384 95.5 / 95.5 -> 93.6, N = 512-4096 within 0.3;
    LayerNorm N = 1024 95.5 / 95.2 -> 93.9 (but N = 512 / 2048 +0.3 / +0.5 us, with
    once alone +0.1-1 us). As the default against it off (s22_c.sh, fp16 / bf16):
    LayerNorm N = 1024 94.2, 94.2 / 94.0, 94.8 against 94.6 / 95.0; RMSNorm N = 768
    94.3, 94.3 / 94.3, 94.1 against 95.0 / 94.8, 8192 93.2, 93.3 / 93.7, 93.8 against
    94.4 / 95.2, 16384 93.7, 93.5 / 93.4, 93.7 against 95.3 / 95.6. Once alone at
    16-bit LayerNorm rows of four groups read 0.3-1.3 us faster in s22_b.sh and
    within noise in s22_c.sh (N = 8192 / 16384): not taken. Early without once spills
    at the 48 / 40-register caps (s22_a.sh: 110-130 us); float32 gains nothing from
    once (+-0.8 us)."""
    early, once = _tune["fwd_early"], _tune["fwd_once"]
    if early is None:
        early = dtype != "float32" and per_row and (rms or (words == 2 and tpr == 64))
    if once is None:
        once = early
    return bool(lean and early), bool(per_row and once)


# The forward's layout tunings: set away from their defaults, v27's picks step aside.
_FWD_LAYOUT_KEYS = ("fwd_lean", "fwd_words", "fwd_block", "fwd_early", "fwd_once",
                    "fwd_lean_regs", "fwd_lean_tpsm", "fwd_wave",
                    "fwd_grid", "fwd_blocks_per_sm",
                    "fwd_lean_persistent", "fwd_subwarp")


def _fwd_plain(dtype, rms, groups, vec, m, sms, stats=False):
    """Whether the forward runs the plain kernel for ``m`` rows of ``groups`` 16-byte
    words of ``vec`` on ``sms`` SMs (where _plain_layout has a layout): tuning's
    fwd_plain where set; else, with no other forward layout tuning set, v27's picks,
    where measured: 16-bit LayerNorm rows of 256-2048 groups (N = 2048-16384), float32
    RMSNorm rows of 128-256 (N = 512-1024); v28's (_PLAIN_V28: 16-bit LayerNorm N
    = 768; float32 LayerNorm, corrected, N = 512, 1024, 12288; float32 RMSNorm N =
    2048-16384) and v29's (_PLAIN_V29, H200: 16-bit LayerNorm N = 512 / 1024,
    RMSNorm N = 512 / 8192 / 12288; float32 LayerNorm N = 512-16384 but 5120 /
    12288, RMSNorm N = 16384) and v50's (_PLAIN_V50: 16-bit and float32 LayerNorm N
    = 8192 at eight words with w / b early); not batches one wave holds where v22 measured its
    fewer groups a thread (:func:`_wave_words`). The H100 rows below were measured
    before v29; on the H100, v29's 16-bit N = 512 sub-warp rows read within noise
    (s24_c.sh), its float32 LayerNorm N = 4096 mixed and N = 8192 / 16384 +0.5 to
    +3.8 us (without v29's bounds at 16384).

    H100, M x N = 2^26, us, default / plain, twice each alternating (bench/ab/s23_b.sh):
    LayerNorm fp16 N = 2048 94.6, 93.9 / 93.8, 93.8; 4096 95.3, 96.3 / 94.0, 94.0; 5120
    96.1, 95.9 / 94.2, 94.2; 8192 95.3, 96.0 / 93.7, 93.5; 12288 98.2, 97.3 / 97.3,
    96.8; 16384 96.0, 95.8 / 95.0, 94.9; bf16 the same within 0.5 (2048 94.3, 94.5 /
    93.4, 93.2; 5120 95.8, 95.9 / 93.5, 94.0). float32 N = 512 LayerNorm 184.8, 185.0
    / 182.3, 182.5, RMSNorm 184.0, 183.7 / 182.1, 182.4; 1024 183.3, 182.7 / 182.3,
    182.2 and 182.7, 182.6 / 182.1, 182.1. Not taken: 16-bit RMSNorm (v26 loads w early
    already; +0.8-1.0 at N >= 5120, even below), 16-bit LayerNorm N = 512-1024 (within
    0.5 either way), float32 N >= 2048 (even at v27's layouts; LayerNorm 8192 +1.2;
    v28 found other layouts for RMSNorm)."""
    plain = _tune["fwd_plain"]
    if plain is not None:
        return bool(plain)
    if (any(_tune[k] != _TUNING_DEFAULTS[k] for k in _FWD_LAYOUT_KEYS)
            or _wave_words(groups, vec, m, sms) is not None):
        return False
    if (_dtype_class(dtype), bool(rms), groups) in _PLAIN_PICKS:
        return True
    if _plain_offgrid(groups * vec, vec, rms, dtype, stats, bool(_tune["fwd_plain_checked"]),
                      _plain_checked_only(groups * vec, vec, rms, dtype)) is not None:
        return True
    if dtype == "float32":
        return rms and 128 <= groups <= 256
    return not rms and 256 <= groups <= 2048


def _fwd_welford(vector):
    """Whether the streaming LayerNorm forward takes its one-pass statistics (v14):
    tuning's ``fwd_welford``; None: 16-byte rows only."""
    wf = _tune["fwd_welford"]
    return bool(vector) if wf is None else bool(wf)


def _capped_words(ng, dtype, rms=False):
    """2 where :func:`_lean_cap` has exact rows of ``ng`` 16-byte groups of ``dtype`` at
    two groups a thread (float32 N = 1024, 2048, 4096; RMSNorm (``rms``) at 16-bit N
    = 1024, 2048, 4096 (v21), 5120 (v23) and at fp16 N = 8192, 12288 (v23); 16-bit
    LayerNorm N = 1024, 2048 (v24); 16-bit N = 512 (v25)), else None (the layout's own
    pick; also for ``dtype`` None)."""
    if ng % (2 * WARP):
        return None
    return 2 if _lean_cap(dtype, 2, ng // 2, True, rms) else None


def _lean_rows_per_block(dtype, words, tpr, rms, full, m):
    """Row slots a block of the lean forward (rows of ``tpr`` threads, ``words``
    groups a thread, ``m`` rows): :func:`_lean_cap`'s where it has the layout, else
    tuning's ``fwd_block // tpr``; at least 1, at most m.

    v24 (H100, M x N = 2^26, us, bench/notes_layer_norm.md): 16-bit LayerNorm of two
    groups a thread at 48 registers in one-row blocks (64 / 128 threads, 20 / 10 an
    SM) against the default four groups (32 x 8 / 64 x 4 threads at 64): fp16 N =
    1024 95.4-96.1 -> 94.4-95.1, N = 2048 95.6-96.0 -> 94.2-94.5; bf16 alike. In blocks
    of 256 (several rows, whose barriers then wait on each other) the same cap gained
    nothing (twentieth session); at 40 registers it spills and loses; RMSNorm's v21
    rows lose 0.5-1 us in one-row blocks. v25: 16-bit N = 512, a warp a row (no
    barrier), eight rows a block, against sub-warp rows of four groups at 64
    registers: 0.5 us faster on average over 14 on / off pairs of LayerNorm and
    RMSNorm (s21_e / s21_f: -1.2 to +0.3; e.g. bf16 LayerNorm 96.0-96.3 -> 94.9-96.3)."""
    cap = _lean_cap(dtype, words, tpr, full, rms)
    rpb = cap[0] if cap else max(1, _tune["fwd_block"] // tpr)
    return max(1, min(rpb, m))


# v22: a batch of 16-bit rows of N in this range that one wave of resident threads
# holds (at most _WAVE_THREADS threads an SM: the 56-64 registers of the lean
# kernels) takes fewer groups a thread (_wave_words).
_WAVE_N = (1024, 4096)
_WAVE_THREADS = 1024


def _wave_words(ng, vec, m, sms):
    """Groups a thread of the lean forward for a batch of ``m`` rows of ``ng`` groups
    of ``vec`` on ``sms`` SMs: the fewest (1, then 2) whose exact layout puts every
    row in flight at once (m x threads a row <= sms x :data:`_WAVE_THREADS`), for
    16-bit rows of N in :data:`_WAVE_N` under tuning's ``fwd_wave``; else None (the
    layout's own pick). With every row resident the call lasts one thread's serial
    work (loads, two row reductions, the write pass), which fewer groups a thread
    shorten; once rows queue, four groups' bytes in flight win (16-bit M = 4096, N =
    1024: 8.1 us against 9.9 with two groups, 11.7 with one). H100, us, off -> on,
    two passes (bench/notes_layer_norm.md, twentieth session): fp16 LayerNorm M =
    256, N = 1024 6.0 / 5.9 -> 5.4 / 4.6, N = 2048 5.5 / 6.2 -> 4.8 / 4.8, N = 4096
    5.9 / 6.7 -> 5.5 / 6.2 (one group each); M = 1024, N = 1024 6.3 / 6.3 -> 5.2 /
    6.0 (one), bf16 N = 2048 6.7 / 7.3 -> 6.1 / 6.1 (two); RMSNorm 0.2-0.5 us.
    Float32 rows showed no consistent gain."""
    if not _tune["fwd_wave"] or vec != 8 or not _WAVE_N[0] <= ng * vec <= _WAVE_N[1]:
        return None
    for words in (1, 2):
        if ng % (words * WARP) == 0 and m * (ng // words) <= sms * _WAVE_THREADS:
            return words
    return None


# Groups a thread the staged forward kernels are built for (16-bit rows up to 48K,
# 64K (N = 65536: 8 at 1024 threads) and 96K elements).
_STAGED_WORDS = (6, 8, 12)
# Longer rows (tuning fwd_staged_regs): 14 groups a thread in shared memory (224 KiB
# at 1024 threads, within the H100's 227 KiB a block) and the rest in registers.
_HYBRID_WORDS = 14


def _staged_limit(arr=None):
    """Dynamic shared memory a staged forward block may take on ``arr``'s device (None:
    the current one): the device's opt-in limit less 1 KiB for the kernel's static
    reduction slots (16-bit N = 65536's 128 KiB fits an A100, not Ada's 99 KiB; v16's
    224 KiB only Hopper's 227). Rows past it stream."""
    return smem_optin(None if arr is None else arr.device) - 1024


def _staged_layout(n, vec, limit=None):
    """(words, tpr, rwords) of the staged forward: ``fwd_words`` groups a thread in
    shared memory if set, else the fewest of :data:`_STAGED_WORDS` that fit 1024
    threads, none in registers (at most :data:`_STAGED_BYTES`); for longer rows
    :data:`_HYBRID_WORDS` in shared memory and the fewest register groups (at least
    one, at most tuning's ``fwd_staged_regs``) that fit 1024 threads; (0, 0, 0) where
    none fits or the shared memory passes ``limit`` (None: :func:`_staged_limit` of
    the current device)."""
    ng = n // vec
    limit = _staged_limit() if limit is None else limit
    words = _tune["fwd_words"] or next(
        (k for k in _STAGED_WORDS if k * _MAX_BLOCK >= ng), 0)
    if words:
        tpr = _round_warp(cdiv(ng, words))
        if tpr > _MAX_BLOCK or 16 * words * tpr > min(_STAGED_BYTES, limit):
            return 0, 0, 0
        return words, tpr, 0
    rwords = max(1, cdiv(ng, _MAX_BLOCK) - _HYBRID_WORDS)
    tpr = _round_warp(cdiv(ng, _HYBRID_WORDS + rwords))
    if rwords > _tune["fwd_staged_regs"] or 16 * _HYBRID_WORDS * tpr > limit:
        return 0, 0, 0
    return _HYBRID_WORDS, tpr, rwords


def _lean_layout(n, vec, rms=False, m=None, sms=None, dtype=None):
    """(words, tpr) of the lean forward: tuning's ``fwd_words`` if set; else, for a
    batch of ``m`` rows on ``sms`` SMs (if given), :func:`_wave_words`'s; else, for
    ``dtype`` rows (if given), :func:`_capped_words`'s (``rms``: RMSNorm); else 4
    groups a thread where that leaves no idle lane and fits 1024 threads (H200, one
    pass of row slots a block: 16-bit N = 1024-8192 0.071-0.072 ms against 0.080-0.092
    with 1 or 2; the persistent grid had favoured 2 on the H100), else the most groups
    per thread with no idle lane, else the fewest idle lanes; (0, 0) if no layout fits
    1024 threads."""
    ng = n // vec
    forced = (_tune["fwd_words"] or (m is not None and _wave_words(ng, vec, m, sms))
              or _capped_words(ng, dtype, rms))
    if _tune["fwd_subwarp"]:
        for words in ((forced,) if forced else _LEAN_WORDS[::-1]):
            if ng % words == 0 and ng // words in (8, 16):
                return words, ng // words
    if not forced and ng % (4 * WARP) == 0 and ng // 4 <= _MAX_BLOCK:
        forced = 4
    best = None
    for words in ((forced,) if forced else _LEAN_WORDS):
        tpr = _round_warp(cdiv(ng, words))
        if tpr > _MAX_BLOCK:
            continue
        key = (tpr * words - ng, -words)
        if best is None or key < best[0]:
            best = (key, words, tpr)
    return (best[1], best[2]) if best else (0, 0)


def _bwd_block(vec, words, tpr, wide, has_w, rms=False, full=False):
    """bwd_block's default (None, v39): 512 threads for 16-bit (``vec`` 8) row kernels
    with w (``has_w``) of ``words`` >= 2 groups a thread over ``tpr`` = 64, 128 or 256
    threads, not ``wide`` (N = 1024, 2048, 4096: 8, 4, 2 rows a block, each row's
    cross-warp step at its own named barrier by bwd_row_bar's default), 128 elsewhere
    (v20). Those kernels take 127 registers (ptxas, sm_90), so an SM holds 512 of their
    threads either way, and one block of them leaves one dW / dB partial row an SM
    instead of 2 to 8. Timed only at those three layouts with w (H200: see
    _TUNING_DEFAULTS). Without w and b there are no partial rows to save and the
    kernels take 96 registers, which smaller blocks fit more of (5 of 128 threads an SM
    against one of 512). With b alone the 512-thread blocks cost ~4 us at 16-bit 16384
    x 4096 (affine_share, fp16 LayerNorm backward, us: v38's 128-thread blocks 107.8-107.9
    in the forty-fifth session, v39's 512 111.7-112.3 in the forty-sixth, w alone and
    neither unchanged between the two runs), so rows with b alone keep 128.

    v65: float32 (``vec`` 4) row kernels with w over 64 to 256 threads, not ``wide``
    (N = 512-2048: 8, 5, 4, 2 rows a block), take _FAT_BLOCK threads too: one block an
    SM (78-96 registers), 132 partial rows instead of 660-924, and the prefetch back
    at N = 512 (:func:`_bwd_prefetch`). H100 (seventy-fifth session, tune_layer_norm
    A/B/B/A, M x N = 2^26, lock scheme, us, 128 threads / 512): RMSNorm 512 290.8,
    291.0 / 279.6; 768 289.1, 289.5 / 277.9, 278.2; 1024 286.8, 287.3 / 279.9, 280.0;
    2048 283.0, 283.2 / 279.9, 280.0; LayerNorm 512 291.5, 291.0 / 280.8; 768 288.3,
    288.4 / 276.8, 277.5; 1024 288.6, 287.9 / 280.9, 280.1; 2048 281.5, 281.8 / 280.4,
    280.0. 256 and 384 threads sat between; bwd_row_bar's named barriers cost 0.4-3.4;
    the wide kernel's rows (N = 4096) were even at every block. Fewer rows, where a
    block of 512 threads holds fewer rows an SM at once (N = 1024: 4 against 6), lose
    nothing (seventy-sixth session, H100, LayerNorm, 128 threads / 512, us): 2048 x 512
    12.7-13.1 / 11.8-11.9, 2048 x 1024 20.4-20.6 / 16.8-16.9, 4096 x 1024 29.1-29.4 /
    25.9-26.2, 16384 x 512 45.2-45.4 / 44.1-44.3, 16384 x 2048 143.2-147.4 / 145.9-146.3
    (even); RMSNorm alike (2048 x 512 12.5-12.8 / 10.6-10.7). Not yet timed on the
    H200.

    v66: 16-bit RMSNorm (``rms``) rows with w of one group a thread over 96 threads in
    the exact layout (``full``: N = 768) take 384 threads, four rows a block, on the
    pair's step at a named barrier a row where one row a block took RMSNorm's one sum.
    H100 (seventy-sixth session, pending_s76.sh r and v, us, 96 threads / 384): fp16
    2^26 rows 149.1-150.4 / 143.7-143.9; bf16 145.4-150.5 / 143.6-144.2; 8192 rows
    23.9-24.5 / 21.1-21.4; 32768 rows 62.8-63.1 / 60.4-60.7; 192 threads sat between.
    The checked layouts of 96 threads lose (N = 640: 147.7-148.1 / 151.2-152.0; 704:
    148.5-149.2 / 150.1-150.4, both types), so they keep 128 threads; so do LayerNorm's
    rows at 768 (192 threads: 147.1-147.9 -> 155.4-155.6). Not yet timed on the
    H200."""
    if has_w and not wide:
        if vec == 8 and words >= 2 and tpr in (64, 128, 256):
            return _FAT_BLOCK
        if vec == 4 and 64 <= tpr <= 256:
            return _FAT_BLOCK
        if rms and full and vec == 8 and words == 1 and tpr == 96:
            return 384
    return 128


def _bwd_row_bar(flag, vec):
    """Whether backward row kernels of several rows of several warps a block take a
    named barrier a row (make_backward_kernel's row_bar) for rows of ``vec``-element
    groups: tuning bwd_row_bar ``flag``; None (the default, v39) is yes for 16-bit rows
    (``vec`` 8), timed there (H200: see _TUNING_DEFAULTS), no for float32 (not timed)."""
    if flag is None:
        return vec == 8
    return bool(flag)


def _rows_per_block(key, tpr, m, direction, vec, words, wide=False, has_w=True, rms=False,
                    full=False):
    """Row slots per block: ``_tune[key] // tpr`` (at least 1, at most m; bwd_block
    None: :func:`_bwd_block`'s threads for rows with w, ``has_w``, or without, of
    RMSNorm, ``rms``, or LayerNorm, in the exact layout, ``full``, or the checked one),
    within _FAT_BLOCK threads for fat kernels and the backward's but for ``wide``
    ones."""
    size = _tune[key]
    if size is None:
        size = _bwd_block(vec, words, tpr, wide, has_w, rms, full)
    rpb = max(1, min(size // tpr, m, _MAX_BLOCK // tpr))
    if not wide and (_fat(direction, vec, words) or direction == "bwd"):
        rpb = max(1, min(rpb, _FAT_BLOCK // tpr))
    return rpb


def _bwd_wide_words(ng, vec):
    """Groups a thread of the wide backward row kernel that rows of ``ng`` groups of
    ``vec`` take (0: none): 2 for float32 rows of
    ``max_tpr / 2`` (or ``bwd_wide2_min``) to ``2 max_tpr`` groups with tuning's
    ``bwd_wide2`` (the default) whose rows of two groups a thread take a divisor of
    1024 threads, so that 64-register rows fill the SM (v10b, v10c: the previous
    layouts were 512 threads of 4 groups at N = 8192 and of 2 groups in 105 registers
    at N = 4096, one row an SM; Liger's is 1024 threads of 8 elements). ptxas fits
    two groups in 64 registers without spills only without the prefetch, 16-bit
    not at all. (v10's one group a thread at 1024 threads, tuning ``bwd_wide``, was
    slower wherever measured, fp16 N = 4096 120 -> 134 us on the H200, and was
    retired in the twenty-ninth session.)"""
    tpr = _tune["max_tpr"]
    lo = tpr // 2 if _tune["bwd_wide2_min"] is None else int(_tune["bwd_wide2_min"])
    row = _round_warp(cdiv(ng, 2))
    if (_tune["bwd_wide2"] and vec == 4 and max(lo, 1) < ng <= 2 * tpr
            and _MAX_BLOCK % row == 0):
        return 2
    return 0


# ---------------------------------------------------------------------------------
# Argument handling
# ---------------------------------------------------------------------------------

def _address(a):
    return a.ptr if a.ptr is not None else a.host.ctypes.data


def _can_vectorize(n, dtype, arrays):
    vec = _vec_of(dtype, True)
    return n % vec == 0 and all(_address(a) % 16 == 0 for a in arrays if a is not None)


def _view(a, dtype):
    """1-D view of contiguous KernelArray ``a`` with elements of ``dtype`` (a
    reinterpretation of the same bytes)."""
    storage = STORAGE.get(dtype) or np.dtype(dtype)
    count = a.size * a.itemsize // storage.itemsize
    host = None if a.host is None else a.host.reshape(-1).view(storage)
    return KernelArray(a.owner, a.lib, dtype, (count,), (1,), ptr=a.ptr, host=host, device=a.device)


def _unused(arr, dtype):
    """An array to pass for a kernel parameter the kernel never touches. On the GPU,
    ``arr`` itself (no allocation). Under the simulator a one-element array: the
    simulator copies host arrays in and back out around each launch, so an unused
    alias of an array the kernel writes would overwrite its results."""
    if not SIMULATOR:
        return arr
    host = np.zeros(1, dtype=STORAGE.get(dtype) or np.dtype(dtype))
    return KernelArray(host, "numpy", dtype, (1,), (1,), host=host)


def _check_eps(eps):
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real):
        raise TypeError(f"eps must be a real number, got {type(eps).__name__}")
    value = float(eps)
    if not math.isfinite(value) or value < 0.0:
        raise ValueError(f"eps must be finite and >= 0, got {eps!r}")
    return np.float32(value)


def _check_input(obj, name):
    a = checks.floating_array(obj, name)
    if a.ndim < 1:
        raise ValueError(f"{name} must have at least one dimension (the normalized one), got a scalar")
    if a.size:
        checks.require_contiguous(a, name)
    return a


def _check_param(obj, name, n, xa):
    if obj is None:
        return None
    a = checks.floating_array(obj, name)
    checks.check_same_dtype(xa, "x", (a, name))
    if a.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},) (x's last dimension), got {a.shape}")
    checks.require_contiguous(a, name)
    checks.check_same_device(xa, "x", (a, name))
    return a


def _check_stats(obj, name, m, xa):
    a = checks.floating_array(obj, name, dtypes=("float32",))
    if a.size != m:
        raise ValueError(f"{name} must have {m} elements (one per row of x), got shape {a.shape}")
    checks.require_contiguous(a, name)
    checks.check_same_device(xa, "x", (a, name))
    return a


def _zero(a):
    """Fill KernelArray ``a`` with zero bytes on its library's current stream."""
    if a.lib == "torch":
        a.owner.zero_()
    elif a.lib == "cupy":
        a.owner.fill(0)
    elif a.host is not None:
        a.host.fill(0)
    else:
        nbytes = a.size * a.itemsize
        _zero_kernel().launch((cdiv(nbytes, 256),), (256,), stream_handle(a),
                              [_view(a, "uint8"), nbytes])


def _check_flag(value, name):
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
    return bool(value)


def _forward(x, weight, bias, eps, rms, ex=NOW, stats=True):
    """(y, mean or None, rstd or None) as KernelArrays. ``stats`` False: mean and rstd
    are not returned (None); the plain kernel and the lean one with once then neither
    allocate nor write them (their ``_nostats`` forms; the lean one's RMSNorm only),
    the other kernels write them to arrays dropped here."""
    stats = _check_flag(stats, "stats")
    xa = _check_input(x, "x")
    n = xa.shape[-1]
    lead = xa.shape[:-1]
    m = xa.size // n if n else int(np.prod(lead, dtype=np.int64))
    wa = _check_param(weight, "weight", n, xa)
    ba = None if rms else _check_param(bias, "bias", n, xa)
    eps = _check_eps(eps)
    if m == 0:
        y = empty_like_lib(xa, xa.shape, xa.dtype)
        if not stats:
            return y, None, None
        mean = None if rms else empty_like_lib(xa, lead, "float32")
        return y, mean, empty_like_lib(xa, lead, "float32")
    if n == 0:
        raise ValueError(f"x's last dimension (the normalized one) must be >= 1, got shape {xa.shape}")
    if ex.recording:
        xa, wa, ba = ex.inputs
    dtype = xa.dtype
    y = ex.alloc(xa, xa.shape, dtype)
    vector = _can_vectorize(n, dtype, (xa, wa, ba, y))
    vec = _vec_of(dtype, vector)
    stream = bool(_tune["fwd_stream"])
    limit = _staged_limit(xa) if vector and not stream else 0
    staged = vector and not stream and _fwd_staged(n, vec, limit)
    has_w, has_b = wa is not None, ba is not None
    # The plain kernel (v27, _fwd_plain): its own layout, a block per row group.
    rowwise = vector and not (stream or staged)  # the plain or the lean kernel
    sms = _sm_count(xa) if rowwise else None
    # v61's off-grid rule differs where the kernel writes the statistics.
    writes = stats or _plain_keeps_stats(n, vec, rms, dtype)
    plain = (_plain_pick(n, vec, rms, dtype, writes)
             if rowwise and _fwd_plain(dtype, rms, n // vec, vec, m, sms, writes) else None)
    plain_ok = plain is not None and cdiv(m, plain[2]) <= 2**31 - 1
    # The plain kernel and the lean one with once compile the statistics out
    # (_nostats; the plain kernel not at v51's rows, _PLAIN_KEEP_STATS); the others
    # write them wherever they run, so they get arrays even when the caller drops them.
    nostats = False
    if plain_ok:
        words, tpr, rpb, early, min_blocks = plain
        if _tune["fwd_early"] is not None:
            early = bool(_tune["fwd_early"])
        nostats = not writes
        if nostats and _plain_layout_own():
            min_blocks = _plain_nostats_bounds(n, vec, rms, dtype, min_blocks)
        rows = _plain_reload_rows(n, vec, rms, dtype, not nostats)
        # v63: a layout that does not split the row exactly (fwd_plain_checked).
        checked = words * tpr * vec != n
        kernel = make_plain_forward_kernel(dtype, rms, has_w, has_b, words, tpr, rpb, early,
                                           m % rpb != 0, min_blocks, not nostats,
                                           rows[0] if rows else _tune["fwd_plain_reload"],
                                           not nostats and _plain_stats_block(
                                               n, vec, rms, dtype, rpb), checked)
        grid, shared = cdiv(m, rpb), 0
        carve = rows[1] if rows else _plain_carveout(words, n, dtype, rms)
        if carve is not None:
            kernel.prefer_carveout(carve, tpr * rpb, shared, xa.device)
    else:
        lean = rowwise and _fwd_lean(n, vec, rms)
        rwords = 0
        if lean:
            words, tpr = _lean_layout(n, vec, rms, m, sms, dtype)
        elif staged:
            words, tpr, rwords = _staged_layout(n, vec, limit)
        elif stream:
            words, tpr = 0, _stream_tpr(n // vec, vec)
        else:
            words, tpr = _row_layout(n, vec, "fwd", m)
        if not (lean or staged or words):
            tpr = _tune["fwd_stream_tpr"] or tpr
        subwarp = lean and tpr < WARP
        # Exact rows: every thread's every group inside the row (no per-group checks).
        full = bool(words) and tpr * (words + rwords) * vec == n
        rpb = 1
        if lean or staged:
            # The staged kernel: one row slot a block (its row fills the shared memory).
            rpb = 1 if staged else _lean_rows_per_block(dtype, words, tpr, rms, full, m)
            if subwarp:  # whole warps: the shuffles take every lane
                rpb = cdiv(rpb, WARP // tpr) * (WARP // tpr)
        if lean:
            bounds = (None if subwarp
                      else _lean_bounds(dtype, tpr, rpb, words, full, rms))
        else:
            bounds = None if (staged or words) else _stream_bounds(tpr)
        # A lean grid of a block per pass of row slots covers every row once.
        per_row = (lean and _lean_block_per_row(tpr, words) and not _tune["fwd_lean_persistent"]
                   and _tune["fwd_grid"] is None and _tune["fwd_blocks_per_sm"] is None
                   and cdiv(m, rpb) <= 2**31 - 1)
        early, once = _fwd_early_once(dtype, rms, words, tpr, lean, per_row)
        nostats = not stats and lean and once and rms
        kernel = make_forward_kernel(dtype, rms, has_w, has_b, vector, words,
                                     _tune["prefetch"] is not False if words else True,
                                     full, lean, staged, subwarp, bounds=bounds,
                                     welford=not (words or rms) and _fwd_welford(vector),
                                     rwords=rwords, early=early, once=once,
                                     stats=not nostats)
        if lean or staged:
            shared = 16 * words * tpr if staged else 0
            if per_row:
                grid = cdiv(m, rpb)
            else:
                grid = _persistent_grid(kernel, xa, tpr * rpb, shared, cdiv(m, rpb),
                                        _tune["fwd_grid"], _tune["fwd_blocks_per_sm"])
        elif words:
            rpb = _rows_per_block("fwd_block", tpr, m, "fwd", vec, words)
            shared = (has_w + has_b) * words * vec * tpr * 4
            grid = _persistent_grid(kernel, xa, tpr * rpb, shared, cdiv(m, rpb),
                                    _tune["fwd_grid"], _tune["fwd_blocks_per_sm"])
        else:
            rpb, shared = 1, 0
            # The streaming kernel: a block a row, or persistent where fwd_grid or
            # fwd_blocks_per_sm asks (fewer rows in flight, so its second and third
            # passes over a long row find it in L2).
            if _tune["fwd_grid"] is None and _tune["fwd_blocks_per_sm"] is None:
                grid = min(m, 2**31 - 1)
            else:
                grid = _persistent_grid(kernel, xa, tpr, 0, m, _tune["fwd_grid"],
                                        _tune["fwd_blocks_per_sm"])
    mean = None if rms or nostats else ex.alloc(xa, lead, "float32")
    rstd = None if nostats else ex.alloc(xa, lead, "float32")
    vdt = _view_dtype(dtype, vector)
    xv = _view(xa, vdt)
    # The _nostats kernels touch neither statistics argument.
    rv = _unused(_view(y, "float32"), "float32") if nostats else _view(rstd, "float32")
    ex.launch(kernel, (grid,), (tpr, rpb), stream_handle(xa), [
        xv, xv if wa is None else _view(wa, vdt), xv if ba is None else _view(ba, vdt),
        _view(y, vdt), _unused(rv, "float32") if mean is None else _view(mean, "float32"), rv,
        m, n, eps], shared=shared)
    if not stats:
        return y, None, None
    return y, mean, rstd


def _backward(grad_out, x, weight, bias, mean, rstd, deterministic, rms, ex=NOW):
    ga = _check_input(grad_out, "grad_out")
    xa = _check_input(x, "x")
    checks.check_same_dtype(ga, "grad_out", (xa, "x"))
    if xa.shape != ga.shape:
        raise ValueError(f"x has shape {xa.shape} but grad_out has {ga.shape}")
    checks.check_same_device(ga, "grad_out", (xa, "x"))
    n = xa.shape[-1]
    m = xa.size // n if n else int(np.prod(xa.shape[:-1], dtype=np.int64))
    wa = _check_param(weight, "weight", n, xa)
    ba = None if rms else _check_param(bias, "bias", n, xa)
    meana = None if rms else _check_stats(mean, "mean", m, xa)
    rstda = _check_stats(rstd, "rstd", m, xa)
    if not isinstance(deterministic, (bool, np.bool_)):
        raise TypeError(f"deterministic must be a bool, got {type(deterministic).__name__}")
    has_w = wa is not None
    has_b = ba is not None
    dtype = xa.dtype
    if m == 0:
        gx = empty_like_lib(ga, ga.shape, dtype)
        outs = []
        for a in (wa, ba):
            if a is not None:
                z = empty_like_lib(ga, a.shape, dtype)
                _zero(z)
                a = z
            outs.append(a)
        return gx, outs[0], outs[1]
    if n == 0:
        raise ValueError(f"x's last dimension (the normalized one) must be >= 1, got shape {xa.shape}")
    if ex.recording:
        ga, xa, wa, ba, meana, rstda = ex.inputs
    gx = ex.alloc(ga, ga.shape, dtype)
    stream = stream_handle(ga)
    vector = _can_vectorize(n, dtype, (ga, xa, wa, gx))
    vec = _vec_of(dtype, vector)
    lean = vector and _bwd_lean(n // vec, vec, m)
    if lean:
        words, tpr = _LEAN_BWD_WORDS, _round_warp(cdiv(n // vec, _LEAN_BWD_WORDS))
    else:
        words, tpr = _row_layout(n, vec, "bwd", m)
    wide = not lean and bool(words) and words == _bwd_wide_words(n // vec, vec)
    affine = has_w or has_b
    full = bool(words) and tpr * words * vec == n
    rpb = (_rows_per_block("bwd_block", tpr, m, "bwd", vec, words, wide, has_w, rms, full)
           if words and not lean else 1)
    block = rpb * tpr
    rows = cdiv(m, rpb)
    if _bwd_global_dw(has_w, has_b):
        nch, sacc_bytes = 1, 0
    else:
        nch, sacc_bytes = _stream_chunks(n // vec, tpr, vec, int(has_w) + int(has_b))
    sacc = not words and affine and sacc_bytes > 0
    if words or not sacc:
        nch = 1
    # The wide kernels (float32, two groups) fit 64 registers only without the
    # prefetch (ptxas).
    prefetch = (_bwd_prefetch(dtype, rms, n // vec, vector, block)
                and not wide if words else True)
    stats_pass = _tune["bwd_stats_pass"]
    if stats_pass is None:
        stats_pass = vec == 8 or (vec == 4 and has_w)
    given = sacc and nch > 1 and bool(stats_pass) and n // vec < 2**31
    # Exact layouts only: in SASS the checked forms gained nothing (bf16 RMSNorm, two
    # groups: 282 -> 285 instructions a row; fp16 LayerNorm exact: 353 -> 325).
    one_row = full and rpb == 1 and bool(_tune["bwd_one_row"])
    red_warps = _red_direct_warps(tpr, vec, has_w) if one_row else 0
    # The dW / dB kernel's dependent launch, after the row and lean kernels (tuning
    # bwd_pdl); the streaming ones keep plain launches.
    pdl = (bool(words) and affine and _tune["bwd_pdl"] and dependent_launch_ok(ga.device))
    sum1 = rms and _bwd_sum1(_tune["bwd_rms_sum1"], rpb, tpr)
    use_lock = affine and not deterministic and _tune["bwd_scheme"] == "lock"
    if lean:
        # Checked forms only: ptxas fits the exact ones in 64 registers only with
        # spills (LayerNorm with w and b: 20 bytes).
        kernel = make_lean_backward_kernel(dtype, rms, has_w, has_b, False,
                                           bool(_tune["bwd_lean_prefetch"]), pdl, sum1)
        shared = _lean_bwd_shared(has_w, has_b, tpr, vec)
    else:
        bm = _tune["bwd_min_blocks"]
        bounds = (block, int(bm)) if bm is not None and words and not wide else None
        # w's floats, also the fold's scratch (one slot's dw or db).
        w_bytes = words * vec * tpr * 4
        shared = w_bytes if words and (has_w or (affine and rpb > 1)) else 0
        stages = _tune["bwd_stages"] if words and vector and not wide else 0
        if stages:
            # The ring follows w's floats, which it then always reserves.
            ring_bytes = w_bytes + stages * 2 * words * 16 * block
            if ring_bytes <= _staged_limit(ga):
                prefetch, shared = False, ring_bytes
            else:
                stages = 0
        w_regs = (_bwd_w_regs(_tune["bwd_w_regs"], dtype, words) and bool(words)
                  and has_w and vector and not wide and not stages)
        # Per-row named barriers only where a block holds several rows (so not a one-row
        # kernel) of several warps, ids 1 .. rpb.
        row_bar = (_bwd_row_bar(_tune["bwd_row_bar"], vec) and bool(words)
                   and 1 < rpb <= ROW_BARRIERS and tpr > WARP and not sum1)
        kernel = make_backward_kernel(dtype, rms, has_w, has_b, vector, words, prefetch,
                                      full, sacc, wide, given, one_row, red_warps, pdl,
                                      bounds, stages, sum1, w_regs, row_bar)
    if sacc:
        shared = sacc_bytes
    if words:
        grid = _persistent_grid(kernel, ga, block, shared, rows, _tune["bwd_grid"],
                                _tune["bwd_blocks_per_sm"])
    elif _tune["bwd_grid"] is not None:
        grid = min(rows, int(_tune["bwd_grid"]))
    else:
        per_sm = max(1, _tune["bwd_threads_per_sm"] // block)
        grid = min(rows, max(1, cdiv(_sm_count(ga) * per_sm, nch)))
        if shared and _tune["fit_carveout"]:
            _fit_carveout(kernel, ga.device, block, shared, per_sm)
    if use_lock:
        ngroups = min(int(_tune["group_size"] or group_size_m(n)), grid)
        nparts = ngroups
    else:
        ngroups = 1
        nparts = grid
    pw = ex.alloc(ga, (nparts * n,), "float32") if has_w else None
    pb = ex.alloc(ga, (nparts * n,), "float32") if has_b else None
    rv = _view(rstda, "float32")
    if use_lock:
        locks = ex.alloc(ga, (2 * ngroups * nch,), "int32", zero=_zero)
    else:
        locks = _view(rstda, "int32")
    vdt = _view_dtype(dtype, vector)
    gv = _view(ga, vdt)
    xv = _view(xa, vdt)
    wv = gv if wa is None else _view(wa, vdt)
    mv = rv if meana is None else _view(meana, "float32")
    extra = []
    if given:
        c12 = ex.alloc(ga, (2 * m,), "float32")
        stats = make_bwd_stats_kernel(dtype, rms, has_w, vector, sum1)
        ex.launch(stats, (_persistent_grid(stats, ga, tpr, 0, m, None, None),), (tpr, 1),
                  stream, [gv, xv, wv, mv, rv, c12, m, n])
        extra = [c12]
    elif not words:
        extra = [rv]
    ex.launch(kernel, (nch, grid) if not words else (grid,), (tpr, rpb), stream, [
        gv, xv, wv, mv, rv, _view(gx, vdt),
        rv if pw is None else pw, rv if pb is None else pb, locks,
        m, n, ngroups, 1 if use_lock else 0] + extra, shared=shared)
    gw = gb = None
    if affine:
        gw = ex.alloc(ga, wa.shape, dtype) if has_w else None
        gb = ex.alloc(ga, ba.shape, dtype) if has_b else None
        pairs = [(p, o) for p, o in ((pw, gw), (pb, gb)) if p is not None]
        (p0, o0), (p1, o1) = pairs[0], pairs[-1]
        bx, by = _tune["reduce_block"]
        o0 = _view(o0, dtype)
        o1 = _view(o1, dtype) if len(pairs) == 2 else _unused(o0, dtype)
        ex.launch(make_dwdb_kernel(dtype, _tune["dwdb_unroll"], _tune["dwdb_min_blocks"], pdl),
                  (cdiv(n, bx), len(pairs)),
                  (bx, by), stream, [p0, p1, o0, o1, nparts, n])
    return gx, gw, gb


def _red_direct_warps(tpr, vec, has_w=True):
    """Warps a row of a one-row backward block of ``tpr`` threads whose row sums
    cross warps directly (tuning's ``bwd_red_direct``; None: :data:`_RED_DIRECT_DEFAULT`'s
    warps at 16 bits, ``vec`` 8, on rows with w: v41), else 0 (shuffles)."""
    nw = tpr // WARP
    on = _tune["bwd_red_direct"]
    if on is None:
        on = vec == 8 and nw in _RED_DIRECT_DEFAULT and has_w
    return nw if on and tpr % WARP == 0 and nw in RED_DIRECT_WARPS else 0


def _bwd_lean(ng, vec, m):
    """Whether the backward takes the lean wide kernel (v13) for rows of ``ng`` groups
    of ``vec``: 16-bit rows under tuning's ``bwd_lean``, float32 ones under
    ``bwd_lean_f32`` (v15; None, the default since v44: only where the wide2 kernel
    does not hold the row), of more than ``bwd_lean_min`` groups (None: 2 *
    _FAT_BLOCK, past the row kernels), at most 2 max_tpr, and row indices 32-bit."""
    on = _tune["bwd_lean"] if vec == 8 else _tune["bwd_lean_f32"] if vec == 4 else False
    if on is None:
        on = not _bwd_wide_words(ng, vec)
    if not on or m >= 2**30:
        return False
    lo = 2 * _FAT_BLOCK if _tune["bwd_lean_min"] is None else int(_tune["bwd_lean_min"])
    return lo < ng <= _LEAN_BWD_WORDS * _tune["max_tpr"]


def _bwd_global_dw(has_w, has_b):
    """Whether the streaming backward keeps dw in a global partial row per block
    although shared memory would hold it: rows with w and without b, under tuning's
    ``bwd_global_dw`` (False by default since the fifty-second session)."""
    return has_w and not has_b and bool(_tune["bwd_global_dw"])


def _stream_chunks(ng, tpr, vec, naccs):
    """(column chunks, shared bytes) of the streaming backward's shared-memory
    accumulators for rows of ``ng`` groups of ``vec``, ``tpr`` threads, ``naccs``
    accumulator rows (dw and / or db): the fewest chunks whose share (kmax =
    ceil(ceil(ng / chunks) / tpr) groups a thread, as the kernel computes it) fits
    ``tuning(sacc_bytes)``; (1, 0) when even one group a thread does not fit (or
    sacc_bytes is 0): the accumulators then stay in global memory. The smallest
    count leaves no chunk empty."""
    per_k = naccs * tpr * vec * 4
    limit = int(_tune["sacc_bytes"])
    if naccs == 0 or per_k > limit:
        return 1, 0
    nch = 1
    while True:
        kmax = cdiv(cdiv(ng, nch), tpr)
        if kmax * per_k <= limit:
            return nch, kmax * per_k
        nch += 1


def _owner(a):
    return None if a is None else a.owner


# ---------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------

def layer_norm_forward(x, weight=None, bias=None, eps=1e-5, *, stats=True):
    """LayerNorm over the last dimension of ``x``.

    x: ``[..., N]`` float32/float16/bfloat16 GPU array, C-contiguous.
    weight, bias: ``[N]`` of x's dtype, or None.
    eps: finite float >= 0, added to the variance.
    stats (keyword only): False for inference, where no backward follows: mean and
    rstd come back as None, and where the plain kernel or RMSNorm's lean kernel of
    one row a slot runs (the rows they are tuned for, N = 512-16384 at 16 bits and
    float32, but float32 N = 2048 and RMSNorm's 4096, where the kernel that writes
    them is faster) they are neither allocated nor written. y's bits do not depend on
    it.
    Returns ``(y, mean, rstd)``: y like x; mean and rstd float32 of shape
    ``x.shape[:-1]`` (for :func:`layer_norm_backward`), allocated in x's library.
    """
    y, mean, rstd = _forward(x, weight, bias, eps, rms=False, stats=stats)
    return y.owner, _owner(mean), _owner(rstd)


def layer_norm_backward(grad_out, x, weight, bias, mean, rstd, deterministic=False):
    """Gradients of :func:`layer_norm_forward`.

    grad_out, x: ``[..., N]``, same shape and dtype, C-contiguous.
    weight, bias: as given to the forward (None when absent); bias only decides
    whether grad_bias is computed.
    mean, rstd: the forward's float32 statistics (one per row).
    deterministic: False = the seed's lock scheme for grad_weight/grad_bias; True =
    per-block partial sums reduced in a fixed order (bit-identical run to run).
    Returns ``(grad_x, grad_weight or None, grad_bias or None)`` in grad_out's library.
    """
    gx, gw, gb = _backward(grad_out, x, weight, bias, mean, rstd, deterministic, rms=False)
    return gx.owner, _owner(gw), _owner(gb)


def rms_norm_forward(x, weight=None, eps=1e-6, *, stats=True):
    """RMSNorm over the last dimension: ``y = x * rstd * weight`` with
    ``rstd = 1 / sqrt(mean(x^2) + eps)``. Arguments as :func:`layer_norm_forward`.
    Returns ``(y, rstd)``; rstd float32 of shape ``x.shape[:-1]`` (None with
    ``stats=False``)."""
    y, _, rstd = _forward(x, weight, None, eps, rms=True, stats=stats)
    return y.owner, _owner(rstd)


def rms_norm_backward(grad_out, x, weight, rstd, deterministic=False):
    """Gradients of :func:`rms_norm_forward`; arguments as :func:`layer_norm_backward`.
    Returns ``(grad_x, grad_weight or None)``."""
    gx, gw, _ = _backward(grad_out, x, weight, None, None, rstd, deterministic, rms=True)
    return gx.owner, _owner(gw)


def forward_plan(x, weight, bias, eps, rms=False, stats=True):
    """A :class:`~numba_fused.plan.Plan` of :func:`layer_norm_forward` (``rms``:
    :func:`rms_norm_forward`) for inputs of the signature of ``x``, ``weight``,
    ``bias`` (arrays as the public functions take them; validated here as there).
    Its inputs are ``(x, weight, bias)`` (bias ignored with ``rms``), its outputs
    ``(y, mean or None, rstd)`` (``stats`` False: ``(y, None, None)``). GPU only; x
    must not be empty."""
    arrays = _plan_inputs(x, weight, None if rms else bias)
    rec = Recorder(arrays)
    return rec.plan(_forward(x, weight, None if rms else bias, eps, rms, ex=rec, stats=stats))


def backward_plan(grad_out, x, weight, bias, mean, rstd, deterministic=False, rms=False):
    """A :class:`~numba_fused.plan.Plan` of :func:`layer_norm_backward` (``rms``:
    :func:`rms_norm_backward`, mean None) for inputs of this signature. Its inputs are
    ``(grad_out, x, weight, bias, mean, rstd)``, its outputs ``(grad_x, grad_weight or
    None, grad_bias or None)``. GPU only; x must not be empty."""
    bias = None if rms else bias
    mean = None if rms else mean
    arrays = _plan_inputs(grad_out, x, weight, bias, mean, rstd)
    rec = Recorder(arrays)
    return rec.plan(_backward(grad_out, x, weight, bias, mean, rstd, deterministic, rms, ex=rec))


def _plan_inputs(*objs):
    from interop.dlpack import as_kernel_array

    return [None if o is None else as_kernel_array(o, "input") for o in objs]


# ---------------------------------------------------------------------------------
# float64 references (tests, benchmarks)
# ---------------------------------------------------------------------------------

def _ref_backward(x64, xhat, rstd, w, dy, centered):
    n = x64.shape[-1]
    wdy = dy if w is None else dy * w
    c1 = (xhat * wdy).mean(-1, keepdims=True)
    dx = wdy - xhat * c1
    if centered:
        dx = dx - wdy.mean(-1, keepdims=True)
    dx = dx * rstd
    dw = None if w is None else (dy * xhat).reshape(-1, n).sum(0)
    return dx, dw, dy.reshape(-1, n).sum(0)


def layer_norm_ref(x, weight=None, bias=None, eps=1e-5, grad_out=None):
    """float64 LayerNorm on the host. Arrays: NumPy, torch tensors (any device) or
    CuPy. Returns ``(y, mean, rstd)``, and with ``grad_out`` also ``(grad_x,
    grad_weight or None, grad_bias or None)``."""
    x64 = dtypes.to_float64(x)
    w = dtypes.to_float64(weight)
    b = dtypes.to_float64(bias)
    mean = x64.mean(-1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt(var + float(eps))
    xhat = (x64 - mean) * rstd
    y = xhat if w is None else xhat * w
    if b is not None:
        y = y + b
    out = (y, mean[..., 0], rstd[..., 0])
    if grad_out is None:
        return out
    dx, dw, db = _ref_backward(x64, xhat, rstd, w, dtypes.to_float64(grad_out), centered=True)
    return out + (dx, dw, None if b is None else db)


def rms_norm_ref(x, weight=None, eps=1e-6, grad_out=None, rstd=None):
    """float64 RMSNorm on the host. Returns ``(y, rstd)``, and with ``grad_out`` also
    ``(grad_x, grad_weight or None)``. ``rstd`` (e.g. the float32 one a forward
    returned) replaces the float64 rstd in the gradients: the exact derivative at the
    value :func:`rms_norm_backward` is given, which has no eps to recompute it from."""
    x64 = dtypes.to_float64(x)
    w = dtypes.to_float64(weight)
    r64 = 1.0 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + float(eps))
    y = x64 * r64 if w is None else x64 * r64 * w
    out = (y, r64[..., 0])
    if grad_out is None:
        return out
    if rstd is not None:
        r64 = dtypes.to_float64(rstd).reshape(r64.shape)
    dx, dw, _ = _ref_backward(x64, x64 * r64, r64, w, dtypes.to_float64(grad_out), centered=False)
    return out + (dx, dw)
