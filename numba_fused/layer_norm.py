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

*Streaming kernels* (``words == 0``) take rows of any length, one row per block at a
time (``rpb = 1``): the forward reads ``x`` once per pass (sum, deviations, write;
the second and third reads hit L1/L2), the backward twice (sums, then dx).

Backward ``dw``/``db`` are reduced across rows in two steps: the kernel leaves
float32 partial rows ``[R, N]``, then the ``norm_dwdb`` kernel sums them column by
column in a fixed order. Two ways to produce the partial rows (``deterministic=``):

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
from .intrinsics import u32_as_f32
from .launch import SIMULATOR, Kernel, cdiv, sm_count
from .reductions import WARP, warp_sum

__all__ = [
    "layer_norm_forward", "layer_norm_backward", "rms_norm_forward", "rms_norm_backward",
    "layer_norm_ref", "rms_norm_ref", "make_forward_kernel", "make_backward_kernel",
    "make_dwdb_kernel", "group_size_m", "tuning", "shipped_kernels",
]

_MAX_BLOCK = 1024
# ptxas must fit every kernel in 64 registers so 1024-thread blocks can launch (min
# 1 block per SM: with the block size alone ptxas sometimes aims at 32 and spills). The
# simulator's cuda.jit takes no launch_bounds.
_JIT = {} if SIMULATOR else {"launch_bounds": (_MAX_BLOCK, 1)}
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

    @intrinsic
    def _ld16_cg(typingctx, arr, idx):
        if not (_vec_arg_ok(arr) and arr.dtype == types.float32 and isinstance(idx, types.Integer)):
            return None
        sig = types.UniTuple(types.float32, 4)(arr, idx)

        def codegen(context, builder, signature, args):
            aty, ity = signature.args
            ptr = _elem_ptr(context, builder, aty, ity, *args)
            f32 = ir.FloatType()
            fnty = ir.FunctionType(ir.LiteralStructType([f32] * 4), [ptr.type])
            # side_effect: must not move above the lock acquisition that precedes it.
            asm = ir.InlineAsm(fnty, "ld.global.cg.v4.f32 {$0,$1,$2,$3}, [$4];",
                               "=f,=f,=f,=f,l", side_effect=True)
            res = builder.call(asm, [ptr])
            vals = [builder.extract_value(res, k) for k in range(4)]
            return context.make_tuple(builder, signature.return_type, vals)

        return sig, codegen

    @intrinsic
    def _ldcg(typingctx, arr, idx):
        if not (isinstance(arr, types.Array) and arr.ndim == 1 and arr.dtype == types.float32
                and isinstance(idx, types.Integer)):
            return None
        sig = types.float32(arr, idx)

        def codegen(context, builder, signature, args):
            aty, ity = signature.args
            ary = context.make_array(aty)(context, builder, args[0])
            i = context.cast(builder, args[1], ity, types.int64)
            ptr = builder.gep(ary.data, [i])
            fnty = ir.FunctionType(ir.FloatType(), [ptr.type])
            asm = ir.InlineAsm(fnty, "ld.global.cg.f32 $0, [$1];", "=f,l", side_effect=True)
            return builder.call(asm, [ptr])

        return sig, codegen

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

        @cuda.jit(device=True, inline="always")
        def load_group(a, gi, buf, off):
            buf[off] = load(a, gi)

        @cuda.jit(device=True, inline="always")
        def store_group(a, gi, buf, off):
            store(a, gi, buf[off])

        return load_group, store_group

    if dtype == "float32":

        @cuda.jit(device=True, inline="always")
        def load_group(a, gi, buf, off):
            q = _ld16(a, gi)
            buf[off] = q[0]
            buf[off + 1] = q[1]
            buf[off + 2] = q[2]
            buf[off + 3] = q[3]

        @cuda.jit(device=True, inline="always")
        def store_group(a, gi, buf, off):
            _st16(a, gi, buf[off], buf[off + 1], buf[off + 2], buf[off + 3])

        return load_group, store_group

    if dtype == "float16":

        @cuda.jit(device=True, inline="always")
        def unpack(w, buf, o):
            buf[o] = _h2f(w & _LO16)
            buf[o + 1] = _h2f(w >> _U32_16)

        @cuda.jit(device=True, inline="always")
        def pack(buf, o):
            return _f2h(buf[o]) | (_f2h(buf[o + 1]) << _U32_16)

    else:

        @cuda.jit(device=True, inline="always")
        def unpack(w, buf, o):
            buf[o] = u32_as_f32(w << _U32_16)
            buf[o + 1] = u32_as_f32(w & _HI16)

        @cuda.jit(device=True, inline="always")
        def pack(buf, o):
            lo = np.uint32(dtypes.f32_to_bf16_bits(buf[o]))
            hi = np.uint32(dtypes.f32_to_bf16_bits(buf[o + 1]))
            return lo | (hi << _U32_16)

    @cuda.jit(device=True, inline="always")
    def load_group(a, gi, buf, off):
        q = _ld16(a, gi)
        unpack(q[0], buf, off)
        unpack(q[1], buf, off + 2)
        unpack(q[2], buf, off + 4)
        unpack(q[3], buf, off + 6)

    @cuda.jit(device=True, inline="always")
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

        @cuda.jit(device=True, inline="always")
        def elem(r, off, j):
            return r[off + j]

    elif dtype == "float16":

        @cuda.jit(device=True, inline="always")
        def elem(r, off, j):
            w = r[off + j // 2]
            return _h2f(w >> _U32_16) if j % 2 else _h2f(w & _LO16)

    else:

        @cuda.jit(device=True, inline="always")
        def elem(r, off, j):
            w = r[off + j // 2]
            return u32_as_f32(w & _HI16) if j % 2 else u32_as_f32(w << _U32_16)

    @cuda.jit(device=True, inline="always")
    def load_raw(a, gi, r, off):
        q = _ld16(a, gi)
        r[off] = q[0]
        r[off + 1] = q[1]
        r[off + 2] = q[2]
        r[off + 3] = q[3]

    return load_raw, elem


@functools.lru_cache(maxsize=None)
def _partial_io(vec, vector):
    """Device functions moving ``vec`` float32 values between ``buf[off:]`` and a
    float32 partial-sum array at element ``e`` (a multiple of 4 in vector mode):
    (store(p, e, buf, off), add_into(p, e, buf, off): buf += p[e:e+vec] (plain
    load), add_into_cg(...): the same reading from L2)."""
    if not vector:

        @cuda.jit(device=True, inline="always")
        def store(p, e, buf, off):
            p[e] = buf[off]

        @cuda.jit(device=True, inline="always")
        def add_into(p, e, buf, off):
            buf[off] += p[e]

        @cuda.jit(device=True, inline="always")
        def add_into_cg(p, e, buf, off):
            buf[off] += _ldcg(p, e)

        return store, add_into, add_into_cg

    quads = vec // 4

    @cuda.jit(device=True, inline="always")
    def store(p, e, buf, off):
        e4 = e // 4
        for h in range(quads):
            o = off + 4 * h
            _st16(p, e4 + h, buf[o], buf[o + 1], buf[o + 2], buf[o + 3])

    @cuda.jit(device=True, inline="always")
    def add_into(p, e, buf, off):
        e4 = e // 4
        for h in range(quads):
            o = off + 4 * h
            q = _ld16(p, e4 + h)
            buf[o] += q[0]
            buf[o + 1] += q[1]
            buf[o + 2] += q[2]
            buf[o + 3] += q[3]

    @cuda.jit(device=True, inline="always")
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

@cuda.jit(device=True, inline="always")
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
        t = cuda.threadIdx.x
        nw = tpr // WARP
        first = cuda.threadIdx.y * nw
        lane = t % WARP
        if lane == 0:
            red[buf, first + t // WARP] = v
        cuda.syncthreads()
        s = red[buf, first + lane] if lane < nw else np.float32(0.0)
        v = warp_sum(s)
    return v


@cuda.jit(device=True, inline="always")
def _row_sum2(a, b, red, buf):
    """Two row sums at once (one barrier); ``red`` float32 shared ``(2, 2, 32)``.
    Same calling rules as :func:`_row_sum`."""
    a = warp_sum(a)
    b = warp_sum(b)
    tpr = cuda.blockDim.x
    if tpr > WARP:
        t = cuda.threadIdx.x
        nw = tpr // WARP
        first = cuda.threadIdx.y * nw
        lane = t % WARP
        if lane == 0:
            red[buf, 0, first + t // WARP] = a
            red[buf, 1, first + t // WARP] = b
        cuda.syncthreads()
        sa = np.float32(0.0)
        sb = np.float32(0.0)
        if lane < nw:
            sa = red[buf, 0, first + lane]
            sb = red[buf, 1, first + lane]
        a = warp_sum(sa)
        b = warp_sum(sb)
    return a, b


@cuda.jit(device=True, inline="always")
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


@cuda.jit(device=True, inline="always")
def _release(locks, lid):
    """Release ``locks[lid]`` after every thread's buffer stores are visible GPU-wide
    (each thread fences, the block synchronises, then one thread unlocks)."""
    cuda.threadfence()
    cuda.syncthreads()
    if cuda.threadIdx.x == 0 and cuda.threadIdx.y == 0:
        cuda.atomic.exch(locks, lid, 0)


# ---------------------------------------------------------------------------------
# Kernel factories
# ---------------------------------------------------------------------------------

_F32_1D = types.Array(types.float32, 1, "C")
_I32_1D = types.Array(types.int32, 1, "C")

# Register-resident groups per thread the launchers may pick, by direction and VEC.
# Forward keeps one row slice (<= 16 floats); backward keeps xhat, w*dy and the dw/db
# accumulators (4 x <= 8 floats) within the 64 registers 1024-thread blocks allow.
_WORDS = {("fwd", 8): (1, 2), ("fwd", 4): (1, 2, 4), ("bwd", 8): (1,), ("bwd", 4): (1, 2)}
# Groups per thread per iteration in the streaming kernels (8 elements in flight).
_UNROLL = {8: 1, 4: 2, 1: 8}


def _variant_name(rms, has_w, has_b):
    return ("rms" if rms else "ln") + ("_w" if has_w else "") + ("_b" if has_b else "")


def _layout_name(vector, words):
    return ("vec" if vector else "scalar") + (f"_rows{words}" if words else "_stream")


@functools.lru_cache(maxsize=None)
def make_forward_kernel(dtype, rms, has_w, has_b, vector, words):
    """Forward kernel for ``dtype`` storage.

    rms: RMSNorm (no mean; has_b must be False) else LayerNorm.
    has_w / has_b: multiply by ``w`` / add ``b``.
    vector: 16-byte groups (needs N % VEC == 0 and aligned pointers).
    words: groups per thread kept in registers (row kernel); 0 = streaming kernel.
    """
    if rms and has_b:
        raise ValueError("RMSNorm has no bias")
    vec = _vec_of(dtype, vector)
    load_group, store_group = _group_io(dtype, vector)
    st = types.Array(_kernel_storage(dtype, vector), 1, "C")
    argtypes = (st, st, st, st, _F32_1D, _F32_1D, types.int64, types.int64, types.float32)
    name = f"norm_fwd_{dtype}_{_variant_name(rms, has_w, has_b)}_{_layout_name(vector, words)}"

    if words:
        elems = words * vec

        def norm_fwd_rows(x, w, b, y, mean_out, rstd_out, m, n, eps):
            """Row kernel: y[r, :] = (x[r, :] - mu) * rstd * w + b for the rows r of an
            ``[m, n]`` array (RMSNorm: mu = 0, rstd from the mean square, no b).

            Block ``(tpr, rpb)``: row slot ``threadIdx.y`` takes rows
            ``blockIdx.x * rpb + threadIdx.y``, then + ``gridDim.x * rpb`` ...; its
            ``tpr`` threads (a multiple of 32, ``tpr * words * VEC >= n``) each hold
            groups ``k * tpr + threadIdx.x`` (k < words) in ``xs``.
            x, y: the ``[m, n]`` input / output as 1-D views (vector mode: ``m * n /
            VEC`` 16-byte groups). w, b: ``[n]`` views (unused when has_w / has_b is
            off: pass any array of the same type). mean_out, rstd_out: float32
            ``[m]`` (mean_out unused for RMSNorm). eps: added to the variance (mean
            square) before the square root.
            """
            red = cuda.shared.array((2, 32), np.float32)
            red2 = cuda.shared.array((2, 2, 32), np.float32)
            xs = cuda.local.array(elems, np.float32)
            ws = cuda.local.array(vec, np.float32)
            bs = cuda.local.array(vec, np.float32)
            t = cuda.threadIdx.x
            tpr = cuda.blockDim.x
            rpb = cuda.blockDim.y
            ng = n // vec
            nf = np.float32(n)
            phase = 0
            row = cuda.blockIdx.x * rpb + cuda.threadIdx.y
            row_end = m + cuda.threadIdx.y
            stride = cuda.gridDim.x * rpb
            # Every row slot loops the same number of times: the reductions hold
            # block barriers. Slots past the last row compute on zeros.
            while row < row_end:
                active = row < m
                base = row * ng
                for k in range(words):
                    gi = k * tpr + t
                    if active and gi < ng:
                        load_group(x, base + gi, xs, k * vec)
                    else:
                        for j in range(vec):
                            xs[k * vec + j] = np.float32(0.0)
                mu = np.float32(0.0)
                if not rms:
                    s = np.float32(0.0)
                    for j in range(elems):
                        s += xs[j]
                    mu = _row_sum(s, red, phase) / nf
                    phase ^= 1
                sd = np.float32(0.0)
                ss = np.float32(0.0)
                for k in range(words):
                    if k * tpr + t < ng:
                        for j in range(vec):
                            d = xs[k * vec + j] - mu
                            sd += d
                            ss += d * d
                dmu = np.float32(0.0)
                if rms:
                    var = _row_sum(ss, red, phase) / nf
                else:
                    # Corrected two-pass: sd / n = (true mean - mu) corrects the
                    # rounding error of mu in the variance, and as dmu in y: mu + dmu
                    # in one float32 could be off by half an ulp of the mean, a large
                    # error when |mean| >> std.
                    sd, ss = _row_sum2(sd, ss, red2, phase)
                    dmu = sd / nf
                    var = max((ss - sd * dmu) / nf, np.float32(0.0))
                phase ^= 1
                r = np.float32(1.0) / math.sqrt(var + eps)
                if active:
                    for k in range(words):
                        gi = k * tpr + t
                        if gi < ng:
                            if has_w:
                                load_group(w, gi, ws, 0)
                            if has_b:
                                load_group(b, gi, bs, 0)
                            for j in range(vec):
                                v = ((xs[k * vec + j] - mu) - dmu) * r
                                if has_w:
                                    v = v * ws[j]
                                if has_b:
                                    v = v + bs[j]
                                xs[k * vec + j] = v
                            store_group(y, base + gi, xs, k * vec)
                    if t == 0:
                        if not rms:
                            mean_out[np.uint64(row)] = mu + dmu
                        rstd_out[np.uint64(row)] = r
                row += stride

        return Kernel(name, norm_fwd_rows, argtypes, **_JIT)

    unroll = _UNROLL[vec]
    chunk = unroll * vec

    def norm_fwd_stream(x, w, b, y, mean_out, rstd_out, m, n, eps):
        """Streaming kernel: same math and arguments as the row kernel, for rows of
        any length. Block ``(tpr, 1)`` takes rows blockIdx.x, + gridDim.x, ...;
        thread t handles groups t, t + tpr, ... ``unroll`` at a time. Passes over
        the row: sum (LayerNorm only), sum of squared deviations, write."""
        red = cuda.shared.array((2, 32), np.float32)
        red2 = cuda.shared.array((2, 2, 32), np.float32)
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
            if not rms:
                s = np.float32(0.0)
                c = t
                while c < ng:
                    for u in range(unroll):
                        gi = c + u * tpr
                        if gi < ng:
                            load_group(x, base + gi, xs, u * vec)
                        else:
                            for j in range(vec):
                                xs[u * vec + j] = np.float32(0.0)
                    for j in range(chunk):
                        s += xs[j]
                    c += step
                mu = _row_sum(s, red, phase) / nf
                phase ^= 1
            sd = np.float32(0.0)
            ss = np.float32(0.0)
            c = t
            while c < ng:
                for u in range(unroll):
                    gi = c + u * tpr
                    if gi < ng:
                        load_group(x, base + gi, xs, u * vec)
                    else:
                        for j in range(vec):
                            xs[u * vec + j] = mu
                for j in range(chunk):
                    d = xs[j] - mu
                    sd += d
                    ss += d * d
                c += step
            dmu = np.float32(0.0)
            if rms:
                var = _row_sum(ss, red, phase) / nf
            else:
                sd, ss = _row_sum2(sd, ss, red2, phase)
                dmu = sd / nf
                var = max((ss - sd * dmu) / nf, np.float32(0.0))
            phase ^= 1
            r = np.float32(1.0) / math.sqrt(var + eps)
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
                            v = ((xs[u * vec + j] - mu) - dmu) * r
                            if has_w:
                                v = v * ws[j]
                            if has_b:
                                v = v + bs[j]
                            xs[u * vec + j] = v
                        store_group(y, base + gi, xs, u * vec)
                c += step
            if t == 0:
                if not rms:
                    mean_out[np.uint64(row)] = mu + dmu
                rstd_out[np.uint64(row)] = r
            row += cuda.gridDim.x

    return Kernel(name, norm_fwd_stream, argtypes, **_JIT)


@functools.lru_cache(maxsize=None)
def make_backward_kernel(dtype, rms, has_w, has_b, vector, words):
    """Backward kernel (dx, and dw/db partial rows) for ``dtype`` storage; flags as
    :func:`make_forward_kernel` (has_w: the forward multiplied by w, so dx uses w and
    dw is wanted; has_b: db is wanted)."""
    if rms and has_b:
        raise ValueError("RMSNorm has no bias")
    vec = _vec_of(dtype, vector)
    load_group, store_group = _group_io(dtype, vector)
    part_store, part_add, part_add_cg = _partial_io(vec, vector)
    affine = has_w or has_b
    st = types.Array(_kernel_storage(dtype, vector), 1, "C")
    argtypes = (st, st, st, _F32_1D, _F32_1D, st, _F32_1D, _F32_1D, _I32_1D,
                types.int64, types.int64, types.int64, types.int32)
    name = f"norm_bwd_{dtype}_{_variant_name(rms, has_w, has_b)}_{_layout_name(vector, words)}"

    if words:
        elems = words * vec
        acc_w = elems if has_w else 1
        acc_b = elems if has_b else 1
        comb_size = vec * _MAX_BLOCK if affine else 1
        nraw = 4 * words
        raw_t = _kernel_storage(dtype, True)
        load_raw, elem = _raw_io(dtype)

        @cuda.jit(device=True, inline="always")
        def fold(acc, comb, k):
            """acc[k*vec : (k+1)*vec] of row slot 0 = the sum over the block's row
            slots of theirs, added in slot order through ``comb`` (shared, vec *
            threads floats). Every thread of the block calls it."""
            t = cuda.threadIdx.x
            tpr = cuda.blockDim.x
            nt = tpr * cuda.blockDim.y
            tid = cuda.threadIdx.y * tpr + t
            for j in range(vec):
                comb[j * nt + tid] = acc[k * vec + j]
            cuda.syncthreads()
            if cuda.threadIdx.y == 0:
                for j in range(vec):
                    a = np.float32(0.0)
                    for gg in range(cuda.blockDim.y):
                        a += comb[j * nt + gg * tpr + t]
                    acc[k * vec + j] = a
            cuda.syncthreads()

        def norm_bwd_rows(dy, x, w, mean, rstd, dx, pw, pb, locks, m, n, ngroups, use_lock):
            """Row kernel: dx[r, :] = (wdy - (xhat * c1 + c2)) * rstd[r] with xhat =
            (x - mean[r]) * rstd[r], wdy = w * dy, c1 = sum(xhat * wdy) / n, c2 =
            sum(wdy) / n (RMSNorm: mean = 0, c2 = 0); the block's share of dw =
            sum_r dy * xhat and db = sum_r dy goes out as one float32 partial row.

            Block ``(tpr, rpb)`` and rows as in the forward row kernel. A thread keeps
            its groups of x and dy as raw words (rx, rd) between the reduction and dx,
            and its dw/db accumulators (aw, ab) over all its rows; the row slots'
            accumulators are folded into slot 0 at the end.
            dy, x, dx: ``[m, n]`` as 1-D views of 16-byte groups.
            w: ``[n]`` view (unused without has_w). mean, rstd: float32 ``[m]`` saved
            by the forward (mean unused for RMSNorm).
            pw, pb: float32 partial rows, flattened ``[R, n]`` (unused when not wanted).
            locks: int32 ``[2 * ngroups]``, zero on entry (lock scheme only).
            ngroups: lock scheme: R = ngroups <= gridDim.x; block b adds into row
            b % ngroups under lock b % ngroups. use_lock: 1 = lock scheme, 0 = block b
            stores row b (R = gridDim.x).
            """
            red = cuda.shared.array((2, 2, 32), np.float32)
            flag = cuda.shared.array(1, np.int32)
            comb = cuda.shared.array(comb_size, np.float32)
            rx = cuda.local.array(nraw, raw_t)
            rd = cuda.local.array(nraw, raw_t)
            rw = cuda.local.array(4, raw_t)
            ob = cuda.local.array(vec, np.float32)
            aw = cuda.local.array(acc_w, np.float32)
            ab = cuda.local.array(acc_b, np.float32)
            t = cuda.threadIdx.x
            tpr = cuda.blockDim.x
            rpb = cuda.blockDim.y
            ng = n // vec
            nf = np.float32(n)
            for j in range(acc_w):
                aw[j] = np.float32(0.0)
            for j in range(acc_b):
                ab[j] = np.float32(0.0)
            phase = 0
            row = cuda.blockIdx.x * rpb + cuda.threadIdx.y
            row_end = m + cuda.threadIdx.y
            stride = cuda.gridDim.x * rpb
            while row < row_end:
                active = row < m
                base = row * ng
                mu = np.float32(0.0)
                rs = np.float32(0.0)
                if active:
                    if not rms:
                        mu = mean[np.uint64(row)]
                    rs = rstd[np.uint64(row)]
                s1 = np.float32(0.0)
                s2 = np.float32(0.0)
                for k in range(words):
                    gi = k * tpr + t
                    if active and gi < ng:
                        load_raw(x, base + gi, rx, 4 * k)
                        load_raw(dy, base + gi, rd, 4 * k)
                        if has_w:
                            load_raw(w, gi, rw, 0)
                        for j in range(vec):
                            o = k * vec + j
                            h = (elem(rx, 4 * k, j) - mu) * rs
                            dj = elem(rd, 4 * k, j)
                            d = dj
                            if has_w:
                                aw[o] += dj * h
                                d = dj * elem(rw, 0, j)
                            if has_b:
                                ab[o] += dj
                            s1 += h * d
                            s2 += d
                    else:
                        for i in range(4):
                            rx[4 * k + i] = raw_t(0)
                            rd[4 * k + i] = raw_t(0)
                s1, s2 = _row_sum2(s1, s2, red, phase)
                phase ^= 1
                c1 = s1 / nf
                c2 = np.float32(0.0) if rms else s2 / nf
                if active:
                    for k in range(words):
                        gi = k * tpr + t
                        if gi < ng:
                            if has_w:
                                load_raw(w, gi, rw, 0)
                            for j in range(vec):
                                h = (elem(rx, 4 * k, j) - mu) * rs
                                d = elem(rd, 4 * k, j)
                                if has_w:
                                    d = d * elem(rw, 0, j)
                                ob[j] = (d - (h * c1 + c2)) * rs
                            store_group(dx, base + gi, ob, 0)
                row += stride
            if affine:
                if rpb > 1:
                    for k in range(words):
                        if has_w:
                            fold(aw, comb, k)
                        if has_b:
                            fold(ab, comb, k)
                if use_lock:
                    prow = cuda.blockIdx.x % ngroups
                    first = _acquire(locks, prow, ngroups, flag)
                    if cuda.threadIdx.y == 0:
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
                elif cuda.threadIdx.y == 0:
                    prow = cuda.blockIdx.x
                    for k in range(words):
                        gi = k * tpr + t
                        if gi < ng:
                            e = prow * n + gi * vec
                            if has_w:
                                part_store(pw, e, aw, k * vec)
                            if has_b:
                                part_store(pb, e, ab, k * vec)

        return Kernel(name, norm_bwd_rows, argtypes, **_JIT)

    unroll = _UNROLL[vec]
    chunk = unroll * vec

    def norm_bwd_stream(dy, x, w, mean, rstd, dx, pw, pb, locks, m, n, ngroups, use_lock):
        """Streaming kernel: same math and arguments as the row kernel, for rows of
        any length. Block ``(tpr, 1)`` takes rows blockIdx.x, + gridDim.x, ...;
        thread t handles groups t, t + tpr, ... ``unroll`` at a time. Pass 1 reads
        x, dy (and w) for c1, c2; pass 2 reads them again, writes dx and adds the
        row's dy * xhat, dy into the partial rows: lock scheme row b % ngroups, under
        its lock for each row (the seed's per-row locking); else the block's own row
        b (stored by the block's first row, then added to)."""
        red = cuda.shared.array((2, 2, 32), np.float32)
        flag = cuda.shared.array(1, np.int32)
        xs = cuda.local.array(chunk, np.float32)
        ds = cuda.local.array(chunk, np.float32)
        ws = cuda.local.array(chunk, np.float32)
        t = cuda.threadIdx.x
        tpr = cuda.blockDim.x
        bid = cuda.blockIdx.x
        ng = n // vec
        nf = np.float32(n)
        step = tpr * unroll
        phase = 0
        row = bid
        while row < m:
            base = row * ng
            mu = np.float32(0.0)
            if not rms:
                mu = mean[np.uint64(row)]
            rs = rstd[np.uint64(row)]
            s1 = np.float32(0.0)
            s2 = np.float32(0.0)
            c = t
            while c < ng:
                for u in range(unroll):
                    gi = c + u * tpr
                    if gi < ng:
                        load_group(x, base + gi, xs, u * vec)
                        load_group(dy, base + gi, ds, u * vec)
                        if has_w:
                            load_group(w, gi, ws, u * vec)
                for u in range(unroll):
                    if c + u * tpr < ng:
                        for j in range(vec):
                            o = u * vec + j
                            h = (xs[o] - mu) * rs
                            d = ds[o] * ws[o] if has_w else ds[o]
                            s1 += h * d
                            s2 += d
                c += step
            s1, s2 = _row_sum2(s1, s2, red, phase)
            phase ^= 1
            c1 = s1 / nf
            c2 = np.float32(0.0) if rms else s2 / nf
            first = row == bid
            prow = bid
            if affine and use_lock:
                prow = bid % ngroups
                first = _acquire(locks, prow, ngroups, flag)
            c = t
            while c < ng:
                for u in range(unroll):
                    gi = c + u * tpr
                    if gi < ng:
                        load_group(x, base + gi, xs, u * vec)
                        load_group(dy, base + gi, ds, u * vec)
                        if has_w:
                            load_group(w, gi, ws, u * vec)
                for u in range(unroll):
                    gi = c + u * tpr
                    if gi < ng:
                        for j in range(vec):
                            o = u * vec + j
                            h = (xs[o] - mu) * rs
                            d = ds[o] * ws[o] if has_w else ds[o]
                            xs[o] = (d - (h * c1 + c2)) * rs
                            ws[o] = ds[o] * h
                        store_group(dx, base + gi, xs, u * vec)
                        e = prow * n + gi * vec
                        if has_w:
                            if not first:
                                if use_lock:
                                    part_add_cg(pw, e, ws, u * vec)
                                else:
                                    part_add(pw, e, ws, u * vec)
                            part_store(pw, e, ws, u * vec)
                        if has_b:
                            if not first:
                                if use_lock:
                                    part_add_cg(pb, e, ds, u * vec)
                                else:
                                    part_add(pb, e, ds, u * vec)
                            part_store(pb, e, ds, u * vec)
                c += step
            if affine and use_lock:
                _release(locks, prow)
            row += cuda.gridDim.x

    return Kernel(name, norm_bwd_stream, argtypes, **_JIT)


@functools.lru_cache(maxsize=None)
def make_dwdb_kernel(dtype):
    """Column sums of float32 partial rows into ``dtype`` outputs."""
    store = dtypes.storer(dtype)
    st = types.Array(dtypes.numba_storage_type(dtype), 1, "C")

    def norm_dwdb(p0, p1, o0, o1, r, n):
        """o[c] = sum_{i < r} p[i * n + c] for c < n, with (p, o) = (p0, o0) for
        blockIdx.y == 0 and (p1, o1) for blockIdx.y == 1.

        p0, p1: float32 partial rows, flattened ``[r, n]``. o0, o1: ``[n]`` outputs
        in ``dtype``. Block (bx <= 32, by <= 32): thread (tx, ty) sums rows ty,
        ty + by, ... of column blockIdx.x * bx + tx in four interleaved float32
        accumulators; the by partials are added in ty order: the result depends only
        on (r, n, block shape), never on timing.
        """
        tile = cuda.shared.array((32, 33), np.float32)
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
        if col < n:
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
        tile[ty, tx] = (a0 + a1) + (a2 + a3)
        cuda.syncthreads()
        if ty == 0 and col < n:
            acc = np.float32(0.0)
            for k in range(by):
                acc += tile[k, tx]
            if second:
                store(o1, col, acc)
            else:
                store(o0, col, acc)

    return Kernel(f"norm_dwdb_{dtype}", norm_dwdb, (_F32_1D, _F32_1D, st, st, types.int64,
                                                     types.int64), **_JIT)


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


def shipped_kernels():
    """Every kernel specialisation the launchers can pick."""
    for dtype in dtypes.DTYPES:
        for rms, has_w, has_b in _variants():
            for direction, factory in (("fwd", make_forward_kernel), ("bwd", make_backward_kernel)):
                vec = _vec_of(dtype, True)
                for words in _WORDS[(direction, vec)] + (0,):
                    yield factory(dtype, rms, has_w, has_b, True, words)
                yield factory(dtype, rms, has_w, has_b, False, 0)
        yield make_dwdb_kernel(dtype)
    yield _zero_kernel()


# ---------------------------------------------------------------------------------
# Launch heuristics
# ---------------------------------------------------------------------------------

_TUNING_DEFAULTS = {
    # Largest threads-per-row (multiple of 32); rows needing more stream.
    "max_tpr": _MAX_BLOCK,
    # Forward row kernels: rows per block = fwd_block // tpr (at least 1).
    "fwd_block": 256,
    # Backward row kernels: rows per block = bwd_block // tpr (at least 1).
    "bwd_block": 512,
    # Backward persistent grid: SMs x (bwd_threads_per_sm // block) blocks. More
    # resident threads would not fit the registers (~56 per thread) and would add
    # partial rows for _dwdb to read.
    "bwd_threads_per_sm": 1024,
    # _dwdb block (columns, row slices), each at most 32.
    "reduce_block": (32, 32),
    # Tests and benchmarks: force the backward grid / the lock scheme's buffer count.
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


@contextlib.contextmanager
def tuning(**overrides):
    """Temporarily override the launch heuristics (for tests and benchmarks).

    Keys: max_tpr (multiple of 32, <= 1024), fwd_block, bwd_block,
    bwd_threads_per_sm, reduce_block ((cols, rows), each <= 32), bwd_grid (force the
    backward grid; a block per row reproduces the seed's per-row locking),
    group_size (force the lock scheme's GROUP_SIZE_M), sm_count.
    """
    unknown = set(overrides) - set(_TUNING_DEFAULTS)
    if unknown:
        raise TypeError(f"unknown tuning keys {sorted(unknown)}")
    tpr = overrides.get("max_tpr", _tune["max_tpr"])
    if not (isinstance(tpr, int) and 32 <= tpr <= _MAX_BLOCK and tpr % 32 == 0):
        raise ValueError(f"max_tpr must be a multiple of 32 in [32, {_MAX_BLOCK}], got {tpr!r}")
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


@functools.lru_cache(maxsize=None)
def _sm_count(arr):
    if _tune["sm_count"] is not None:
        return int(_tune["sm_count"])
    return sm_count(arr.device)


def _round_warp(v):
    return cdiv(v, WARP) * WARP


# Elements per thread the layouts aim for: the forward holds one row slice (16 floats,
# 32-64 bytes of loads in flight per thread), the backward x, dy and two accumulators.
_TARGET_ELEMS = {"fwd": 16, "bwd": 8}


def _row_layout(n, vec, direction):
    """(words, tpr): register groups per thread (0 = streaming kernel) and threads
    per row. Prefers no idle lanes, then _TARGET_ELEMS elements per thread."""
    ng = n // vec
    max_tpr = _tune["max_tpr"]
    target = _TARGET_ELEMS[direction]
    best = None
    if vec > 1:
        for words in _WORDS[(direction, vec)]:
            tpr = _round_warp(cdiv(ng, words))
            if tpr > max_tpr:
                continue
            key = (tpr * words - ng, abs(words * vec - target), -words)
            if best is None or key < best[0]:
                best = (key, words, tpr)
    if best is not None:
        return best[1], best[2]
    return 0, min(max_tpr, _round_warp(cdiv(ng, _UNROLL[vec])))


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


def _forward(x, weight, bias, eps, rms):
    xa = _check_input(x, "x")
    n = xa.shape[-1]
    lead = xa.shape[:-1]
    m = xa.size // n if n else int(np.prod(lead, dtype=np.int64))
    wa = _check_param(weight, "weight", n, xa)
    ba = None if rms else _check_param(bias, "bias", n, xa)
    eps = _check_eps(eps)
    if m == 0:
        y = empty_like_lib(xa, xa.shape, xa.dtype)
        mean = None if rms else empty_like_lib(xa, lead, "float32")
        return y, mean, empty_like_lib(xa, lead, "float32")
    if n == 0:
        raise ValueError(f"x's last dimension (the normalized one) must be >= 1, got shape {xa.shape}")
    dtype = xa.dtype
    y = empty_like_lib(xa, xa.shape, dtype)
    mean = None if rms else empty_like_lib(xa, lead, "float32")
    rstd = empty_like_lib(xa, lead, "float32")
    vector = _can_vectorize(n, dtype, (xa, wa, ba, y))
    words, tpr = _row_layout(n, _vec_of(dtype, vector), "fwd")
    rpb = max(1, min(_tune["fwd_block"] // tpr, m)) if words else 1
    grid = min(cdiv(m, rpb), 2**31 - 1)
    kernel = make_forward_kernel(dtype, rms, wa is not None, ba is not None, vector, words)
    vdt = _view_dtype(dtype, vector)
    xv = _view(xa, vdt)
    rv = _view(rstd, "float32")
    kernel.launch((grid,), (tpr, rpb), stream_handle(xa), [
        xv, xv if wa is None else _view(wa, vdt), xv if ba is None else _view(ba, vdt),
        _view(y, vdt), _unused(rv, "float32") if mean is None else _view(mean, "float32"), rv,
        m, n, eps])
    return y, mean, rstd


def _backward(grad_out, x, weight, bias, mean, rstd, deterministic, rms):
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
    gx = empty_like_lib(ga, ga.shape, dtype)
    stream = stream_handle(ga)
    vector = _can_vectorize(n, dtype, (ga, xa, wa, gx))
    words, tpr = _row_layout(n, _vec_of(dtype, vector), "bwd")
    rpb = max(1, min(_tune["bwd_block"] // tpr, m)) if words else 1
    block = rpb * tpr
    rows = cdiv(m, rpb)
    if _tune["bwd_grid"] is not None:
        grid = min(rows, int(_tune["bwd_grid"]))
    else:
        grid = min(rows, _sm_count(ga) * max(1, _tune["bwd_threads_per_sm"] // block))
    affine = has_w or has_b
    use_lock = affine and not deterministic
    if use_lock:
        ngroups = min(int(_tune["group_size"] or group_size_m(n)), grid)
        nparts = ngroups
    else:
        ngroups = 1
        nparts = grid
    pw = empty_like_lib(ga, (nparts * n,), "float32") if has_w else None
    pb = empty_like_lib(ga, (nparts * n,), "float32") if has_b else None
    rv = _view(rstda, "float32")
    if use_lock:
        locks = empty_like_lib(ga, (2 * ngroups,), "int32")
        _zero(locks)
    else:
        locks = _view(rstda, "int32")
    vdt = _view_dtype(dtype, vector)
    gv = _view(ga, vdt)
    kernel = make_backward_kernel(dtype, rms, has_w, has_b, vector, words)
    kernel.launch((grid,), (tpr, rpb), stream, [
        gv, _view(xa, vdt), gv if wa is None else _view(wa, vdt),
        rv if meana is None else _view(meana, "float32"), rv, _view(gx, vdt),
        rv if pw is None else pw, rv if pb is None else pb, locks,
        m, n, ngroups, 1 if use_lock else 0])
    gw = gb = None
    if affine:
        gw = empty_like_lib(ga, wa.shape, dtype) if has_w else None
        gb = empty_like_lib(ga, ba.shape, dtype) if has_b else None
        pairs = [(p, o) for p, o in ((pw, gw), (pb, gb)) if p is not None]
        (p0, o0), (p1, o1) = pairs[0], pairs[-1]
        bx, by = _tune["reduce_block"]
        o0 = _view(o0, dtype)
        o1 = _view(o1, dtype) if len(pairs) == 2 else _unused(o0, dtype)
        make_dwdb_kernel(dtype).launch((cdiv(n, bx), len(pairs)), (bx, by), stream, [
            p0, p1, o0, o1, nparts, n])
    return gx, gw, gb


def _owner(a):
    return None if a is None else a.owner


# ---------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------

def layer_norm_forward(x, weight=None, bias=None, eps=1e-5):
    """LayerNorm over the last dimension of ``x``.

    x: ``[..., N]`` float32/float16/bfloat16 GPU array, C-contiguous.
    weight, bias: ``[N]`` of x's dtype, or None.
    eps: finite float >= 0, added to the variance.
    Returns ``(y, mean, rstd)``: y like x; mean and rstd float32 of shape
    ``x.shape[:-1]`` (for :func:`layer_norm_backward`), allocated in x's library.
    """
    y, mean, rstd = _forward(x, weight, bias, eps, rms=False)
    return y.owner, mean.owner, rstd.owner


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


def rms_norm_forward(x, weight=None, eps=1e-6):
    """RMSNorm over the last dimension: ``y = x * rstd * weight`` with
    ``rstd = 1 / sqrt(mean(x^2) + eps)``. Arguments as :func:`layer_norm_forward`.
    Returns ``(y, rstd)``; rstd float32 of shape ``x.shape[:-1]``."""
    y, _, rstd = _forward(x, weight, None, eps, rms=True)
    return y.owner, rstd.owner


def rms_norm_backward(grad_out, x, weight, rstd, deterministic=False):
    """Gradients of :func:`rms_norm_forward`; arguments as :func:`layer_norm_backward`.
    Returns ``(grad_x, grad_weight or None)``."""
    gx, gw, _ = _backward(grad_out, x, weight, None, None, rstd, deterministic, rms=True)
    return gx.owner, _owner(gw)


# ---------------------------------------------------------------------------------
# float64 references (tests, benchmarks)
# ---------------------------------------------------------------------------------

def _f64(a):
    if a is None:
        return None
    if hasattr(a, "detach"):
        return a.detach().cpu().double().numpy()
    if hasattr(a, "get") and not isinstance(a, np.ndarray):
        return np.asarray(a.get(), dtype=np.float64)
    if hasattr(a, "copy_to_host"):
        return np.asarray(a.copy_to_host(), dtype=np.float64)
    return np.asarray(a, dtype=np.float64)


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
    x64 = _f64(x)
    w = _f64(weight)
    b = _f64(bias)
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
    dx, dw, db = _ref_backward(x64, xhat, rstd, w, _f64(grad_out), centered=True)
    return out + (dx, dw, None if b is None else db)


def rms_norm_ref(x, weight=None, eps=1e-6, grad_out=None):
    """float64 RMSNorm on the host. Returns ``(y, rstd)``, and with ``grad_out`` also
    ``(grad_x, grad_weight or None)``."""
    x64 = _f64(x)
    w = _f64(weight)
    rstd = 1.0 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + float(eps))
    xhat = x64 * rstd
    y = xhat if w is None else xhat * w
    out = (y, rstd[..., 0])
    if grad_out is None:
        return out
    dx, dw, _ = _ref_backward(x64, xhat, rstd, w, _f64(grad_out), centered=False)
    return out + (dx, dw)
