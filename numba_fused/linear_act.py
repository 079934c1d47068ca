"""Fused linear + activation on tensor cores: forward, activation-gradient (dgrad)
and full backward.

With ``x`` flattened to ``[M, K]`` (any leading shape), ``weight`` ``[N, K]`` and
``bias`` ``[N]``::

    preact = x @ weight^T + bias                      (float32 accumulation)
    y      = act(preact)                              linear_act_forward
    dgrad  = (grad_out @ weight) * act'(preact)       linear_act_dgrad
             (grad_out [M, N], weight [N, K], preact [M, K]: the seed's kernel_bwd)
    grad_z = grad_out * act'(preact)                  linear_act_backward
    grad_x = grad_z @ weight,  grad_weight = grad_z^T @ x,  grad_bias = sum_m grad_z

Every matmul is one of three GEMMs ``C[Mg, Ng] = sum_k A[m, k] B[k, n]`` that differ
in how A and B lie in memory and in the epilogue:

| role  | A (storage)             | B (storage)           | epilogue                        |
|-------|-------------------------|-----------------------|---------------------------------|
| fwd   | x ``[Mg][Kg]``          | weight ``[Ng][Kg]``   | + bias, save preact, act        |
| dgrad | grad ``[Mg][Kg]``       | weight ``[Kg][Ng]``   | * act'(preact)                  |
| wgrad | grad_z ``[Kg][Mg]``     | x ``[Kg][Ng]``        | grad_bias = row sums of A       |

Tensor-core path (float16 / bfloat16)
-------------------------------------
A block computes a ``BM x BN`` tile of C with ``(BM/WM) x (BN/WN)`` warps, each a
``WM x WN`` tile of ``m16n8k16`` mma.sync (``numba_fused.tensor_core``), float32
accumulators in registers. A and B tiles of ``BK`` along k stream through a
``STAGES``-deep ring of shared-memory buffers filled by 16-byte ``cp.async``
(zero-filled past the matrix edges, so ragged M, N and K need no other masking on
the load side), one commit group per k-tile; iteration ``kt`` waits for tile ``kt``,
issues tile ``kt + STAGES - 1`` into the buffer freed one iteration earlier, then
runs the mma of tile ``kt``. Fragments come from shared memory by ``ldmatrix``
(``.trans`` for operands stored mn-major). Shared tiles are XOR-swizzled in 16-byte
chunks (chunk ``c`` of row ``r`` lands at ``c ^ ((r >> SH) & MK)``), which makes
both the cp.async writes and every ldmatrix phase free of bank conflicts without
padding. Block ids are reordered in groups of ``GROUP_M`` row-tiles (the seed's
GROUP_M) so that concurrently running blocks share A and B tiles in L2.
When an operand's rows are not 16-byte aligned (a leading dimension not a
multiple of 8, or an offset view) the tiles are filled by ordinary element loads
instead (``vec=False``): same pipeline, synchronous copies. GEMMs of at least
``RESTRIDE_MIN_MACS`` multiply-adds first copy such operands to aligned rows
(``make_restride_kernel``; the backward writes grad_z that way once, act' fused) and
keep the 16-byte loads, on wgmma where its rule takes them.

The epilogue works on the accumulator fragments directly: each lane holds pairs of
adjacent columns, stored as one 32-bit word (``pack_*x2``, round to nearest even)
when the row stride is even and the pointers 4-byte aligned, else element by
element. The weight gradient's bias term is fused into the wgrad GEMM: blocks in the
first column of tiles add one extra mma per k-step with B = ones, giving exact
float32 row sums of A on the tensor cores, deterministic run to run.

A forward with a few output rows (a decoder's tokens) has too few tiles to keep
every SM streaming the weight: it splits the k-tiles (``make_tc_kernel(split=True)``,
:func:`split_k_auto`). Each block of a tile sums its share into a float32
workspace; the last to arrive (an arrival counter per tile) adds the parts in a
fixed order and runs the epilogue, so the bits do not depend on which block came
last.

float32 path
------------
float32 inputs use a CUDA-core GEMM (``make_simt_kernel``: ``BM x BN`` tiles in
padded shared memory, ``TM x TN`` outputs per thread, float32 FMA), keeping float32
accuracy (tf32 tensor cores would not meet the float32 tolerance). Same roles, same
epilogues.

The activation is a run-time argument (``act`` code, index into
``activations.ACTIVATIONS``): the epilogue is a few percent of a GEMM, and one kernel
per role instead of six keeps compile time and the number of specialisations down.
"""

import contextlib
import functools
from typing import NamedTuple

import numpy as np
from numba import cuda, types

from interop.dlpack import KernelArray, c_strides, empty_like_lib, stream_handle

from . import checks, dtypes, fast_act, tma
from .activations import ACTIVATIONS, act_grad_ref, act_ref, check_activation, device_act
from .intrinsics import f32_as_u32, ld_cg_f32, u32_as_f32
from .jit import inline_device
from .launch import SIMULATOR, Kernel, cdiv, sm_count
from .plan import NOW, Recorder
from .reductions import FULL_MASK
from .stream_buffers import StreamZeros, clear_u32_counters
from .tensor_core import (
    LOAD_POLICIES, ONES_BF16X2, ONES_F16X2, cp_async_16, cp_async_commit,
    cp_async_mbarrier_arrive, cp_async_wait, fence_proxy_async, fence_proxy_tensormap,
    half_packers, ld_global_b32, ld_global_v4, ld_global_v4_evict, ldmatrix_x4_at,
    ldmatrix_x4_trans_at, mbarrier_arrive, mbarrier_arrive_expect_tx, mbarrier_init,
    mbarrier_wait, mma_bf16, mma_f16, named_barrier_sync, setmaxnreg_dec, setmaxnreg_inc,
    shared_address, st_global_b32, st_global_v2, st_global_v4, tma_load_2d, wgmma_commit,
    wgmma_desc, wgmma_fence, wgmma_op, wgmma_wait)

__all__ = [
    "linear_act_forward", "linear_act_dgrad", "linear_act_backward", "linear_weight_grad",
    "activation_backward",
    "linear_act_ref", "linear_act_dgrad_ref", "linear_act_backward_ref",
    "GemmConfig", "SimtConfig", "WgmmaConfig", "make_tc_kernel", "make_simt_kernel",
    "make_wgmma_kernel", "make_act_grad_kernel", "make_restride_kernel", "use_wgmma",
    "wgmma_auto", "use_split_k", "split_k_auto", "SkinnyConfig", "make_skinny_kernel",
    "use_skinny", "skinny_auto", "shipped_kernels", "ACT_CODES",
]

ACT_CODES = {name: i for i, name in enumerate(ACTIVATIONS)}
ROLES = ("fwd", "dgrad", "wgrad")

# Epilogue flag bits.
F_BIAS = 1      # fwd: add bias; wgrad: write grad_bias
F_PREACT = 2    # fwd: store the pre-activation
F_VEC = 4       # out, aux, bias rows 16-byte aligned: 16-byte epilogue accesses
# Gated (GLU) epilogues, for numba_fused.gated_linear: the GEMM's output columns are
# (gate, up) pairs, column 2j the gate and 2j + 1 the up projection of hidden unit j.
# fwd: out[m, j] = act(gate) * up (out's row length ldc = N / 2; aux, the preact pairs,
# 2 ldc). dgrad: the GEMM gives d out (dH); aux holds the preact pairs and out gets
# (dH * up * act'(gate), dH * act(gate)) pairs (both rows 2N long: ldc = 2N).
F_GATED = 8

_SMEM_ALIGN = None if SIMULATOR else 16  # the simulator takes no alignment argument


class GemmConfig(NamedTuple):
    """Tensor-core tiling: block tile ``bm x bn``, k-tile ``bk``, warp tile
    ``wm x wn``, ``stages`` shared buffers, ``group_m`` row-tiles per L2 group."""

    bm: int
    bn: int
    bk: int
    wm: int
    wn: int
    stages: int
    group_m: int

    @property
    def threads(self):
        return (self.bm // self.wm) * (self.bn // self.wn) * 32

    @property
    def smem_bytes(self):
        """Dynamic shared memory: the operand ring, reused for the float32 C tile."""
        return max(self.stages * (self.bm + self.bn) * self.bk * 2, self.bm * (self.bn + 8) * 4)

    def validate(self):
        p2 = all(v > 0 and v & (v - 1) == 0 for v in (self.bm, self.bn, self.bk))
        if not (p2 and self.bk >= 16 and self.bm >= 16 and self.bn >= 16):
            raise ValueError(f"{self}: bm, bn, bk must be powers of two >= 16")
        wp2 = all(v >= 16 and v & (v - 1) == 0 for v in (self.wm, self.wn))
        if not wp2 or self.bm % self.wm or self.bn % self.wn:
            raise ValueError(f"{self}: warp tiles must be powers of two >= 16 dividing the "
                             f"block tile")
        if not 2 <= self.stages <= 8 or self.group_m < 1:
            raise ValueError(f"{self}: stages must be in [2, 8] and group_m >= 1")
        if self.threads > 1024:
            raise ValueError(f"{self}: {self.threads} threads per block (at most 1024)")
        return self


class SimtConfig(NamedTuple):
    """CUDA-core (float32) tiling: block tile ``bm x bn``, k-tile ``bk``, ``tm x tn``
    outputs per thread, ``group_m`` row-tiles per L2 group."""

    bm: int
    bn: int
    bk: int
    tm: int
    tn: int
    group_m: int

    @property
    def threads(self):
        return (self.bm // self.tm) * (self.bn // self.tn)


class WgmmaConfig(NamedTuple):
    """Hopper warpgroup-MMA tiling: block tile ``bm x bn`` (``bm / 64`` warpgroups,
    each 64 rows x bn), k-tile ``bk``, ``stages`` shared buffers, ``group_m``;
    ``inflight`` k-tiles of MMAs left running while the next tile's are issued (0:
    wait for them every tile; 1: keep one in flight, prefetching one tile less);
    ``swizzle`` the operand tiles' shared layout (0: no-swizzle core matrices; 128:
    the 128-byte swizzle, bk = 64; see :func:`make_wgmma_kernel`); ``ws`` 1: warp
    specialised, one more warpgroup loads the tiles (cp.async, completion on mbarriers)
    while the others only multiply; ``pfence`` (warp specialised only) 1: the producer
    waits for its copies (``stages - 2`` tiles behind), fences them into the async
    proxy and arrives, so the consumers need no fence (0: ``cp.async.mbarrier.arrive``
    and a fence by every consumer thread each k-tile); ``hoist`` (forward) 1: each
    epilogue thread loads its 8 bias values once per tile (its chunk column is the
    same in every epilogue iteration) instead of once per chunk; ``tma`` 1 (forward,
    warp specialised, 128-byte swizzle): one producer thread fills
    each ring slot with two TMA copies (:func:`numba_fused.tensor_core.tma_load_2d`,
    A's and B's boxes through tensor maps the launcher looks up or makes
    (:func:`numba_fused.tma.cached_map_2d`), out-of-bounds
    rows and k zero-filled by the copy engine) whose bytes complete ``full[s]``,
    instead of 128 threads' cp.async; the kernel takes the two maps after ``out``
    (the pair form: three after ``b2``, B's halves as two boxes from b and b2).
    Plans (recorded launches) make or look up the maps from each call's pointers
    (:meth:`numba_fused.plan.Executor.derived`). ``epi`` 1: the epilogue's
    activations (and dgrad's derivatives) take :func:`fast_act_switch`'s
    branch-free forms, a 16-byte chunk's 8 (gated: 4) under one switch (0:
    :func:`act_by_code`'s libdevice forms, one switch an element); 2: as 1, and the
    epilogue's shared-memory indices unsigned 32-bit (no negative-index wrap-around,
    one base a thread for the accumulator stores, the chunk loop's row stepped); 3: as
    2, and the forward's whole tiles with 16-byte rows (F_VEC) finished from the
    accumulators' registers, with no C tile in shared memory and no barrier (see
    :func:`make_wgmma_kernel`)."""

    bm: int
    bn: int
    bk: int
    stages: int
    group_m: int
    inflight: int = 0
    swizzle: int = 0
    ws: int = 0
    pfence: int = 0
    hoist: int = 0
    tma: int = 0
    epi: int = 0

    @property
    def threads(self):
        return (self.bm // 64 + self.ws) * 128

    @property
    def bar_offset(self):
        """Byte offset of the mbarriers (warp specialised: full[stages], then
        empty[stages], 8 bytes each) after the ring, the ones tile and the C tile."""
        base = max(self.stages * (self.bm + self.bn) * self.bk * 2 + 256,
                   self.bm * (self.bn + 8) * 4)
        return -(-base // 8) * 8

    @property
    def smem_bytes(self):
        """The operand ring and wgrad's 8 x 16 tile of ones after it (256 bytes),
        reused for the float32 C tile; warp specialised, the mbarriers after both."""
        return self.bar_offset + 16 * self.stages if self.ws else max(
            self.stages * (self.bm + self.bn) * self.bk * 2 + 256, self.bm * (self.bn + 8) * 4)

    def validate(self):
        if self.bm not in (64, 128, 192, 256) or self.bn % 8 or not 8 <= self.bn <= 256:
            raise ValueError(f"{self}: bm must be 64 x 1..4 warpgroups and bn a multiple of "
                             f"8 in [8, 256]")
        if self.bk not in (16, 32, 64, 128) or not 2 <= self.stages <= 8 or self.group_m < 1:
            raise ValueError(f"{self}: bk in 16..128 (power of two), stages in [2, 8], "
                             f"group_m >= 1")
        if self.inflight not in (0, 1) or self.stages - 1 - self.inflight < 1:
            raise ValueError(f"{self}: inflight must be 0 or 1 and leave a tile to prefetch")
        if self.swizzle not in (0, 128):
            raise ValueError(f"{self}: swizzle must be 0 (none) or 128 (bytes)")
        if self.swizzle and self.bk != 64:
            raise ValueError(f"{self}: the 128-byte swizzle is implemented for bk = 64 only "
                             f"(one 128-byte line per tile row or k-line)")
        if self.ws not in (0, 1):
            raise ValueError(f"{self}: ws must be 0 or 1 (one producer warpgroup)")
        if self.pfence not in (0, 1) or (self.pfence and (not self.ws or self.stages < 3)):
            raise ValueError(f"{self}: pfence 1 needs ws = 1 and at least 3 stages (the "
                             f"producer arrives stages - 2 tiles behind its copies)")
        if self.hoist not in (0, 1):
            raise ValueError(f"{self}: hoist must be 0 or 1")
        if self.tma not in (0, 1) or (self.tma and not (self.ws and self.swizzle == 128
                                                         and not self.pfence)):
            raise ValueError(f"{self}: tma 1 needs ws = 1, the 128-byte swizzle and pfence 0 "
                             f"(the copy engine writes through the async proxy)")
        if self.epi not in (0, 1, 2, 3, 4):
            raise ValueError(f"{self}: epi must be 0, 1, 2, 3 or 4")
        if self.epi == 4 and self.bn % 32:
            raise ValueError(f"{self}: epi 4 needs bn a multiple of 32 (four column tiles "
                             f"a quad transpose)")
        return self


class SkinnyConfig(NamedTuple):
    """The few-row forward's layout (:func:`make_skinny_kernel`): each warp multiplies
    ``groups`` groups of 16 weight rows, the block's ``warps`` warps taking turns over
    the 32-wide k-chunks; ``unroll`` chunks a warp loads before it multiplies (bytes
    in flight); ``policy``: the weight loads' eviction policy
    (``tensor_core.LOAD_POLICIES``, None for plain loads); ``prefetch`` 1: two
    register sets, a turn's loads issued before the previous turn's MMAs; ``splits``
    > 1: the k-chunks split over that many blocks a column block (more blocks an SM
    where the columns alone give few), their partial sums added by the last to
    finish in a fixed order."""

    groups: int
    warps: int
    unroll: int
    policy: object = "no_allocate"
    prefetch: int = 0
    splits: int = 1

    @property
    def threads(self):
        return self.warps * 32

    @property
    def cols(self):
        """Output columns (weight rows) a block computes."""
        return 16 * self.groups

    def validate(self):
        if not (1 <= self.groups <= 4 and 1 <= self.warps <= 32 and 1 <= self.unroll <= 8):
            raise ValueError(f"{self}: groups in [1, 4], warps in [1, 32], unroll in [1, 8]")
        if self.policy is not None and self.policy not in LOAD_POLICIES:
            raise ValueError(f"{self}: policy must be None or one of {LOAD_POLICIES}")
        if self.prefetch not in (0, 1):
            raise ValueError(f"{self}: prefetch must be 0 or 1")
        if not 1 <= self.splits <= 8:
            raise ValueError(f"{self}: splits must be in [1, 8]")
        return self


# Large problems: 4 warps of 64x64 (128 accumulators per thread), 4 stages of
# 128x32 + 128x32 halves (64 KiB), reused by the 128x136 float32 epilogue tile (68 KiB).
TC_LARGE = GemmConfig(128, 128, 32, 64, 64, 4, 8)
# Problems with too few 128x128 tiles to fill the GPU twice.
TC_SMALL = GemmConfig(64, 64, 32, 32, 32, 3, 8)
# The simulator: every code path (4 warps in a 2x2 grid, a 3-deep pipeline, grouped
# block order) at a size Python threads get through.
TC_SIM = GemmConfig(32, 32, 16, 16, 16, 3, 2)
# wgmma v1: 2 warpgroups of 64 x 128 (64 accumulators per thread), 4 stages of
# 128x64 + 128x64 (128 KiB), no swizzle.
WG_V1 = WgmmaConfig(128, 128, 64, 4, 8)
# v2 candidate (untimed): one k-tile of MMAs in flight, a 5-deep ring (160 KiB) so
# that 3 tiles are still prefetched.
WG_LARGE_INFLIGHT = WgmmaConfig(128, 128, 64, 5, 8, 1)
# The simulator: one warpgroup, a 3-deep ring, two 16-wide K steps per tile.
WG_SIM = WgmmaConfig(64, 32, 32, 3, 2)
# v3b: WG_LARGE's tiling with 128-byte swizzled operand tiles and a 3-deep ring
# (96 KiB: two blocks per SM; 4 stages left one, 264 TF/s against 400 with 3 at
# 8192x4096x16384 fp16 on the H100, bench/notes_linear_act.md).
WG_LARGE_SW128 = WgmmaConfig(128, 128, 64, 3, 8, 0, 128)
# Its simulator counterpart: a 64-wide B (an MN-major atom: dgrad, wgrad), 4 K steps.
WG_SIM_SW128 = WgmmaConfig(64, 64, 64, 3, 2, 0, 128)
# v4 candidate (untimed): warp specialised, CUTLASS's Hopper tiling: a producer
# warpgroup filling a 4-deep ring of 128x64 + 256x64 (192 KiB) by cp.async with
# mbarrier completion, two consumer warpgroups of 64 x 256 (128 accumulators each),
# one k-tile of MMAs in flight; 384 threads, one block per SM.
WG_LARGE_WS = WgmmaConfig(128, 256, 64, 4, 8, 1, 128, 1)
# Its simulator counterpart: one consumer warpgroup and the producer (256 threads).
WG_SIM_WS = WgmmaConfig(64, 64, 64, 3, 2, 1, 128, 1)
# v4b candidate (untimed): v4 with the proxy fence moved to the producer (v4's
# consumers fence every k-tile, a MEMBAR.ALL.CTA while the previous tile's HGMMAs
# are in flight: the first suspect for its 230 TF/s).
WG_LARGE_WS_PF = WgmmaConfig(128, 256, 64, 4, 8, 1, 128, 1, 1)
WG_SIM_WS_PF = WgmmaConfig(64, 64, 64, 4, 2, 1, 128, 1, 1)
# v5b: the forward tilings with the epilogue's bias loaded once per thread and tile
# (hoist); ncu had v4's epilogue at 31% of its warp samples, a dependent 16-byte bias
# load starting each of its 16 chunk iterations. H200: 1-3% faster than without, bit
# for bit the same (bench/notes_linear_act.md, ninth session).
WG_LARGE_SW128_HB = WG_LARGE_SW128._replace(hoist=1)
WG_LARGE_WS_HB = WG_LARGE_WS._replace(hoist=1)
WG_SIM_SW128_HB = WG_SIM_SW128._replace(hoist=1)
# v6 (opt-in, not shipped): v4's forward with a TMA producer (one thread, two copies a
# k-tile, three in the pair form, against ~24 cp.async per producer thread and the
# consumers' proxy fence each k-tile). H100 (eighty-fourth session): 0-3% faster than
# v4 at 8192x4096->16384 and 4096x4096->22016, even on the gated pair forward and the
# Llama MLP training step (within run-to-run spread): the load path is not what
# holds v4 behind cuBLAS (bench/NOTES.md).
WG_LARGE_WS_TMA = WG_LARGE_WS_HB._replace(tma=1)
WG_SIM_WS_TMA = WG_SIM_WS._replace(tma=1)
# v7 candidate (eighty-fifth session): v4 / v3b with epi 1, the epilogue's activations
# (dgrad: derivatives) in fast_act's branch-free forms, a chunk's 8 (gated: 4) under one
# switch. ncu of v4's gated pair forward (H100, 4096x4096->2x11008 bf16, silu): about
# 28% of the block's time in the epilogue, two thirds of that in the activation, a
# latency-bound chain an element (the switch, libdevice's expf, the IEEE division's
# check and branch) at 8 warps an SM; its SASS is half v4's (4893 instructions
# against 8608).
WG_LARGE_WS_HB_EPI = WG_LARGE_WS_HB._replace(epi=1)
WG_LARGE_SW128_HB_EPI = WG_LARGE_SW128_HB._replace(epi=1)
WG_LARGE_WS_EPI = WG_LARGE_WS._replace(epi=1)
WG_SIM_WS_EPI = WG_SIM_WS._replace(epi=1)
# v7b (shipped in WG_ROLE): v7 with the epilogue's shared-memory indices unsigned
# 32-bit (the same ncu: 952 instructions for the 128 accumulator stores, each index
# wrap-around checked; the chunk loop's signed 64-bit division each iteration). H100
# (eighty-seventh session, bf16, medians of 3 rounds): the pair forward 1124 us
# against epi 0's 1348 and epi 1's 1147, the 8192x768 forward 105 against 161.
WG_LARGE_WS_HB_EPI2 = WG_LARGE_WS_HB._replace(epi=2)
WG_LARGE_SW128_HB_EPI2 = WG_LARGE_SW128_HB._replace(epi=2)
WG_LARGE_WS_EPI2 = WG_LARGE_WS._replace(epi=2)
WG_SIM_WS_EPI2 = WG_SIM_WS._replace(epi=2)
WG_SIM_SW128_HB_EPI2 = WG_SIM_SW128_HB._replace(epi=2)
# v9 (opt-in; lost to v7b on the H100, eighty-seventh session): v7b with the forward's
# whole tiles (16-byte rows) finished from the accumulators' registers: no C tile, no
# barrier, the bias, activation and 32-bit stores of each thread's column pairs
# straight to global memory (v7's ncu left ~6 us of a ~58 us tile in the epilogue's
# index work and shared-memory round trip). Measured: the pair forward 1.23 ms
# against v7b's 1.05, 1357 us against 1198 keeping the pairs. The likely cause (not
# profiled): a warp's 32-bit store fills half of each 32-byte sector it touches,
# twice the write requests of the C tile's 16-byte chunks.
WG_LARGE_WS_HB_EPI3 = WG_LARGE_WS_HB._replace(epi=3)
WG_LARGE_SW128_HB_EPI3 = WG_LARGE_SW128_HB._replace(epi=3)
WG_SIM_WS_EPI3 = WG_SIM_WS._replace(epi=3)
WG_SIM_SW128_HB_EPI3 = WG_SIM_SW128_HB._replace(epi=3)
# v10 candidate (untimed): v9 with each quad's words transposed by 4 shuffles a 4
# words, so each store is a lane's 16-byte chunk of a row (the gated h: 8 bytes) and
# a warp's store instruction writes whole 32-byte sectors, as the C tile's path does.
WG_LARGE_WS_HB_EPI4 = WG_LARGE_WS_HB._replace(epi=4)
WG_LARGE_SW128_HB_EPI4 = WG_LARGE_SW128_HB._replace(epi=4)
WG_SIM_WS_EPI4 = WG_SIM_WS._replace(epi=4)
WG_SIM_SW128_HB_EPI4 = WG_SIM_SW128_HB._replace(epi=4)
# The wgmma tiling of each GEMM role (bench/notes_linear_act.md, H200 sweeps of
# 2026-11-26). The forward: with K >= WG_FWD_LONG_K on v4 (warp specialised, one block
# per SM), whose main loop is then long enough that its faster k-tiles outweigh the
# serialised epilogue (8192x4096->16384 with gelu_tanh and preact: fp16 1.92 ms against
# v3b's 2.10, bf16 1.79 against 2.04); shorter K on v3b, whose two blocks per SM
# overlap one's epilogue with the other's main loop (8192x768->3072: 0.142 against
# 0.154). dgrad and wgrad on v4 (8192x4096->16384 backward 4.03 ms against v3b's
# 5.37 and mma.sync's 6.53). Each with v7b's epilogue (epi 2; H100, eighty-seventh
# session, bf16 4096x4096->2x11008 Llama MLP: the training step's GEMMs 5.29 ms
# against 5.88 at epi 0, torch 5.10-5.18; the gated dgrad 0.72 against 1.02, the pair
# forward 1.05 against 1.23; v9's register epilogue lost: 1.23).
WG_ROLE = {"fwd": WG_LARGE_SW128_HB_EPI2, "fwd_long_k": WG_LARGE_WS_HB_EPI2,
           "dgrad": WG_LARGE_WS_EPI2, "wgrad": WG_LARGE_WS_EPI2}
WG_FWD_LONG_K = 4096
# Every role's tiling when set (tests and benchmarks pin one); None: WG_ROLE's.
WG_LARGE = None
# The automatic choice takes wgmma for a GEMM whose output has at least this many
# 128x128 tiles per SM (one wave of v3b's tiles); smaller ones stay on mma.sync,
# whose 64x64 tiles spread them over more SMs (same sweep: 1024^3 fp16 0.018 ms on
# mma.sync against 0.023 on v3b; 64x4096->4096 0.038 against 0.095).
WG_MIN_TILES_PER_SM = 1
# Nor does it for outputs of at most this many rows (a decoder's tokens a step): a
# 128-row wgmma tile spends 7/8 of its MMAs on rows past M = 16. Gated forward, 22016
# x 4096 bf16, H100 (seventy-eighth session): M = 1 / 16 / 64 took 177 / 177 / 181 us
# on wgmma against 104 / 104 / 103 on mma.sync's 64x64 tiles.
WG_MAX_SKINNY_ROWS = 64
# Split-K (the forward on mma.sync, make_tc_kernel(split=True)): an output of at most
# SPLITK_MAX_ROWS rows (a decoder's tokens) whose tiles are fewer than the GPU's
# multiprocessors splits its k-tiles over enough blocks to give each multiprocessor
# SPLITK_BLOCKS_PER_SM, at most SPLITK_MAX ways and with at least SPLITK_MIN_KTILES
# k-tiles a part (Llama-7B's down projection at 1-64 tokens: 64 tiles of 4096 x 11008).
SPLITK_MAX_ROWS = 64
SPLITK_BLOCKS_PER_SM = 2
SPLITK_MAX = 8
SPLITK_MIN_KTILES = 8
# Whether the default takes split_k_auto's choice (use_split_k overrides it). On
# since the eighty-third session: the front ends' default paths passed their GPU
# tests with it on and racecheck found no hazard (H100); Llama-7B's down projection,
# bf16, 1-64 tokens: 139 us unsplit, 63-71 us split.
SPLITK_BY_DEFAULT = True
# A gated unit's pair kernels beyond the forward on mma.sync (verified on the H100 in
# the seventy-eighth session): on wgmma, the forward keeping its pairs, grad_x and the
# weight gradients (training without the interleaved copy). On since the
# eighty-third session (the default paths' GPU tests with it on passed, H100); a
# Llama-7B MLP training step, bf16, 4096 tokens: 5.73 ms and 752 MiB against 5.95 ms
# and 924 MiB with the copy. Off: the interleaved copy wherever wgmma runs.
GATED_PAIRS_EVERYWHERE = True
# The few-row forward (make_skinny_kernel): one 16-row group per warp, 8 warps
# taking turns over k, two chunks in flight per warp; the weight read once, so its
# lines are not kept in L1. Unsplit: k over two blocks (splits=2) took 1.6 us off
# the Llama-7B down projection at one token but added 5 at 16 and 13-24 on gate+up
# (H100, eighty-fourth session).
SKINNY_DEFAULT = SkinnyConfig(1, 8, 2)
# The simulator: two warps meeting in the reduction, two groups (a block of 32
# columns), two chunks a turn.
SKINNY_SIM = SkinnyConfig(2, 2, 2)
# The default takes the few-row kernel (skinny_auto) for outputs of at most
# SKINNY_AUTO_ROWS rows whose blocks give every multiprocessor one (use_skinny
# overrides it). On since the eighty-third session: the default paths' GPU tests
# with it on passed, memcheck clean (H100); Llama-7B bf16 at 1 / 16 tokens, gate+up
# 64 / 67 us (tiled 104), down projection 40 / 43 us (split-K 63 / 71).
SKINNY_AUTO_ROWS = 16
SKINNY_BY_DEFAULT = True
SIMT_DEFAULT = SimtConfig(64, 64, 16, 4, 4, 8)
SIMT_SIM = SimtConfig(16, 16, 8, 2, 2, 2)
ACT_GRAD_THREADS = 256


# ---------------------------------------------------------------------------
# Device helpers shared by the kernels
# ---------------------------------------------------------------------------

_relu, _relu_g = device_act("relu")
_gelu, _gelu_g = device_act("gelu")
_gtanh, _gtanh_g = device_act("gelu_tanh")
_sqrelu, _sqrelu_g = device_act("squared_relu")
_leaky, _leaky_g = device_act("leaky_relu")
_silu, _silu_g = device_act("silu")
_F1 = np.float32(1.0)
assert ACTIVATIONS == ("none", "relu", "gelu", "gelu_tanh", "squared_relu", "leaky_relu", "silu")


# Not inline=True: numba-level inlining re-types the six-way switch at every epilogue
# site (4x the compile time); NVVM inlines the call anyway (no call in the PTX).
@cuda.jit(device=True)
def act_by_code(code, z):
    """act(z) for the activation ``ACTIVATIONS[code]`` (float32)."""
    if code == 1:
        return _relu(z)
    if code == 2:
        return _gelu(z)
    if code == 3:
        return _gtanh(z)
    if code == 4:
        return _sqrelu(z)
    if code == 5:
        return _leaky(z)
    if code == 6:
        return _silu(z)
    return z


@cuda.jit(device=True)
def act_grad_by_code(code, z):
    """act'(z) for the activation ``ACTIVATIONS[code]`` (float32)."""
    if code == 1:
        return _relu_g(z)
    if code == 2:
        return _gelu_g(z)
    if code == 3:
        return _gtanh_g(z)
    if code == 4:
        return _sqrelu_g(z)
    if code == 5:
        return _leaky_g(z)
    if code == 6:
        return _silu_g(z)
    return _F1


def _map_act(f, n):
    """Device function applying ``f`` to a float32 (``n`` 1: ``f`` itself) or to each
    of a tuple of ``n`` (4 or 8) float32, written out: one basic block, so the ``n``
    evaluations interleave (a loop over a tuple may stay a loop)."""
    if n == 1:
        return f
    if n == 4:
        @inline_device
        def four(z):
            return f(z[0]), f(z[1]), f(z[2]), f(z[3])

        return four
    if n != 8:
        raise ValueError(f"n must be 1, 4 or 8, got {n}")

    @inline_device
    def eight(z):
        return f(z[0]), f(z[1]), f(z[2]), f(z[3]), f(z[4]), f(z[5]), f(z[6]), f(z[7])

    return eight


@functools.lru_cache(maxsize=None)
def fast_act_switch(dtype, n, grad=False):
    """Device function ``switch(code, z)``: act(z) (``grad``: act'(z)) for the
    activation ``ACTIVATIONS[code]`` in :func:`numba_fused.fast_act.kernel_act`'s
    branch-free form for storage ``dtype``, on a float32 (``n`` 1) or a tuple of
    ``n`` (4, 8). One switch on the code for all ``n``: the wgmma epilogue's ``epi``
    1, whose per-element switch, libdevice expf and IEEE division (a check and a
    branch an element) left the epilogue latency-bound (ncu, eighty-fifth session)."""
    m0, m1, m2, m3, m4, m5, m6 = (_map_act(fast_act.kernel_act(name, dtype)[int(grad)], n)
                                  for name in ACTIVATIONS)

    # Not inline: as act_by_code (NVVM inlines it).
    @cuda.jit(device=True)
    def switch(code, z):
        if code == 1:
            return m1(z)
        if code == 2:
            return m2(z)
        if code == 3:
            return m3(z)
        if code == 4:
            return m4(z)
        if code == 5:
            return m5(z)
        if code == 6:
            return m6(z)
        return m0(z)

    return switch


def _log2(v):
    return int(v).bit_length() - 1


def _swizzle(chunks_per_row):
    """(shift, mask) of the XOR swizzle for rows of ``chunks_per_row`` 16-byte chunks:
    the 8 rows one ldmatrix phase reads then cover all 32 banks."""
    if chunks_per_row >= 8:
        return 0, 7
    return _log2(8 // chunks_per_row), chunks_per_row - 1


def _tile_loader(rows, length, nthreads, vec, kmajor, pair=False):
    """Device function ``load(smem, base, g, g2, ld, k0, fixed0, k_lim, fixed_lim, tid,
    full)`` filling the swizzled ``rows x length`` shared tile at ``smem[base:]`` with
    the k-tile starting at ``k0`` of an operand stored with leading dimension ``ld``:

    - ``kmajor``: tile rows are rows ``fixed0 ..`` of the operand (M or N), columns
      ``k0 ..`` (global ``g[row * ld + k]``);
    - otherwise tile rows are ``k0 ..`` and columns ``fixed0 ..`` (``g[k * ld + col]``).

    ``pair``: the operand's stored rows alternate between two arrays, row ``2j``
    being ``g``'s row j and row ``2j + 1`` ``g2``'s (the gate and up weights of a gated
    unit, read in place of their interleaved copy): tile rows when ``kmajor`` (a
    forward's B), k-rows otherwise (dgrad's B); otherwise ``g2`` is unused.

    Zeros past ``fixed_lim`` / ``k_lim``. ``vec``: one 16-byte cp.async per chunk (the
    caller commits); a thread's chunks share their column, so the k-tile's bounds
    and byte counts are computed once and each chunk adds a fixed step. Otherwise
    element copies.
    """
    chunks = length // 8
    cshift = _log2(chunks)
    total = rows * chunks
    iters = cdiv(total, nthreads)
    exact = total % nthreads == 0
    sh, mk = _swizzle(chunks)
    if nthreads % chunks:
        raise ValueError(f"{nthreads} threads do not cover whole {length}-element rows")
    rstep = nthreads // chunks
    if pair and rstep % 2:
        raise ValueError(f"paired rows need an even row step, got {rstep} rows a step")
    # A thread's rows step by rstep from an even first row (fixed0 and k0 are tile
    # multiples), so with an even step they stay in one of the two arrays, advancing
    # rstep / 2 of its rows at a time.
    gstep = rstep // 2 if pair else rstep
    dstep = rstep * length
    # The swizzle repeats every 8 rows: when a thread's rows advance by a multiple of
    # 8 its chunks share one swizzle and step by a fixed offset; otherwise (fewer
    # threads than 8 rows of chunks, e.g. 64 threads on a 128-wide k-tile) each
    # chunk's swizzle is its own.
    one_swizzle = iters == 1 or rstep % 8 == 0

    @inline_device
    def row_dst(base, r, ch):
        """Shared offset of chunk ``ch`` of tile row ``r`` (swizzled)."""
        return base + r * length + ((ch ^ ((r >> sh) & mk)) << 3)

    @inline_device
    def chunk_dst(dst, base, r0, ch, i):
        """Shared offset of the thread's i-th chunk (row r0 + i rstep, column ch; ``dst``
        its first's)."""
        if one_swizzle:
            return dst + i * dstep
        return row_dst(base, r0 + i * rstep, ch)

    @inline_device
    def load(smem, base, g, g2, ld, k0, fixed0, k_lim, fixed_lim, tid, full):
        r0 = tid >> cshift
        ch = tid & (chunks - 1)
        dst = row_dst(base, r0, ch)
        if kmajor:
            outer = fixed0 + r0
            outer_lim = fixed_lim
            inner = k0 + (ch << 3)
            inner_lim = k_lim
        else:
            outer = k0 + r0
            outer_lim = k_lim
            inner = fixed0 + (ch << 3)
            inner_lim = fixed_lim
        src_arr = g
        grow = outer
        if pair:
            grow = outer >> 1
            if outer & 1:
                src_arr = g2
        if vec and full:
            # The whole tile lies inside the operand: no bounds, 16 bytes per chunk.
            src = grow * ld + inner
            step = gstep * ld
            for i in range(iters):
                if exact or tid + i * nthreads < total:
                    cp_async_16(smem, chunk_dst(dst, base, r0, ch, i), src_arr,
                                src + i * step, 16)
        elif vec:
            n = 0
            if inner < inner_lim:
                n = min(16, (inner_lim - inner) * 2)
            src = grow * ld + inner
            step = gstep * ld
            for i in range(iters):
                if exact or tid + i * nthreads < total:
                    if n > 0 and outer + i * rstep < outer_lim:
                        cp_async_16(smem, chunk_dst(dst, base, r0, ch, i), src_arr,
                                    src + i * step, n)
                    else:
                        cp_async_16(smem, chunk_dst(dst, base, r0, ch, i), g, 0, 0)
        else:
            for i in range(iters):
                if exact or tid + i * nthreads < total:
                    row = outer + i * rstep
                    srow = (row >> 1) if pair else row
                    for e in range(8):
                        if row < outer_lim and inner + e < inner_lim:
                            smem[chunk_dst(dst, base, r0, ch, i) + e] = src_arr[
                                srow * ld + inner + e]
                        else:
                            smem[chunk_dst(dst, base, r0, ch, i) + e] = 0

    return load


def _chunk_epilogue(role, dtype, preloaded=False, fast=False):
    """Device function ``chunk(cs, ci, row, col, N, ldc, bias, aux, out, act, flags)``:
    finishes the 8 float32 accumulators ``cs[ci:ci + 8]`` (staged in shared memory)
    of output row ``row``, columns ``col .. col + 7`` (those below ``N``) for ``role``.

    With ``flags & F_VEC`` and all 8 columns inside, the chunk moves as 16-byte
    vectors (bias and preact loads, preact and output stores), two outputs per
    32-bit word rounded by ``pack_*x2``; otherwise element by element.

    ``fast`` (16-bit ``dtype``): the activations and their derivatives are
    :func:`fast_act_switch`'s (numba_fused.fast_act's branch-free forms), the 16-byte
    paths' 8 (gated: 4) under one switch; otherwise :func:`act_by_code`'s, one switch
    an element.
    """
    load = dtypes.loader(dtype)
    store = dtypes.storer(dtype)
    half = dtype != "float32"
    fwd = role == "fwd"
    dgrad = role == "dgrad"
    zero4 = (np.uint32(0),) * 4
    lean = fast >= 2 and half
    fast = bool(fast) and half
    if fast:
        act1, grad1 = fast_act_switch(dtype, 1), fast_act_switch(dtype, 1, True)
        act4, grad4 = fast_act_switch(dtype, 4), fast_act_switch(dtype, 4, True)
        act8, grad8 = fast_act_switch(dtype, 8), fast_act_switch(dtype, 8, True)
    else:
        act1, grad1 = act_by_code, act_grad_by_code
        act4 = grad4 = act8 = grad8 = None
    u1, u2, u3, u4, u5, u6, u7 = (np.uint32(k) for k in range(1, 8))

    @inline_device
    def read8(cs, ci):
        """cs[ci .. ci + 7] at an unsigned 32-bit index (``lean``: no negative-index
        wrap-around, the offsets folded into the loads)."""
        c = np.uint32(ci)
        return (cs[c], cs[c + u1], cs[c + u2], cs[c + u3], cs[c + u4], cs[c + u5],
                cs[c + u6], cs[c + u7])

    if half:
        pack, unpack = half_packers(dtype)

        @inline_device
        def fin_word(v0, v1, bw, pw, act, flags):
            """(output word, preact word) of the column pair (v0, v1)."""
            if fwd:
                if flags & F_BIAS:
                    b = unpack(bw)
                    v0 += b[0]
                    v1 += b[1]
                return pack(act_by_code(act, v0), act_by_code(act, v1)), pack(v0, v1)
            if dgrad:
                if act != 0:
                    z = unpack(pw)
                    v0 *= act_grad_by_code(act, z[0])
                    v1 *= act_grad_by_code(act, z[1])
            return pack(v0, v1), pw
    else:
        @inline_device
        def fin_word(v0, v1, bw, pw, act, flags):
            """Never called: float32 chunks take the element path."""
            return pw, pw

    @inline_device
    def fin_one(v, col, o, bias, aux, out, act, flags):
        if fwd:
            if flags & F_BIAS:
                v += load(bias, col)
            if flags & F_PREACT:
                store(aux, o, v)
            store(out, o, act1(act, v))
        else:
            if dgrad:
                if act != 0:
                    v *= grad1(act, load(aux, o))
            store(out, o, v)

    @inline_device
    def gated_vec32(cs, ci, row, col, ldc, bias, aux, out, act, flags):
        """Never called: float32 chunks take the element path."""
        return

    @inline_device
    def gate_pairs(cs, ci, col, bias, flags):
        """The 16-bit gated forward chunk's 4 (gate, up) pairs (columns ``col ..``, the
        8 bias values added with F_BIAS): (the pre-activation words, the gates, the
        ups), 4 each. gated_vec16 (epi 0) keeps its own copy of this loop, the
        activation inside it: its SASS as the GPU verified it (the shared form changed
        32 shipped forward kernels' instruction order)."""
        bw = zero4
        if flags & F_BIAS:
            bw = ld_global_v4(bias, col)
        zw = cuda.local.array(4, np.uint32)
        gv = cuda.local.array(4, np.float32)
        uv = cuda.local.array(4, np.float32)
        if lean:
            cv = cuda.local.array(8, np.float32)
            t = read8(cs, ci)
            for i in range(8):
                cv[i] = t[i]
        for p in range(4):
            if lean:
                vg = cv[2 * p]
                vu = cv[2 * p + 1]
            else:
                vg = cs[ci + 2 * p]
                vu = cs[ci + 2 * p + 1]
            if flags & F_BIAS:
                b = unpack(bw[p])
                vg += b[0]
                vu += b[1]
            zw[p] = pack(vg, vu)
            gv[p] = vg
            uv[p] = vu
        return ((zw[0], zw[1], zw[2], zw[3]), (gv[0], gv[1], gv[2], gv[3]),
                (uv[0], uv[1], uv[2], uv[3]))

    @inline_device
    def gated_vec16(cs, ci, row, col, ldc, bias, aux, out, act, flags):
        """The F_GATED chunk of 16-bit data with 16-byte rows, all 8 columns inside:
        fwd loads the 8 bias values and stores the 8 pre-activations as one 16-byte
        vector each and the 4 products as two 32-bit words; dgrad loads the 16
        pre-activations and stores the 16 gradients as two 16-byte vectors each."""
        if fwd:
            bw = zero4
            if flags & F_BIAS:
                bw = ld_global_v4(bias, col)
            zw = cuda.local.array(4, np.uint32)
            hv = cuda.local.array(4, np.float32)
            for p in range(4):
                vg = cs[ci + 2 * p]
                vu = cs[ci + 2 * p + 1]
                if flags & F_BIAS:
                    b = unpack(bw[p])
                    vg += b[0]
                    vu += b[1]
                zw[p] = pack(vg, vu)
                hv[p] = act_by_code(act, vg) * vu
            if flags & F_PREACT:
                st_global_v4(aux, row * 2 * ldc + col, zw[0], zw[1], zw[2], zw[3])
            o = row * ldc + (col >> 1)
            st_global_b32(out, o, pack(hv[0], hv[1]))
            st_global_b32(out, o + 2, pack(hv[2], hv[3]))
        elif dgrad:
            o2 = row * ldc + 2 * col
            for half8 in range(2):
                zw = ld_global_v4(aux, o2 + 8 * half8)
                dw = cuda.local.array(4, np.uint32)
                for p in range(4):
                    z = unpack(zw[p])
                    dh = cs[ci + 4 * half8 + p]
                    dw[p] = pack(dh * z[1] * act_grad_by_code(act, z[0]),
                                 dh * act_by_code(act, z[0]))
                st_global_v4(out, o2 + 8 * half8, dw[0], dw[1], dw[2], dw[3])

    @inline_device
    def gated_vec16_fast(cs, ci, row, col, ldc, bias, aux, out, act, flags):
        """gated_vec16 with ``fast``: the 4 gates' activations (dgrad: each half's
        act and act') under one switch each."""
        if fwd:
            zw, gv, uv = gate_pairs(cs, ci, col, bias, flags)
            a = act4(act, gv)
            if flags & F_PREACT:
                st_global_v4(aux, row * 2 * ldc + col, zw[0], zw[1], zw[2], zw[3])
            o = row * ldc + (col >> 1)
            st_global_b32(out, o, pack(a[0] * uv[0], a[1] * uv[1]))
            st_global_b32(out, o + 2, pack(a[2] * uv[2], a[3] * uv[3]))
        elif dgrad:
            o2 = row * ldc + 2 * col
            if lean:
                hv = cuda.local.array(8, np.float32)
                t = read8(cs, ci)
                for i in range(8):
                    hv[i] = t[i]
            for half8 in range(2):
                zw = ld_global_v4(aux, o2 + 8 * half8)
                gv = cuda.local.array(4, np.float32)
                uv = cuda.local.array(4, np.float32)
                for p in range(4):
                    z = unpack(zw[p])
                    gv[p] = z[0]
                    uv[p] = z[1]
                gt = (gv[0], gv[1], gv[2], gv[3])
                a = act4(act, gt)
                d = grad4(act, gt)
                if lean:
                    h0 = hv[4 * half8]
                    h1 = hv[4 * half8 + 1]
                    h2 = hv[4 * half8 + 2]
                    h3 = hv[4 * half8 + 3]
                else:
                    h0 = cs[ci + 4 * half8]
                    h1 = cs[ci + 4 * half8 + 1]
                    h2 = cs[ci + 4 * half8 + 2]
                    h3 = cs[ci + 4 * half8 + 3]
                st_global_v4(out, o2 + 8 * half8, pack(h0 * uv[0] * d[0], h0 * a[0]),
                             pack(h1 * uv[1] * d[1], h1 * a[1]),
                             pack(h2 * uv[2] * d[2], h2 * a[2]),
                             pack(h3 * uv[3] * d[3], h3 * a[3]))

    gated_vec = (gated_vec16_fast if fast else gated_vec16) if half else gated_vec32

    @inline_device
    def gated(cs, ci, row, col, N, ldc, bias, aux, out, act, flags):
        """The F_GATED chunk, element by element (see F_GATED)."""
        if fwd:
            for p in range(4):
                c = col + 2 * p
                if c + 1 < N:
                    vg = cs[ci + 2 * p]
                    vu = cs[ci + 2 * p + 1]
                    if flags & F_BIAS:
                        vg += load(bias, c)
                        vu += load(bias, c + 1)
                    if flags & F_PREACT:
                        store(aux, row * 2 * ldc + c, vg)
                        store(aux, row * 2 * ldc + c + 1, vu)
                    store(out, row * ldc + (c >> 1), act1(act, vg) * vu)
        elif dgrad:
            for j in range(8):
                c = col + j
                if c < N:
                    o2 = row * ldc + 2 * c
                    g = load(aux, o2)
                    u = load(aux, o2 + 1)
                    dh = cs[ci + j]
                    store(out, o2, dh * u * grad1(act, g))
                    store(out, o2 + 1, dh * act1(act, g))

    @inline_device
    def vec_words_exact(cs, ci, o, bw, pw, aux, out, act, flags):
        """The 16-byte path's four column pairs from offset ``o``: bias words ``bw``
        (fwd), pre-activation words ``pw`` (dgrad)."""
        r0 = fin_word(cs[ci], cs[ci + 1], bw[0], pw[0], act, flags)
        r1 = fin_word(cs[ci + 2], cs[ci + 3], bw[1], pw[1], act, flags)
        r2 = fin_word(cs[ci + 4], cs[ci + 5], bw[2], pw[2], act, flags)
        r3 = fin_word(cs[ci + 6], cs[ci + 7], bw[3], pw[3], act, flags)
        if fwd:
            if flags & F_PREACT:
                st_global_v4(aux, o, r0[1], r1[1], r2[1], r3[1])
        st_global_v4(out, o, r0[0], r1[0], r2[0], r3[0])

    @inline_device
    def vec_words_fast(cs, ci, o, bw, pw, aux, out, act, flags):
        """vec_words with ``fast``: the 8 activations (dgrad: derivatives) under one
        switch."""
        v = cuda.local.array(8, np.float32)
        if lean:
            t = read8(cs, ci)
            for i in range(8):
                v[i] = t[i]
        else:
            for i in range(8):
                v[i] = cs[ci + i]
        if fwd:
            if flags & F_BIAS:
                for p in range(4):
                    b = unpack(bw[p])
                    v[2 * p] += b[0]
                    v[2 * p + 1] += b[1]
            if flags & F_PREACT:
                st_global_v4(aux, o, pack(v[0], v[1]), pack(v[2], v[3]), pack(v[4], v[5]),
                             pack(v[6], v[7]))
            a = act8(act, (v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]))
            st_global_v4(out, o, pack(a[0], a[1]), pack(a[2], a[3]), pack(a[4], a[5]),
                         pack(a[6], a[7]))
            return
        if dgrad:
            if act != 0:
                zv = cuda.local.array(8, np.float32)
                for p in range(4):
                    z = unpack(pw[p])
                    zv[2 * p] = z[0]
                    zv[2 * p + 1] = z[1]
                d = grad8(act, (zv[0], zv[1], zv[2], zv[3], zv[4], zv[5], zv[6], zv[7]))
                v[0] *= d[0]
                v[1] *= d[1]
                v[2] *= d[2]
                v[3] *= d[3]
                v[4] *= d[4]
                v[5] *= d[5]
                v[6] *= d[6]
                v[7] *= d[7]
        st_global_v4(out, o, pack(v[0], v[1]), pack(v[2], v[3]), pack(v[4], v[5]),
                     pack(v[6], v[7]))

    vec_words = vec_words_fast if fast else vec_words_exact

    @inline_device
    def chunk(cs, ci, row, col, N, ldc, bias, aux, out, act, flags):
        o = row * ldc + col
        if (flags & F_GATED) != 0:
            if half and (flags & F_VEC) != 0 and col + 8 <= N:
                gated_vec(cs, ci, row, col, ldc, bias, aux, out, act, flags)
            else:
                gated(cs, ci, row, col, N, ldc, bias, aux, out, act, flags)
        elif half and (flags & F_VEC) != 0 and col + 8 <= N:
            bw = zero4
            pw = zero4
            if fwd:
                if flags & F_BIAS:
                    bw = ld_global_v4(bias, col)
            if dgrad:
                if act != 0:
                    pw = ld_global_v4(aux, o)
            vec_words(cs, ci, o, bw, pw, aux, out, act, flags)
        else:
            for j in range(8):
                if col + j < N:
                    fin_one(cs[ci + j], col + j, o + j, bias, aux, out, act, flags)

    @inline_device
    def chunk_pre(cs, ci, row, col, ldc, bw, aux, out, act, flags):
        """chunk's 16-byte forward path (16-bit, F_VEC, F_BIAS, not F_GATED, all 8
        columns inside) with the chunk's 8 bias values already loaded: ``bw``."""
        vec_words(cs, ci, row * ldc + col, bw, zero4, aux, out, act, flags)

    return chunk_pre if preloaded else chunk


def _routed(chunk, route):
    """Device function ``put(cs, ci, row, col, N, ldc, bias, aux, out, out2, act,
    flags)``: ``chunk`` (a :func:`_chunk_epilogue`) on output row ``row``; with
    ``route`` (a pair kernel's wgrad) row m goes to row m // 2 of ``out`` (m even) or
    ``out2`` (the gate's and up weight's gradients), else ``out2`` is unused."""

    @inline_device
    def put(cs, ci, row, col, N, ldc, bias, aux, out, out2, act, flags):
        if route:
            dst = out
            if row & 1:
                dst = out2
            chunk(cs, ci, row >> 1, col, N, ldc, bias, aux, dst, act, flags)
        else:
            chunk(cs, ci, row, col, N, ldc, bias, aux, out, act, flags)

    return put


@inline_device
def _last_part(counters, tile, splits, last, tid):
    """Split-K arrival, after the block stored its part: count the part in on
    ``counters[tile]`` and return whether this block is the tile's last (``last``: a
    one-int32 shared array). Each thread's fence orders its stores before the barrier,
    the barrier before thread 0's atomic; thread 0's fence after the atomic and the
    barrier order the last block's later reads (each thread fences again before them)
    after every part (dropout's last-block reduction, per-thread form)."""
    cuda.threadfence()
    cuda.syncthreads()
    if tid == 0:
        old = cuda.atomic.add(counters, tile, np.uint32(1))
        last[0] = np.int32(old == np.uint32(splits - 1))
        cuda.threadfence()
    cuda.syncthreads()
    return last[0] != 0


@inline_device
def _block_tile(pid, M, N, bm, bn, group_m):
    """(m0, n0) of block ``pid``: row-tiles taken ``group_m`` at a time, column-major
    inside a group (the seed's GROUP_M order), so neighbouring blocks share tiles."""
    grid_m = (M + bm - 1) // bm
    grid_n = (N + bn - 1) // bn
    width = group_m * grid_n
    first_m = (pid // width) * group_m
    gsize = min(grid_m - first_m, group_m)
    pid_m = first_m + (pid % width) % gsize
    pid_n = (pid % width) // gsize
    return pid_m * bm, pid_n * bn


def _storage(dtype):
    return types.Array(dtypes.numba_storage_type(dtype), 1, "C")


_I64 = types.int64


def _argtypes(dtype, pair=False):
    """The GEMM kernels': five arrays (a, b, bias, aux, out; a pair kernel's sixth
    after them) and eight integers."""
    return (_storage(dtype),) * (6 if pair else 5) + (_I64,) * 8


def _split_argtypes(dtype, pair=False):
    """The split-K kernel's: the plain (or pair) kernel's arrays, the float32
    workspace, the uint32 arrival counters, the plain eight integers and ``splits``."""
    return (_argtypes(dtype, pair)[:6 if pair else 5]
            + (types.Array(types.float32, 1, "C"), types.Array(types.uint32, 1, "C"))
            + (_I64,) * 9)


# ---------------------------------------------------------------------------
# Tensor-core GEMM
# ---------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def make_tc_kernel(role, dtype, vec, cfg, pair=False, split=False):
    """Tensor-core GEMM kernel for ``role`` in ('fwd', 'dgrad', 'wgrad'), ``dtype``
    'float16' | 'bfloat16', ``vec`` (cp.async tile loads; needs 16-byte aligned rows),
    tiling ``cfg`` (:class:`GemmConfig`). Launch: 1-D grid of
    ``cdiv(Mg, bm) * cdiv(Ng, bn)`` blocks of ``cfg.threads``, ``cfg.smem_bytes`` of
    dynamic shared memory.

    ``pair``: a gated unit's gate and up weights (and their gradients) used in place,
    without their interleaved copy. The kernel takes a sixth array ``b2`` after
    ``out``: fwd, B's row 2j is ``b``'s row j and row 2j + 1 ``b2``'s (the gate and up
    weights); dgrad, likewise B's k-rows (grad_x = dz @ W over the interleaved pairs'
    gradient dz); wgrad, output row 2j goes to ``out``'s row j and 2j + 1 to ``b2``'s
    (the gate's and up weight's gradients).

    ``split`` (fwd only): the split-K form for outputs of too few tiles to fill the
    GPU (a decoder's few tokens): ``splits`` blocks share each tile, block
    ``tile + part * tiles`` summing k-tiles ``part * per .. (part + 1) * per - 1``
    (``per = cdiv(cdiv(K, BK), splits)``); see the kernel's docstring for how the
    partial sums meet. Grid ``tiles * splits``; arguments as the plain kernel's plus
    ``ws`` and ``counters`` after ``out`` and ``splits`` last."""
    if role not in ROLES or dtype not in ("float16", "bfloat16"):
        raise ValueError(f"no tensor-core kernel for role={role!r}, dtype={dtype!r}")
    if split and role != "fwd":
        raise ValueError(f"split-K is a forward's (few output rows), not {role!r}'s")
    BM, BN, BK, WM, WN, STAGES, GROUP_M = cfg.validate()
    WARPS_N = BN // WN
    NT = cfg.threads
    MI, NI = WM // 16, WN // 8
    KK = BK // 16
    A_KMAJOR = role != "wgrad"
    B_KMAJOR = role == "fwd"
    WGRAD = role == "wgrad"
    A_ROWS, A_LEN = (BM, BK) if A_KMAJOR else (BK, BM)
    B_ROWS, B_LEN = (BN, BK) if B_KMAJOR else (BK, BN)
    A_SH, A_MK = _swizzle(A_LEN // 8)
    B_SH, B_MK = _swizzle(B_LEN // 8)
    A_ST = BM * BK
    B_ST = BN * BK
    B_OFF = STAGES * A_ST
    WAIT = STAGES - 2
    NACC = MI * NI * 4
    NBACC = MI * 4
    NAFR = MI * 4
    NBFR = NI * 2
    SDT = dtypes.STORAGE[dtype]
    mma = mma_f16 if dtype == "float16" else mma_bf16
    ONES = ONES_F16X2 if dtype == "float16" else ONES_BF16X2
    load_a = _tile_loader(A_ROWS, A_LEN, NT, vec, A_KMAJOR)
    # pair: fwd and dgrad read B's rows / k-rows from two arrays, wgrad writes the
    # output's rows to two.
    load_b = _tile_loader(B_ROWS, B_LEN, NT, vec, B_KMAJOR, pair and not WGRAD)
    put = _routed(_chunk_epilogue(role, dtype), pair and WGRAD)
    store = dtypes.storer(dtype)
    f32 = np.float32
    F32_DT = np.dtype(np.float32)  # an instance: the simulator's dynamic shared array needs one
    CLD = BN + 8  # float32 row stride of the staged C tile: conflict-free fragment writes
    CCH = BN // 8
    CSHIFT = _log2(CCH)
    EPI_ITERS = BM * CCH // NT

    @inline_device
    def load_stage(smem, s, k0, a, b, b2, M, N, K, lda, ldb, m0, n0, tid, inside):
        full = inside and k0 + BK <= K
        load_a(smem, s * A_ST, a, a, lda, k0, m0, K, M, tid, full)
        load_b(smem, B_OFF + s * B_ST, b, b2, ldb, k0, n0, K, N, tid, full)

    @inline_device
    def fragment_offsets(lane, wm0, wn0):
        """Per-lane ldmatrix byte offsets inside a stage for mi = nj = kk = 0. With the
        XOR swizzle (chunk c of row r at c ^ ((r >> SH) & MK)) the other fragments
        are these offsets plus a constant and XOR a constant on the chunk bits: a
        k-major operand's kk moves its chunk by 2 (XOR kk << 5 bytes), its mi / nj
        adds 16 rows; an mn-major operand's kk adds 16 rows, its mi / nj moves the
        chunk by 2 (XOR). The row's swizzle term does not change with either."""
        if A_KMAJOR:
            r = wm0 + (lane & 15)
            a_off = (r * BK + (((lane >> 4) ^ ((r >> A_SH) & A_MK)) << 3)) * 2
        else:
            r = (lane & 7) + ((lane >> 4) << 3)
            ch = (wm0 >> 3) + ((lane >> 3) & 1)
            a_off = (r * BM + ((ch ^ ((r >> A_SH) & A_MK)) << 3)) * 2
        if B_KMAJOR:
            r = wn0 + (lane & 7) + ((lane >> 4) << 3)
            b_off = (r * BK + ((((lane >> 3) & 1) ^ ((r >> B_SH) & B_MK)) << 3)) * 2
        else:
            r = (lane & 7) + (((lane >> 3) & 1) << 3)
            ch = (wn0 >> 3) + (lane >> 4)
            b_off = (r * BN + ((ch ^ ((r >> B_SH) & B_MK)) << 3)) * 2
        return a_off, b_off

    @inline_device
    def mainloop(smem, acc, bacc, afr, bfr, a, b, b2, M, N, K, lda, ldb, m0, n0, tid, a_off,
                 b_off, kt0, kt1, do_bias):
        """Accumulate k-tiles kt0 .. kt1 - 1 of the block's tile into acc (and, for
        wgrad's bias, A's row sums into bacc); leaves no copy in flight."""
        sbase = shared_address(smem, 0)
        inside = m0 + BM <= M and n0 + BN <= N
        for s in range(STAGES - 1):
            if kt0 + s < kt1:
                load_stage(smem, s, (kt0 + s) * BK, a, b, b2, M, N, K, lda, ldb, m0, n0, tid,
                           inside)
            cp_async_commit()

        st = 0  # ring slot of tile kt; tile kt + STAGES - 1 goes to the slot before it
        for kt in range(kt0, kt1):
            cp_async_wait(WAIT)
            cuda.syncthreads()
            nk = kt + STAGES - 1
            if nk < kt1:
                ls = st + STAGES - 1
                if ls >= STAGES:
                    ls -= STAGES
                load_stage(smem, ls, nk * BK, a, b, b2, M, N, K, lda, ldb, m0, n0, tid,
                           inside)
            cp_async_commit()
            a_st = sbase + st * (A_ST * 2)
            b_st = sbase + (B_OFF + st * B_ST) * 2
            for kk in range(KK):
                for mi in range(MI):
                    if A_KMAJOR:
                        fa = ldmatrix_x4_at(a_st + mi * (32 * BK) + (a_off ^ (kk << 5)))
                    else:
                        fa = ldmatrix_x4_trans_at(a_st + kk * (32 * BM) + (a_off ^ (mi << 5)))
                    afr[4 * mi] = fa[0]
                    afr[4 * mi + 1] = fa[1]
                    afr[4 * mi + 2] = fa[2]
                    afr[4 * mi + 3] = fa[3]
                for nj in range(NI // 2):
                    if B_KMAJOR:
                        fb = ldmatrix_x4_at(b_st + nj * (32 * BK) + (b_off ^ (kk << 5)))
                    else:
                        fb = ldmatrix_x4_trans_at(b_st + kk * (32 * BN) + (b_off ^ (nj << 5)))
                    bfr[4 * nj] = fb[0]
                    bfr[4 * nj + 1] = fb[1]
                    bfr[4 * nj + 2] = fb[2]
                    bfr[4 * nj + 3] = fb[3]
                for mi in range(MI):
                    for ni in range(NI):
                        c = (mi * NI + ni) * 4
                        d = mma(afr[4 * mi], afr[4 * mi + 1], afr[4 * mi + 2], afr[4 * mi + 3],
                                bfr[2 * ni], bfr[2 * ni + 1],
                                acc[c], acc[c + 1], acc[c + 2], acc[c + 3])
                        acc[c] = d[0]
                        acc[c + 1] = d[1]
                        acc[c + 2] = d[2]
                        acc[c + 3] = d[3]
                if WGRAD:
                    if do_bias:
                        for mi in range(MI):
                            d = mma(afr[4 * mi], afr[4 * mi + 1], afr[4 * mi + 2],
                                    afr[4 * mi + 3], ONES, ONES, bacc[4 * mi],
                                    bacc[4 * mi + 1], bacc[4 * mi + 2], bacc[4 * mi + 3])
                            bacc[4 * mi] = d[0]
                            bacc[4 * mi + 1] = d[1]
                            bacc[4 * mi + 2] = d[2]
                            bacc[4 * mi + 3] = d[3]
            st += 1
            if st == STAGES:
                st = 0

    @inline_device
    def stage_c(cs, acc, lane, wm0, wn0):
        """The warp's accumulator fragments into the float32 ``[BM][CLD]`` tile ``cs``
        (the caller syncs before, the shared memory being the k-tiles', and after)."""
        fr = wm0 + (lane >> 2)
        fc = wn0 + (lane & 3) * 2
        for mi in range(MI):
            for h in range(2):
                for ni in range(NI):
                    c = (mi * NI + ni) * 4 + 2 * h
                    ci = (fr + mi * 16 + h * 8) * CLD + fc + ni * 8
                    cs[ci] = acc[c]
                    cs[ci + 1] = acc[c + 1]

    @inline_device
    def finish(cs, tid, m0, n0, M, N, ldc, bias, aux, out, out2, act, flags):
        """The epilogue of the staged tile: each thread finishes 8 consecutive columns
        at a time, so that global loads and stores are 16-byte vectors and coalesced.
        wgrad with ``pair``: row m goes to row m // 2 of ``out`` (m even) or ``out2``."""
        for it in range(EPI_ITERS):
            e = tid + it * NT
            r = e >> CSHIFT
            c8 = (e & (CCH - 1)) << 3
            row = m0 + r
            col = n0 + c8
            if row < M and col < N:
                put(cs, r * CLD + c8, row, col, N, ldc, bias, aux, out, out2, act, flags)

    @inline_device
    def body(a, b, b2, bias, aux, out, M, N, K, lda, ldb, ldc, act, flags):
        """The kernel's work; ``b2``: the pair kernel's sixth array (B's odd rows or,
        wgrad, the output's odd rows), else unused."""
        smem = cuda.shared.array(0, SDT, alignment=_SMEM_ALIGN)
        tid = cuda.threadIdx.x
        lane = tid & 31
        warp = tid >> 5
        m0, n0 = _block_tile(cuda.blockIdx.x, M, N, BM, BN, GROUP_M)
        wm0 = (warp // WARPS_N) * WM
        wn0 = (warp % WARPS_N) * WN

        acc = cuda.local.array(NACC, np.float32)
        for i in range(NACC):
            acc[i] = f32(0.0)
        bacc = cuda.local.array(NBACC, np.float32)
        for i in range(NBACC):
            bacc[i] = f32(0.0)
        afr = cuda.local.array(NAFR, np.uint32)
        bfr = cuda.local.array(NBFR, np.uint32)
        do_bias = WGRAD and (flags & F_BIAS) != 0 and n0 == 0 and wn0 == 0
        a_off, b_off = fragment_offsets(lane, wm0, wn0)
        mainloop(smem, acc, bacc, afr, bfr, a, b, b2, M, N, K, lda, ldb, m0, n0, tid, a_off,
                 b_off, 0, (K + BK - 1) // BK, do_bias)

        if WGRAD:
            # Column 0 of the ones-product: lanes with t = 0 hold it (d0 and d2).
            if do_bias and (lane & 3) == 0:
                for mi in range(MI):
                    for h in range(2):
                        row = m0 + wm0 + mi * 16 + h * 8 + (lane >> 2)
                        if row < M:
                            store(bias, row, bacc[4 * mi + 2 * h])

        # Epilogue through shared memory: the fragments go to a float32 [BM][CLD]
        # tile, then finish moves 16-byte vectors.
        cuda.syncthreads()
        cs = cuda.shared.array(0, F32_DT, alignment=_SMEM_ALIGN)
        stage_c(cs, acc, lane, wm0, wn0)
        cuda.syncthreads()
        finish(cs, tid, m0, n0, M, N, ldc, bias, aux, out, b2, act, flags)

    def kernel(a, b, bias, aux, out, M, N, K, lda, ldb, ldc, act, flags):
        """C[m, n] = sum_k A[m, k] B[k, n] (m < M, n < N, k < K) on tensor cores, then
        fwd: preact = C + bias[n], out = act(preact); dgrad: out = C * act'(aux);
        wgrad: out = C and grad_bias[m] = sum_k A[m, k]. float32 until the final
        rounding to the storage dtype. The block computes the BM x BN tile at
        (m0, n0) = _block_tile(blockIdx.x).

        a: A, flat; ``a[m * lda + k]`` (fwd, dgrad) or ``a[k * lda + m]`` (wgrad).
        b: B, flat; ``b[n * ldb + k]`` (fwd) or ``b[k * ldb + n]`` (dgrad, wgrad).
        bias: fwd: bias[N] (read if flags & F_BIAS); wgrad: grad_bias[M] written with
            sum_k A[m, k] (if flags & F_BIAS); dgrad: unused.
        aux: fwd: preact[M, N] written (if flags & F_PREACT); dgrad: preact[M, N] read
            (if act != 0); wgrad: unused.
        out: C after the epilogue, ``out[m * ldc + n]``.
        act: activation code (ACT_CODES); flags: F_BIAS | F_PREACT | F_VEC | F_GATED.
        """
        body(a, b, b, bias, aux, out, M, N, K, lda, ldb, ldc, act, flags)

    def pair_kernel(a, b, bias, aux, out, b2, M, N, K, lda, ldb, ldc, act, flags):
        """The plain kernel with a sixth array: fwd, B's row 2j is ``b``'s row j and
        row 2j + 1 ``b2``'s (``b2[j * ldb + k]``); dgrad, likewise B's k-rows
        (``b2[j * ldb + n]`` is k-row 2j + 1); wgrad, output row 2j goes to ``out``'s
        row j and row 2j + 1 to ``b2``'s (grad_bias stays ``[M]``, rows in order)."""
        body(a, b, b2, bias, aux, out, M, N, K, lda, ldb, ldc, act, flags)

    PART = BM * BN
    PART_ITERS = PART // NT
    BN_SHIFT = _log2(BN)

    @inline_device
    def split_body(a, b, b2, bias, aux, out, ws, counters, M, N, K, lda, ldb, ldc, act, flags,
                   splits):
        """The split kernel's work; ``b2`` as :func:`body`'s."""
        smem = cuda.shared.array(0, SDT, alignment=_SMEM_ALIGN)
        last = cuda.shared.array(1, np.int32)
        tid = cuda.threadIdx.x
        lane = tid & 31
        warp = tid >> 5
        tiles = cuda.gridDim.x // splits
        tile = cuda.blockIdx.x % tiles
        part = cuda.blockIdx.x // tiles
        m0, n0 = _block_tile(tile, M, N, BM, BN, GROUP_M)
        wm0 = (warp // WARPS_N) * WM
        wn0 = (warp % WARPS_N) * WN

        acc = cuda.local.array(NACC, np.float32)
        for i in range(NACC):
            acc[i] = f32(0.0)
        bacc = cuda.local.array(NBACC, np.float32)
        afr = cuda.local.array(NAFR, np.uint32)
        bfr = cuda.local.array(NBFR, np.uint32)
        a_off, b_off = fragment_offsets(lane, wm0, wn0)
        KT = (K + BK - 1) // BK
        per = (KT + splits - 1) // splits
        kt0 = part * per
        mainloop(smem, acc, bacc, afr, bfr, a, b, b2, M, N, K, lda, ldb, m0, n0, tid, a_off,
                 b_off, kt0, min(KT, kt0 + per), False)

        cuda.syncthreads()
        cs = cuda.shared.array(0, F32_DT, alignment=_SMEM_ALIGN)
        stage_c(cs, acc, lane, wm0, wn0)
        cuda.syncthreads()
        rows = min(BM, M - m0)
        mine = (tile * splits + part) * PART
        for it in range(PART_ITERS):
            e = tid + it * NT
            r = e >> BN_SHIFT
            if r < rows:
                ws[mine + e] = cs[r * CLD + (e & (BN - 1))]
        # Publish the part, then count it in; the last block reads every part.
        if not _last_part(counters, tile, splits, last, tid):
            return
        cuda.threadfence()
        first = tile * splits * PART
        for it in range(PART_ITERS):
            e = tid + it * NT
            r = e >> BN_SHIFT
            if r < rows:
                ci = r * CLD + (e & (BN - 1))
                v = f32(0.0)
                for q in range(splits):
                    if q == part:
                        v += cs[ci]
                    else:
                        v += ld_cg_f32(ws, first + q * PART + e)
                cs[ci] = v
        cuda.syncthreads()
        finish(cs, tid, m0, n0, M, N, ldc, bias, aux, out, b2, act, flags)
        if tid == 0:
            counters[tile] = np.uint32(0)

    def split_kernel(a, b, bias, aux, out, ws, counters, M, N, K, lda, ldb, ldc, act, flags,
                     splits):
        """The plain kernel's C and epilogue with the k-tiles split ``splits`` ways.
        Block ``pid`` computes part ``part = pid // tiles`` of tile ``pid % tiles``
        (``tiles = gridDim.x // splits``): ``P_part[m, n] = sum_k A[m, k] B[k, n]``
        over its k-tiles, stored as float32 rows ``ws[(tile * splits + part) * BM * BN
        + r * BN + c]`` (rows of the output only). The last of a tile's blocks to
        arrive (``counters[tile]``, a uint32 zero on entry, is left zero) sums
        ``C = P_0 + P_1 + ... + P_{splits-1}`` in that order, whichever block it is
        (bits do not depend on the arrival order), and runs the plain epilogue on C.

        ws: float32 ``[tiles * splits * BM * BN]`` workspace; counters: uint32
        ``[>= tiles]``; splits: ``gridDim.x // tiles`` (a part past the last k-tile
        adds zeros). The other arguments are the plain kernel's."""
        split_body(a, b, b, bias, aux, out, ws, counters, M, N, K, lda, ldb, ldc, act, flags,
                   splits)

    def split_pair_kernel(a, b, bias, aux, out, b2, ws, counters, M, N, K, lda, ldb, ldc, act,
                          flags, splits):
        """The split kernel with the pair kernel's sixth array ``b2`` (B's odd rows)."""
        split_body(a, b, b2, bias, aux, out, ws, counters, M, N, K, lda, ldb, ldc, act, flags,
                   splits)

    name = (f"linear_{role}_{dtype}_{'vec' if vec else 'scalar'}_{BM}x{BN}x{BK}_w{WM}x{WN}"
            f"_s{STAGES}{'_pair' if pair else ''}{'_splitk' if split else ''}")
    if split:
        return Kernel(name, split_pair_kernel if pair else split_kernel,
                      _split_argtypes(dtype, pair))
    return Kernel(name, pair_kernel if pair else kernel, _argtypes(dtype, pair))


# ---------------------------------------------------------------------------
# Few-row forward (a decoder's tokens): the weight streamed through registers
# ---------------------------------------------------------------------------

# The most output rows (tokens) the few-row kernel takes: four 8-token MMA columns.
SKINNY_MAX_ROWS = 32


@functools.lru_cache(maxsize=None)
def make_skinny_kernel(dtype, cfg, tiles, pair=False):
    """The forward GEMM for outputs of a few rows (a decoder's tokens), ``dtype``
    'float16' | 'bfloat16', layout ``cfg`` (:class:`SkinnyConfig`), ``tiles`` 8-token
    MMA columns (1 to 4: M <= 8 * tiles). Same arguments and epilogue as
    :func:`make_tc_kernel`'s forward (with ``pair``, its pair form); 16-byte aligned
    x and weight rows and K a multiple of 8 (:func:`_skinny_for`). Launch: 1-D grid
    of ``cdiv(N, cfg.cols)`` blocks of ``cfg.threads``, no dynamic shared memory.

    Why: at a few rows the GEMM is the weight's read. The tiled kernels stage the
    weight through shared memory in tiles whose 16-row MMAs are mostly past M; here
    the products run transposed, ``C^T [N, M] = W [N, K] x^T``, so the weight is the
    MMA's 16-row A operand and the tokens its 8-wide B columns, and each weight
    element goes from global memory straight into the A fragment that uses it.

    Layout: block ``bid`` computes output columns ``n0 = bid * cols`` ..; warp ``w``
    handles k-chunks ``c = w, w + warps, ...`` (32 k each) for all its ``groups`` row
    groups. In a chunk, lane (g, t) = (lane // 4, lane % 4) loads 16 bytes, k =
    ``32 c + 8 t .. + 7``, of weight rows ``lo`` and ``hi`` of each group, and of x's
    rows (tokens) ``8 q + g``. An ``m16n8k16`` takes its lane's k-pairs at logical
    positions {2t, 2t + 1, 2t + 8, 2t + 9}; mapping those of the chunk's first MMA to
    the lane's physical k's 0-3 and the second MMA's to 4-7 is a permutation of the
    chunk's 32 k's, the same for A and B, so the sum over k is unchanged and every
    operand load is one 16-byte vector: A regs (lo word 0, hi word 0, lo word 1, hi
    word 1) and B regs (x word 0, word 1) for the first, words 2-3 for the second.

    Rows: plain, group r's A rows are weight rows ``n0 + 16 r + g`` (lo) and ``+ 8``
    (hi); ``pair``, B's interleaved row 2j is ``b``'s row j and 2j + 1 ``b2``'s, and
    a group's lo rows are ``b``'s rows ``n0 / 2 + 8 r + g``, hi the same rows of
    ``b2``: output columns ``n0 + 16 r + 2 g`` and ``+ 1``.

    The warps' partial sums ``P_w[n, m]`` (float32 accumulators) meet in shared
    memory and are added in warp order (deterministic), giving the float32 C tile
    that :func:`_chunk_epilogue`'s forward finishes (bias, preact, activation, gated
    pairs), 8 columns a thread."""
    if dtype not in ("float16", "bfloat16"):
        raise ValueError(f"no few-row kernel for dtype={dtype!r}")
    if tiles not in (1, 2, 3, 4):
        raise ValueError(f"tiles must be 1 to 4 (8 tokens each), got {tiles!r}")
    R, KS, U, policy, _, SPLITS = cfg.validate()
    SPLIT = SPLITS > 1
    NT = cfg.threads
    BNW = cfg.cols
    TOK = 8 * tiles
    RED = KS * BNW * TOK
    CT = TOK * BNW
    RED_ITERS = cdiv(CT, NT)
    CCH = BNW // 8
    EPI_ITERS = cdiv(TOK * CCH, NT)
    NACC = R * tiles * 4
    NWR = U * R * 4
    NXR = U * tiles * 4
    STEP = KS * U
    PREFETCH = bool(cfg.prefetch)
    mma = mma_f16 if dtype == "float16" else mma_bf16
    ld_w = ld_global_v4_evict(policy)
    put = _chunk_epilogue("fwd", dtype)
    zero4 = (np.uint32(0),) * 4
    f32 = np.float32

    @inline_device
    def live(c, K, c_end):
        """Whether chunk ``c`` is one of the block's: below K, and with ``splits``
        below its part's end ``c_end``."""
        if SPLIT:
            return c < c_end
        return c * 32 < K

    @inline_device
    def load_set(wl, wh, xv, a, b, b2, c, n0, g, t, M, N, K, lda, ldb, c_end):
        """The U chunks from chunk ``c`` (``warps`` apart) into one register set:
        U * (2 R + tiles) 16-byte loads in flight per lane, zeros past the edges
        (K's, and with ``splits`` the part's ``c_end``)."""
        for u in range(U):
            k = (c + u * KS) * 32 + 8 * t
            kin = k < K
            if SPLIT:
                kin = kin and c + u * KS < c_end
            for r in range(R):
                lo = zero4
                hi = zero4
                if pair:
                    j = (n0 >> 1) + 8 * r + g
                    if kin and 2 * j < N:
                        lo = ld_w(b, j * ldb + k)
                        hi = ld_w(b2, j * ldb + k)
                else:
                    row = n0 + 16 * r + g
                    if kin and row < N:
                        lo = ld_w(b, row * ldb + k)
                    if kin and row + 8 < N:
                        hi = ld_w(b, (row + 8) * ldb + k)
                for e in range(4):
                    wl[(u * R + r) * 4 + e] = lo[e]
                    wh[(u * R + r) * 4 + e] = hi[e]
            for q in range(tiles):
                v = zero4
                if kin and 8 * q + g < M:
                    v = ld_global_v4(a, (8 * q + g) * lda + k)
                for e in range(4):
                    xv[(u * tiles + q) * 4 + e] = v[e]

    @inline_device
    def mma_set(acc, wl, wh, xv):
        """The register set's MMAs, chunk by chunk in k order."""
        for u in range(U):
            for r in range(R):
                w0 = (u * R + r) * 4
                for q in range(tiles):
                    x0 = (u * tiles + q) * 4
                    ci = (r * tiles + q) * 4
                    for h in range(2):
                        d = mma(wl[w0 + 2 * h], wh[w0 + 2 * h], wl[w0 + 2 * h + 1],
                                wh[w0 + 2 * h + 1], xv[x0 + 2 * h], xv[x0 + 2 * h + 1],
                                acc[ci], acc[ci + 1], acc[ci + 2], acc[ci + 3])
                        acc[ci] = d[0]
                        acc[ci + 1] = d[1]
                        acc[ci + 2] = d[2]
                        acc[ci + 3] = d[3]

    @inline_device
    def body(a, b, b2, bias, aux, out, ws, counters, M, N, K, lda, ldb, ldc, act, flags,
             splits):
        red = cuda.shared.array(RED, np.float32)
        cs = cuda.shared.array(CT, np.float32)
        last = cuda.shared.array(1, np.int32)
        tid = cuda.threadIdx.x
        lane = tid & 31
        warp = tid >> 5
        g = lane >> 2
        t = lane & 3
        blk = cuda.blockIdx.x
        c = warp
        c_end = 0
        part = 0
        if SPLIT:
            # Part-major block order: the blocks running together read the same
            # part of x.
            nblk = cuda.gridDim.x // splits
            part = cuda.blockIdx.x // nblk
            blk = cuda.blockIdx.x - part * nblk
            per = ((K + 31) // 32 + splits - 1) // splits
            c = part * per + warp
            c_end = min((K + 31) // 32, (part + 1) * per)
        n0 = blk * BNW
        acc = cuda.local.array(NACC, np.float32)
        for i in range(NACC):
            acc[i] = f32(0.0)
        wl = cuda.local.array(NWR, np.uint32)
        wh = cuda.local.array(NWR, np.uint32)
        xv = cuda.local.array(NXR, np.uint32)
        if PREFETCH:
            # Two register sets: the next turn's loads are issued before this turn's
            # MMAs, so a warp's loads stay in flight while it multiplies.
            wl2 = cuda.local.array(NWR, np.uint32)
            wh2 = cuda.local.array(NWR, np.uint32)
            xv2 = cuda.local.array(NXR, np.uint32)
            load_set(wl, wh, xv, a, b, b2, c, n0, g, t, M, N, K, lda, ldb, c_end)
            while live(c, K, c_end):
                load_set(wl2, wh2, xv2, a, b, b2, c + STEP, n0, g, t, M, N, K, lda, ldb,
                         c_end)
                mma_set(acc, wl, wh, xv)
                c += STEP
                if not live(c, K, c_end):
                    break
                load_set(wl, wh, xv, a, b, b2, c + STEP, n0, g, t, M, N, K, lda, ldb, c_end)
                mma_set(acc, wl2, wh2, xv2)
                c += STEP
        else:
            while live(c, K, c_end):
                load_set(wl, wh, xv, a, b, b2, c, n0, g, t, M, N, K, lda, ldb, c_end)
                mma_set(acc, wl, wh, xv)
                c += STEP

        # The warps' partial sums, C^T fragments: d0, d1 at (row lo, tokens 8q + 2t,
        # + 1), d2, d3 at row hi.
        base = warp * BNW * TOK
        for r in range(R):
            if pair:
                clo = 16 * r + 2 * g
                chi = clo + 1
            else:
                clo = 16 * r + g
                chi = clo + 8
            for q in range(tiles):
                ci = (r * tiles + q) * 4
                m = 8 * q + 2 * t
                red[base + clo * TOK + m] = acc[ci]
                red[base + clo * TOK + m + 1] = acc[ci + 1]
                red[base + chi * TOK + m] = acc[ci + 2]
                red[base + chi * TOK + m + 1] = acc[ci + 3]
        cuda.syncthreads()
        for it in range(RED_ITERS):
            e = tid + it * NT
            if e < CT:
                v = red[e]
                for w in range(1, KS):
                    v += red[w * BNW * TOK + e]
                col = e // TOK
                m = e - col * TOK
                cs[m * BNW + col] = v
        cuda.syncthreads()
        if SPLIT:
            # The part to ws, then counted in (make_tc_kernel's split form). The last
            # block adds the parts in part order, whichever arrives last, and runs
            # the epilogue.
            mine = (blk * splits + part) * CT
            for it in range(RED_ITERS):
                e = tid + it * NT
                if e < CT:
                    ws[mine + e] = cs[e]
            if not _last_part(counters, blk, splits, last, tid):
                return
            cuda.threadfence()
            first = blk * splits * CT
            for it in range(RED_ITERS):
                e = tid + it * NT
                if e < CT:
                    v = f32(0.0)
                    for q in range(splits):
                        if q == part:
                            v += cs[e]
                        else:
                            v += ld_cg_f32(ws, first + q * CT + e)
                    cs[e] = v
            cuda.syncthreads()
            if tid == 0:
                counters[blk] = np.uint32(0)
        for it in range(EPI_ITERS):
            e = tid + it * NT
            m = e // CCH
            c8 = (e - m * CCH) * 8
            if m < M and n0 + c8 < N:
                put(cs, m * BNW + c8, m, n0 + c8, N, ldc, bias, aux, out, act, flags)

    def kernel(a, b, bias, aux, out, M, N, K, lda, ldb, ldc, act, flags):
        """preact[m, n] = sum_k a[m * lda + k] b[n * ldb + k] (+ bias[n]), out =
        act(preact) (m < M <= 8 * tiles, n < N): make_tc_kernel's forward, computed
        as C^T on the block's columns n0 = blockIdx.x * cols (see
        make_skinny_kernel). Arguments as make_tc_kernel's forward."""
        body(a, b, b, bias, aux, out, out, out, M, N, K, lda, ldb, ldc, act, flags, 1)

    def pair_kernel(a, b, bias, aux, out, b2, M, N, K, lda, ldb, ldc, act, flags):
        """The kernel with B's row 2j read from ``b``'s row j and row 2j + 1 from
        ``b2``'s (a gated unit's gate and up weights in place)."""
        body(a, b, b2, bias, aux, out, out, out, M, N, K, lda, ldb, ldc, act, flags, 1)

    def split_kernel(a, b, bias, aux, out, ws, counters, M, N, K, lda, ldb, ldc, act, flags,
                     splits):
        """The kernel with the k-chunks split ``splits`` ways: block ``pid`` computes
        part ``part = pid // nblk`` (``nblk = gridDim.x // splits`` column blocks) of
        column block ``blk = pid % nblk``, chunks ``part * per ..`` (``per =
        cdiv(cdiv(K, 32), splits)``): ``P_part`` (the block's C tile over its
        chunks) stored as float32 ``ws[(blk * splits + part) * CT + m * cols + c]``
        (``CT = 8 tiles cols``). The last of a column block's parts to arrive
        (``counters[blk]``, uint32 zero on entry, left zero) sums ``C = P_0 + ... +
        P_{splits-1}`` in that order and runs the epilogue. ws: float32 ``[nblk *
        splits * CT]``; the other arguments are the kernel's."""
        body(a, b, b, bias, aux, out, ws, counters, M, N, K, lda, ldb, ldc, act, flags,
             splits)

    def split_pair_kernel(a, b, bias, aux, out, b2, ws, counters, M, N, K, lda, ldb, ldc, act,
                          flags, splits):
        """The split kernel with the pair kernel's ``b2``."""
        body(a, b, b2, bias, aux, out, ws, counters, M, N, K, lda, ldb, ldc, act, flags,
             splits)

    name = (f"linear_fwd_{dtype}_skinny_g{R}_w{KS}_u{U}{'p' if PREFETCH else ''}_t{tiles}"
            f"_{str(policy).replace('+', '_')}{'_pair' if pair else ''}"
            f"{f'_k{SPLITS}' if SPLIT else ''}")
    # A register budget for ptxas (launch bounds: the block size and one block per
    # SM; either alone is not one): without it ptxas picks a low register count of its
    # own and sinks a chunk's loads below the previous chunk's MMAs (sm_90 SASS: one
    # chunk of loads in flight a warp instead of U). (The simulator's jit drops them.)
    if SPLIT:
        # The split exists to put more blocks on an SM: ask ptxas for a register
        # count that lets SPLIT_BLOCKS of them fit (its own pick, 72 / 92 at 1 / 2
        # token tiles, held three / two blocks of 256 threads). 64 a thread at one
        # token tile keeps every load of a turn before its first HMMA; at two it
        # moved one HMMA up among them (sm_90 SASS), so 85 there; 64 spilled at four
        # (pair form), so 128 beyond two.
        SPLIT_BLOCKS = max(1, min(8, 65536 // (NT * (64, 85, 128, 128)[tiles - 1])))
        return Kernel(name, split_pair_kernel if pair else split_kernel,
                      _split_argtypes(dtype, pair), launch_bounds=(NT, SPLIT_BLOCKS))
    return Kernel(name, pair_kernel if pair else kernel, _argtypes(dtype, pair),
                  launch_bounds=(NT, 1))


# ---------------------------------------------------------------------------
# Hopper warpgroup-MMA GEMM (forward; opt-in)
# ---------------------------------------------------------------------------


def unrolled_over_acc(step, steps, nargs, width=8):
    """Inline device function ``run(acc, a0 .. a{nargs - 1})`` calling ``step(acc[w q],
    .., acc[w q + w - 1], q, a0, ..)`` (w = ``width``) for q = 0 .. ``steps`` - 1, each
    call written out with q a constant. NVVM leaves a loop over a large body rolled,
    and in a rolled loop ``acc[w q + i]`` is a dynamic index: the whole accumulator
    array then lives in local memory instead of registers."""
    args = ", ".join(f"a{i}" for i in range(nargs))
    lines = [f"def run(acc, {args}):"]
    for q in range(steps):
        vals = ", ".join(f"acc[{width * q + i}]" for i in range(width))
        lines.append(f"    step({vals}, {q}, {args})")
    scope = {"step": step}
    exec("\n".join(lines), scope)
    return inline_device(scope["run"])


# Registers a thread of the warp-specialised kernel's producer warpgroup keeps: 40
# and 56 spilled wgrad's MN-major address math, 64 spilled one register once the
# producer also waits and fences (pfence); 72 still leaves the consumers 216.
WS_PRODUCER_REGS = 72


def ws_register_split(threads, consumers, producer=WS_PRODUCER_REGS):
    """(producer, consumer) per-thread register counts for ``setmaxnreg`` in a block of
    ``threads`` threads (one producer warpgroup of 128, ``consumers`` MMA threads)
    launched with ``launch_bounds=(threads, 1)``.

    ptxas gives such a block ``r = floor(65536 / threads / 8) * 8`` registers a thread,
    and ``setmaxnreg`` only moves registers within the block's ``r * threads``:
    ``setmaxnreg.inc`` to more than the producers' decrease freed waits for registers
    no warp will release, a hang. So the consumers get
    ``floor((r * threads - 128 * producer) / consumers / 8) * 8`` (at most 256).
    """
    if threads != consumers + 128:
        raise ValueError(f"a warp-specialised block is the consumers ({consumers}) plus one "
                         f"128-thread producer warpgroup, got {threads} threads")
    launch = min(255, 65536 // threads) // 8 * 8
    consumer = min(256, (launch * threads - 128 * producer) // consumers // 8 * 8)
    if producer % 8 or not 24 <= producer <= launch or consumer < launch:
        raise ValueError(f"setmaxnreg: no split of {launch} registers a thread over "
                         f"{threads} threads gives the producers {producer} and the "
                         f"consumers at least {launch}")
    return producer, consumer


@functools.lru_cache(maxsize=None)
def make_wgmma_kernel(role, dtype, cfg, pair=False):
    """Forward (``role`` 'fwd') or dgrad GEMM on Hopper's warpgroup MMA for ``dtype``
    'float16' | 'bfloat16', tiling ``cfg`` (:class:`WgmmaConfig`); the same arguments,
    math and epilogue as :func:`make_tc_kernel`'s role (16-byte aligned A and B rows
    only). Launch: 1-D
    grid of ``cdiv(Mg, bm) * cdiv(Ng, bn)`` blocks of ``cfg.threads``,
    ``cfg.smem_bytes`` of dynamic shared memory; needs sm_90a (numba-cuda compiles
    for it on Hopper).

    fwd's operands are K-major (A = x ``[M, K]``, B = weight ``[N, K]``) and are staged
    by 16-byte cp.async into the no-swizzle canonical layout the descriptors
    describe: 8-row x 16-byte core matrices, chunk ``e`` of a tile at byte ``16 e``
    with ``e = (row // 8) (bk / 8) 8 + (k // 8) 8 + row % 8`` (LBO 128 bytes between
    K-neighbours, SBO ``16 bk`` between row groups), so a warp's cp.async writes are
    contiguous; MN-major operands likewise (``tile_loader``).

    With ``cfg.swizzle = 128`` (bk = 64) the tiles are 128-byte lines instead, 8 of
    them a 1024-byte atom whose 16-byte chunk ``c`` of line ``s`` is stored at chunk
    ``c ^ (s % 8)``: chunk ``e`` of a tile (line ``s = e // 8``, ``c = e % 8``) at byte
    ``16 (e ^ (s % 8))``. K-major, line ``s`` is tile row ``s`` (its 64 k), SBO 1024
    between 8-row groups, LBO unused, and K step ``j`` starts ``32 j`` bytes into the
    lines (the hardware XORs the final address, so the atoms must sit on 1024-byte
    boundaries: the dynamic shared array is declared 1024-aligned, every stage is a
    multiple of 8 KiB). MN-major (bm, bn multiples of 64), atom column ``a`` (64
    outputs) holds ``bk`` k-lines, line ``s = a bk + k``: SBO 1024 between groups of 8
    k-lines, LBO ``128 bk`` between atom columns, K step ``j`` 16 lines (2048 bytes)
    further. Either way 8 consecutive threads copy one 128-byte line of global memory.

    Per k-tile each warpgroup issues ``bk / 16`` wgmma (m64 x bn x k16), commits them
    as one group and waits until at most ``cfg.inflight`` groups are running; a ring
    slot is refilled only once the MMAs that read it are done.

    ``pair``: :func:`make_tc_kernel`'s pair form (a sixth array ``b2``: B's rows or
    k-rows from two weights, or wgrad's output rows to two gradients)."""
    if role not in ROLES or dtype not in ("float16", "bfloat16"):
        raise ValueError(f"no wgmma kernel for role={role!r}, dtype={dtype!r}")
    # dgrad's and wgrad's B (b[k * ldb + n]) and wgrad's A (a[k * lda + m]) have the
    # output dimension contiguous: staged MN-major, read with imm-trans-b / -a.
    A_MN = role == "wgrad"
    B_MN = role != "fwd"
    WGRAD = role == "wgrad"
    BM, BN, BK, STAGES, GROUP_M, INFLIGHT, SW, WS, PFENCE, _, TMA, EPI = cfg.validate()
    if TMA and role != "fwd":
        raise ValueError(f"{cfg}: the TMA producer is implemented for the forward (K-major "
                         f"A and B), not role {role!r}")
    # The TMA pair form: B's two halves come as two boxes, b's rows n0 / 2.. in tile
    # rows 0 .. bn / 2 - 1 and b2's in the rest (a box cannot interleave two tensors'
    # rows), so accumulator column c is interleaved column 2 c (c < bn / 2) or
    # 2 (c - bn / 2) + 1: the epilogue writes the C tile in the interleaved order.
    TMA_PAIR = bool(TMA) and pair
    if TMA_PAIR and (BN // 2) % 8:
        raise ValueError(f"{cfg}: the TMA pair form needs bn / 2 a multiple of 8")
    # TMA: the bytes one ring slot receives (A's and B's boxes, zeros included).
    STAGE_BYTES = (BM + BN) * BK * 2
    # pfence: the producer arrives on full[s] for the tile LAG behind the one it
    # just issued. LAG <= stages - 2 keeps the ring live: the producer's wait on
    # empty for tile p needs tile p - stages released, which the consumers do while
    # on tile p - stages + 1 (one k-tile in flight) <= p - LAG - 1.
    LAG = STAGES - 2
    if SW and B_MN and BN % 64:
        raise ValueError(f"{cfg}: role {role!r} stages B MN-major, which the 128-byte "
                         f"swizzle needs in whole 64-wide atoms (bn a multiple of 64)")
    NT = cfg.threads
    # Consumer threads (the MMA warpgroups) and the threads that load the tiles: all
    # of them, or (warp specialised) the producer warpgroup after the consumers.
    NC = (BM // 64) * 128
    LT = 128 if WS else NT
    FULL = cfg.bar_offset // 8
    # setmaxnreg (warp specialised): the producer warpgroup drops to WS_PRODUCER_REGS
    # registers a thread (ptxas holds its code to that), the consumers rise to what
    # that frees. The pool is the block's launch allocation (launch_bounds (NT, 1):
    # 168 a thread at 384 threads), not the SM's 64K: an increase the pool cannot
    # cover waits forever (224 hung on the H100).
    PRODUCER_REGS, CONSUMER_REGS = ws_register_split(NT, NC) if WS else (0, 0)
    EMPTY = FULL + STAGES
    U64_DT = np.dtype(np.uint64)
    # Tiles loaded ahead. With INFLIGHT = 1 the slot refilled at tile kt held tile
    # kt - 2, whose MMAs the previous iteration's wgmma_wait(1) retired (every
    # warpgroup, by the barrier at the top of the iteration).
    PREF = STAGES - 1 - INFLIGHT
    CH = BK // 8
    LCH = _log2(CH)
    LBK = _log2(BK)
    # Descriptor strides (bytes) and the element advance per 16-wide K step. K-major
    # swizzled operands ignore LBO (a K step never leaves its 128-byte line): 16, the
    # field value 1 CUTLASS writes there.
    if SW:
        A_LBO = BK * 128 if A_MN else 16
        B_LBO = BK * 128 if B_MN else 16
        A_SBO = B_SBO = 1024
        A_KSTEP = 1024 if A_MN else 16
        B_KSTEP = 1024 if B_MN else 16
    else:
        A_LBO = B_LBO = 128
        A_SBO = B_SBO = BK * 16
        A_KSTEP = B_KSTEP = 128
    # A warpgroup's 64 rows of A are 64 bk elements in every layout (8 row groups, or
    # one 64-wide MN-major atom column).
    A_WG = 64 * BK
    SMEM_ALIGN = 1024 if SW and not SIMULATOR else _SMEM_ALIGN
    A_ST = BM * BK
    B_ST = BN * BK
    B_OFF = STAGES * A_ST
    A_CHUNKS = BM * CH
    B_CHUNKS = BN * CH
    A_IT = cdiv(A_CHUNKS, LT)
    B_IT = cdiv(B_CHUNKS, LT)
    WAIT = PREF - 1
    KSTEPS = BK // 16
    NACC = BN // 2
    SDT = dtypes.STORAGE[dtype]
    op = wgmma_op(BN, dtype, A_MN, B_MN)
    # wgrad's grad_bias[m] = sum_k A[m, k]: A times an 8 x 16 tile of ones (after the
    # ring) on an m64n8 wgmma per k step, column 0 of its result.
    op_ones = wgmma_op(8, dtype, A_MN, False)
    ONES_OFF = STAGES * (A_ST + B_ST)
    ONES = ONES_F16X2 if dtype == "float16" else ONES_BF16X2
    U32_DT = np.dtype(np.uint32)
    store = dtypes.storer(dtype)
    put = _routed(_chunk_epilogue(role, dtype, fast=EPI), pair and WGRAD)
    f32 = np.float32
    F32_DT = np.dtype(np.float32)
    CLD = BN + 8
    CCH = BN // 8
    EPI_ITERS = cdiv(BM * CCH, NC)
    # hoist: with NC a multiple of CCH, thread tid's chunks all sit at column
    # (tid % CCH) 8 of the tile, so its 8 bias values are loaded once.
    HOIST = bool(cfg.hoist) and role == "fwd" and NC % CCH == 0
    # epi 2 (v7b): epi 1 plus the epilogue's shared-memory indices unsigned 32-bit.
    LEAN = EPI >= 2
    LEAN_LOOP = LEAN and NC % CCH == 0
    U1 = np.uint32(1)
    U8 = np.uint32(8)
    chunk_pre = _chunk_epilogue(role, dtype, preloaded=True, fast=EPI)
    ZERO4 = (np.uint32(0),) * 4
    # epi 3 (v9): the forward's epilogue from the registers (reg_epilogue). Not the
    # TMA pair form (its accumulator columns are the two halves, not pairs).
    REG = EPI >= 3 and role == "fwd" and not TMA_PAIR
    # epi 4 (v10): epi 3 with each quad's words transposed by shuffles so that every
    # store is a 16-byte chunk of a row (gated h: 8 bytes), as the C tile's are.
    QUAD = REG and EPI == 4
    LO16, HI16, SH16 = np.uint32(0xFFFF), np.uint32(0xFFFF0000), np.uint32(16)
    if REG:
        ract4, ract8 = fast_act_switch(dtype, 4), fast_act_switch(dtype, 8)
        rpack, runpack = half_packers(dtype)

    def tile_loader(mn_major, paired=False):
        """Device function ``load(smem, base, g, g2, ld, k0, c0, k_lim, c_lim, tid, full,
        nchunks, iters)`` staging a tile of g (row stride ld) into the layout the
        descriptors describe at smem[base:], zero-filled outside the limits.
        ``paired``: the operand's stored rows (K-major: along M / N; MN-major: the
        reduction's) alternate between g and g2, row 2j being g's row j and 2j + 1
        g2's; otherwise g2 is unused.

        No swizzle, chunk e at byte 16 e: K-major (``g[c * ld + k]``, rows c0.. below
        c_lim along M / N, k0.. below k_lim): chunk e holds row c0 + (e >> (3 +
        log2(bk / 8))) 8 + e % 8, columns k0 + ((e >> 3) % (bk / 8)) 8... MN-major
        (``g[k * ld + c]``): chunk e holds reduction row k0 + ((e >> 3) % (bk / 8)) 8 +
        e % 8, columns c0 + (e >> (3 + log2(bk / 8))) 8... Either way core matrices of 8
        lines, LBO 128 along the reduction, SBO 16 bk along M / N.

        128-byte swizzle, chunk e (line s = e >> 3) at byte 16 (e ^ (s % 8)): K-major,
        row c0 + s, columns k0 + (e % 8) 8...; MN-major, reduction row k0 + s % bk,
        columns c0 + (s // bk) 64 + (e % 8) 8..."""

        # A whole swizzled tile (``full``) by strength reduction: with LT a multiple of
        # 64 a thread's chunks e = tid + it LT keep e % 8 and the swizzle (line % 8:
        # LT / 8 lines an iteration, a multiple of 8), so chunk it sits LT it chunks
        # after chunk 0 in shared memory and a fixed offset after it in global
        # memory: K-major, LT / 8 rows further; MN-major (LT / 8 dividing bk), k-line
        # (it % R) LT / 8 and atom column it // R (R = 8 bk / LT), both compile-time.
        # The generic form below recomputes line, column and swizzle per chunk: ~40
        # instructions a chunk, which held v4's producer warpgroup to ~940 instructions
        # a k-tile against ~1000 cycles of tensor work (ncu, 2026-11-26).
        Q = LT // 8
        STRENGTH = bool(SW) and LT % 64 == 0 and (not mn_major or BK % Q == 0)
        R = BK // Q if STRENGTH and mn_major else 1
        # paired: a thread's chunks e = tid + it LT all lie on lines of one parity (LT
        # a multiple of 16; k0 and c0 even): swizzled, line = (e >> 3) + an even
        # offset; otherwise a multiple of 8 plus e % 8. So each thread reads one of
        # the two arrays throughout, chosen once.
        ODD_SHIFT = 3 if SW else 0
        if paired and LT % 16:
            raise ValueError(f"paired rows need a multiple of 16 loading threads, got {LT}")

        @inline_device
        def load_full(smem, base, g, g2, ld, k0, c0, tid, nchunks, iters):
            """The ``full`` swizzled tile (every chunk inside the operand)."""
            t3 = tid >> 3
            c8 = (tid & 7) << 3
            dst0 = base + ((tid ^ (t3 & 7)) << 3)
            ldq = ld * Q
            if mn_major:
                src0 = (k0 + t3) * ld + c0 + c8
            else:
                src0 = (c0 + t3) * ld + k0 + c8
            src_arr = g
            if paired:
                # A thread's lines step by Q (even) from an even k0 / c0 plus t3: Q / 2
                # rows of its array at a time.
                ldq = ld * (Q >> 1)
                if mn_major:
                    src0 = ((k0 + t3) >> 1) * ld + c0 + c8
                else:
                    src0 = ((c0 + t3) >> 1) * ld + k0 + c8
                if t3 & 1:
                    src_arr = g2
            # One running offset (a constant table of per-chunk offsets spilled the
            # 72-register producer of wgrad, both operands MN-major).
            src = src0
            back = 64 - (R - 1) * ldq
            for it in range(iters):
                if nchunks % LT == 0 or tid + it * LT < nchunks:
                    cp_async_16(smem, dst0 + it * (LT * 8), src_arr, src, 16)
                if mn_major and it % R == R - 1:
                    src += back
                else:
                    src += ldq

        @inline_device
        def load(smem, base, g, g2, ld, k0, c0, k_lim, c_lim, tid, full, nchunks, iters):
            if STRENGTH and full:
                load_full(smem, base, g, g2, ld, k0, c0, tid, nchunks, iters)
                return
            src_arr = g
            if paired:
                if (tid >> ODD_SHIFT) & 1:
                    src_arr = g2
            for it in range(iters):
                e = tid + it * LT
                if e < nchunks:
                    if SW:
                        ln = e >> 3
                        dst = base + ((e ^ (ln & 7)) << 3)
                        if mn_major:
                            line = k0 + (ln & (BK - 1))
                            inner = c0 + ((ln >> LBK) << 6) + ((e & 7) << 3)
                        else:
                            line = c0 + ln
                            inner = k0 + ((e & 7) << 3)
                    else:
                        dst = base + e * 8
                        grp = c0 + ((e >> (3 + LCH)) << 3)
                        kc = k0 + (((e >> 3) & (CH - 1)) << 3)
                        if mn_major:
                            line, inner = kc + (e & 7), grp
                        else:
                            line, inner = grp + (e & 7), kc
                    if mn_major:
                        line_lim, inner_lim = k_lim, c_lim
                    else:
                        line_lim, inner_lim = c_lim, k_lim
                    row = line
                    if paired:
                        row = line >> 1
                    if full:
                        cp_async_16(smem, dst, src_arr, row * ld + inner, 16)
                    else:
                        n = 0
                        if line < line_lim and inner < inner_lim:
                            n = min(16, (inner_lim - inner) * 2)
                        if n > 0:
                            cp_async_16(smem, dst, src_arr, row * ld + inner, n)
                        else:
                            cp_async_16(smem, dst, g, 0, 0)

        return load

    # pair: fwd and dgrad read B's rows / k-rows from two arrays, wgrad writes the
    # output's rows to two (see make_tc_kernel).
    load_a = tile_loader(A_MN)
    load_b = tile_loader(B_MN, pair and not WGRAD)

    @inline_device
    def load_stage(smem, s, k0, a, b, b2, M, N, K, lda, ldb, m0, n0, tid, inside):
        full = inside and k0 + BK <= K
        load_a(smem, s * A_ST, a, a, lda, k0, m0, K, M, tid, full, A_CHUNKS, A_IT)
        load_b(smem, B_OFF + s * B_ST, b, b2, ldb, k0, n0, K, N, tid, full, B_CHUNKS, B_IT)

    @inline_device
    def mma_tile(smem, st, acc, bacc, a_wg, do_bias):
        """The k-tile in ring slot ``st``: bk / 16 wgmma into acc (and the ones-wgmma
        into bacc), committed as one group."""
        wgmma_fence()
        for j in range(KSTEPS):
            da = wgmma_desc(smem, st * A_ST + a_wg + j * A_KSTEP, A_LBO, A_SBO, SW)
            db = wgmma_desc(smem, B_OFF + st * B_ST + j * B_KSTEP, B_LBO, B_SBO, SW)
            op(acc, da, db, 1)
            if do_bias:
                op_ones(bacc, da, wgmma_desc(smem, ONES_OFF, 128, 256), 1)
        wgmma_commit()

    @inline_device
    def mainloop(smem, acc, bacc, a, b, b2, M, N, K, lda, ldb, m0, n0, tid, a_wg, KT, inside,
                 do_bias):
        """Every thread loads (cp.async groups, PREF tiles ahead) and multiplies; a
        block barrier per k-tile."""
        for s in range(PREF):
            if s < KT:
                load_stage(smem, s, s * BK, a, b, b2, M, N, K, lda, ldb, m0, n0, tid, inside)
            cp_async_commit()
        st = 0
        for kt in range(KT):
            cp_async_wait(WAIT)
            # The ring slot was written by cp.async and is read by the tensor cores
            # (the async proxy): each thread fences its copies, then the barrier.
            fence_proxy_async()
            cuda.syncthreads()
            nk = kt + PREF
            if nk < KT:
                ls = st + PREF
                if ls >= STAGES:
                    ls -= STAGES
                load_stage(smem, ls, nk * BK, a, b, b2, M, N, K, lda, ldb, m0, n0, tid, inside)
            cp_async_commit()
            mma_tile(smem, st, acc, bacc, a_wg, do_bias)
            wgmma_wait(INFLIGHT)
            st += 1
            if st == STAGES:
                st = 0
        wgmma_wait(0)

    @inline_device
    def tma_produce(smem, bars, ma, mb, mb2, m0, n0, ptid, KT):
        """Warp specialised with ``tma``: the producer warpgroup's thread 0 alone waits
        for slot s's ``empty[s]`` phase, announces the slot's bytes on ``full[s]`` (its
        one arrival) and issues A's box (rows m0.., k-tile kt) and B's (rows n0..; the
        pair form: ``mb``'s and ``mb2``'s rows n0 / 2.., one half tile each), which
        complete the phase as they land."""
        if ptid != 0:
            return
        fence_proxy_tensormap(ma)
        fence_proxy_tensormap(mb)
        if TMA_PAIR:
            fence_proxy_tensormap(mb2)
        st = 0
        rnd = 0
        for kt in range(KT):
            mbarrier_wait(bars, EMPTY + st, (rnd & 1) ^ 1)
            mbarrier_arrive_expect_tx(bars, FULL + st, STAGE_BYTES)
            tma_load_2d(smem, st * A_ST, ma, kt * BK, m0, bars, FULL + st)
            if TMA_PAIR:
                tma_load_2d(smem, B_OFF + st * B_ST, mb, kt * BK, n0 >> 1, bars, FULL + st)
                tma_load_2d(smem, B_OFF + st * B_ST + (BN >> 1) * BK, mb2, kt * BK, n0 >> 1,
                            bars, FULL + st)
            else:
                tma_load_2d(smem, B_OFF + st * B_ST, mb, kt * BK, n0, bars, FULL + st)
            st += 1
            if st == STAGES:
                st = 0
                rnd += 1

    @inline_device
    def ws_produce(smem, bars, a, b, b2, M, N, K, lda, ldb, m0, n0, ptid, KT, inside):
        """Warp specialised, the producer warpgroup (``ptid`` = its thread index): fill
        ring slot s once its ``empty[s]`` phase completes (every consumer thread
        arrived after its MMAs on the slot retired; a fresh barrier's parity-1 phase
        counts as done), then one arrival on ``full[s]`` per thread as its copies land
        (cp.async.mbarrier.arrive.noinc: 128 arrivals). pfence: the arrival for tile
        kt - LAG follows the wait for its copies and a proxy fence, and the last LAG
        tiles are announced after the loop."""
        st = 0
        rnd = 0
        ready = 0  # pfence: the ring slot of the next tile to announce on full
        for kt in range(KT):
            mbarrier_wait(bars, EMPTY + st, (rnd & 1) ^ 1)
            load_stage(smem, st, kt * BK, a, b, b2, M, N, K, lda, ldb, m0, n0, ptid, inside)
            if PFENCE:
                # Tile kt - LAG has landed once at most LAG newer groups are pending;
                # this thread's fence hands its copies to the async proxy before the
                # arrival releases them (the consumers then fence nothing).
                cp_async_commit()
                if kt >= LAG:
                    cp_async_wait(LAG)
                    fence_proxy_async()
                    mbarrier_arrive(bars, FULL + ready)
                    ready += 1
                    if ready == STAGES:
                        ready = 0
            else:
                cp_async_mbarrier_arrive(bars, FULL + st)
            st += 1
            if st == STAGES:
                st = 0
                rnd += 1
        if PFENCE:
            cp_async_wait(0)
            fence_proxy_async()
            for _ in range(min(LAG, KT)):
                mbarrier_arrive(bars, FULL + ready)
                ready += 1
                if ready == STAGES:
                    ready = 0

    @inline_device
    def ws_consume(smem, bars, acc, bacc, a_wg, KT, do_bias):
        """Warp specialised, a consumer warpgroup: wait on ``full[s]``, multiply, and
        release the slot on ``empty[s]`` once wgmma_wait retired its MMAs (with one
        k-tile in flight, the previous tile's slot). No block barrier in the loop."""
        st = 0
        rnd = 0
        prev = 0
        for kt in range(KT):
            mbarrier_wait(bars, FULL + st, rnd & 1)
            if not PFENCE and not TMA:
                # Written through the generic proxy (cp.async), read by the tensor
                # cores (async proxy).
                fence_proxy_async()
            mma_tile(smem, st, acc, bacc, a_wg, do_bias)
            wgmma_wait(INFLIGHT)
            if INFLIGHT == 0:
                mbarrier_arrive(bars, EMPTY + st)
            elif kt > 0:
                mbarrier_arrive(bars, EMPTY + prev)
            prev = st
            st += 1
            if st == STAGES:
                st = 0
                rnd += 1
        wgmma_wait(0)

    @inline_device
    def reg_bias(bias, ca, cb):
        """The bias pairs at columns ``ca`` and ``cb`` (one 32-bit load each)."""
        return runpack(ld_global_b32(bias, ca)), runpack(ld_global_b32(bias, cb))

    @inline_device
    def reg_plain(v0, v1, v2, v3, v4, v5, v6, v7, q, o0, o1, c0, bias, aux, out, act, flags):
        """reg_epilogue's column tiles j = 2q, 2q + 1 (plain): ``v`` their accumulators
        ``acc[8 q ..]``, (j, h, e) in order."""
        ca = c0 + 16 * q
        cb = ca + 8
        v = (v0, v1, v2, v3, v4, v5, v6, v7)
        if flags & F_BIAS:
            ba, bb = reg_bias(bias, ca, cb)
            v = (v0 + ba[0], v1 + ba[1], v2 + ba[0], v3 + ba[1],
                 v4 + bb[0], v5 + bb[1], v6 + bb[0], v7 + bb[1])
        if flags & F_PREACT:
            st_global_b32(aux, o0 + ca, rpack(v[0], v[1]))
            st_global_b32(aux, o1 + ca, rpack(v[2], v[3]))
            st_global_b32(aux, o0 + cb, rpack(v[4], v[5]))
            st_global_b32(aux, o1 + cb, rpack(v[6], v[7]))
        a = ract8(act, v)
        st_global_b32(out, o0 + ca, rpack(a[0], a[1]))
        st_global_b32(out, o1 + ca, rpack(a[2], a[3]))
        st_global_b32(out, o0 + cb, rpack(a[4], a[5]))
        st_global_b32(out, o1 + cb, rpack(a[6], a[7]))

    @inline_device
    def reg_gated(v0, v1, v2, v3, v4, v5, v6, v7, q, o0, o1, c0, bias, aux, out, act, flags):
        """reg_epilogue's column tiles j = 2q, 2q + 1 (F_GATED): the (gate, up) pairs
        (v0, v1), (v2, v3), (v4, v5), (v6, v7)."""
        ca = c0 + 16 * q
        cb = ca + 8
        g = (v0, v2, v4, v6)
        u = (v1, v3, v5, v7)
        if flags & F_BIAS:
            ba, bb = reg_bias(bias, ca, cb)
            g = (v0 + ba[0], v2 + ba[0], v4 + bb[0], v6 + bb[0])
            u = (v1 + ba[1], v3 + ba[1], v5 + bb[1], v7 + bb[1])
        if flags & F_PREACT:
            st_global_b32(aux, 2 * o0 + ca, rpack(g[0], u[0]))
            st_global_b32(aux, 2 * o1 + ca, rpack(g[1], u[1]))
            st_global_b32(aux, 2 * o0 + cb, rpack(g[2], u[2]))
            st_global_b32(aux, 2 * o1 + cb, rpack(g[3], u[3]))
        a = ract4(act, g)
        store(out, o0 + (ca >> 1), a[0] * u[0])
        store(out, o1 + (ca >> 1), a[1] * u[1])
        store(out, o0 + (cb >> 1), a[2] * u[2])
        store(out, o1 + (cb >> 1), a[3] * u[3])

    @inline_device
    def quad_exchange(a0, a1, b0, b1, upper, m):
        """One exchange with lane ^ ``m``: an ``upper`` lane sends (a0, a1) and takes its
        partner's in their place, the other sends (b0, b1) and takes into those."""
        r0 = np.uint32(cuda.shfl_xor_sync(FULL_MASK, np.int32(a0 if upper else b0), m))
        r1 = np.uint32(cuda.shfl_xor_sync(FULL_MASK, np.int32(a1 if upper else b1), m))
        if upper:
            return r0, r1, b0, b1
        return a0, a1, r0, r1

    @inline_device
    def quad_transpose(w0, w1, w2, w3, p):
        """The 4 x 4 transpose of 32-bit words over a quad of lanes (p = lane % 4): lane
        p's word q out is lane q's word p in. Two exchanges of two words each, with
        lane p ^ 1 (words 0 / 1 and 2 / 3 swap across the pair) then lane p ^ 2 (words
        0, 1 / 2, 3)."""
        w0, w2, w1, w3 = quad_exchange(w0, w2, w1, w3, (p & 1) != 0, 1)
        return quad_exchange(w0, w1, w2, w3, (p & 2) != 0, 2)

    @inline_device
    def quad_rows(arr, o0, o1, col, v, p):
        """Store the words of ``v`` (16 values, ``v[4 i + 2 h + e]`` at row h, column
        8 i + 2 p + e of the four column tiles) as one 16-byte chunk a row: after the
        transpose lane p holds columns 8 p .. 8 p + 7, at ``col`` (the tiles' first
        column plus 8 p) of rows ``o0`` / ``o1``."""
        t = quad_transpose(rpack(v[0], v[1]), rpack(v[4], v[5]), rpack(v[8], v[9]),
                           rpack(v[12], v[13]), p)
        st_global_v4(arr, o0 + col, t[0], t[1], t[2], t[3])
        t = quad_transpose(rpack(v[2], v[3]), rpack(v[6], v[7]), rpack(v[10], v[11]),
                           rpack(v[14], v[15]), p)
        st_global_v4(arr, o1 + col, t[0], t[1], t[2], t[3])

    @inline_device
    def quad_bias(v, bias, ca):
        """``v`` (quad_rows' layout) plus the bias pairs of its four column tiles."""
        b0, b1 = reg_bias(bias, ca, ca + 8)
        b2, b3 = reg_bias(bias, ca + 16, ca + 24)
        return (v[0] + b0[0], v[1] + b0[1], v[2] + b0[0], v[3] + b0[1],
                v[4] + b1[0], v[5] + b1[1], v[6] + b1[0], v[7] + b1[1],
                v[8] + b2[0], v[9] + b2[1], v[10] + b2[0], v[11] + b2[1],
                v[12] + b3[0], v[13] + b3[1], v[14] + b3[0], v[15] + b3[1])

    @inline_device
    def quad_plain(v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13, v14, v15, q,
                   o0, o1, n0, p, bias, aux, out, act, flags):
        """v10's column tiles j = 4q .. 4q + 3 (plain; ``v`` their accumulators ``acc[16
        q ..]``): bias, pre-activation and act(v), each row's 32 columns as four
        16-byte chunks, one a lane of the quad."""
        v = (v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13, v14, v15)
        ca = n0 + 32 * q + 2 * p
        if flags & F_BIAS:
            v = quad_bias(v, bias, ca)
        col = n0 + 32 * q + 8 * p
        if flags & F_PREACT:
            quad_rows(aux, o0, o1, col, v, p)
        quad_rows(out, o0, o1, col, ract8(act, v[:8]) + ract8(act, v[8:]), p)

    @inline_device
    def quad_gated(v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13, v14, v15, q,
                   o0, o1, n0, p, bias, aux, out, act, flags):
        """v10's column tiles j = 4q .. 4q + 3 (F_GATED): the (gate, up) pairs (``v[4 i
        + 2 h]``, ``v[4 i + 2 h + 1]``) of tile i, row h. Pre-activation words as
        quad_rows' 16-byte chunks (rows ``2 o0`` / ``2 o1``); ``act(gate) * up`` at
        column (n0 + 32 q + 8 i + 2 p) / 2 of rows o0 / o1: lane p's four, one per
        tile, two rows a word, transposed so lane p holds 4 consecutive columns of
        each row (an 8-byte store each)."""
        v = (v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13, v14, v15)
        if flags & F_BIAS:
            v = quad_bias(v, bias, n0 + 32 * q + 2 * p)
        if flags & F_PREACT:
            quad_rows(aux, 2 * o0, 2 * o1, n0 + 32 * q + 8 * p, v, p)
        a = ract8(act, (v[0], v[2], v[4], v[6], v[8], v[10], v[12], v[14]))
        t = quad_transpose(rpack(a[0] * v[1], a[1] * v[3]), rpack(a[2] * v[5], a[3] * v[7]),
                           rpack(a[4] * v[9], a[5] * v[11]), rpack(a[6] * v[13], a[7] * v[15]),
                           p)
        col = (n0 >> 1) + 16 * q + 4 * p
        st_global_v2(out, o0 + col, (t[0] & LO16) | (t[1] << SH16),
                     (t[2] & LO16) | (t[3] << SH16))
        st_global_v2(out, o1 + col, (t[0] >> SH16) | (t[1] & HI16),
                     (t[2] >> SH16) | (t[3] & HI16))

    if REG:
        gated_all = unrolled_over_acc(reg_gated, BN // 16, 8)
        # The pair form's flags always hold F_GATED (gemm_gated_pair), and with
        # ``pair`` a constant its plain branch folds away: no plain steps compiled.
        plain_all = gated_all if pair else unrolled_over_acc(reg_plain, BN // 16, 8)
    if QUAD:
        quad_gated_all = unrolled_over_acc(quad_gated, BN // 32, 9, width=16)
        quad_plain_all = (quad_gated_all if pair
                          else unrolled_over_acc(quad_plain, BN // 32, 9, width=16))

    @inline_device
    def reg_epilogue(acc, m0, n0, fr, fc, ldc, bias, aux, out, act, flags):
        """epi 3's forward epilogue of a whole tile with 16-byte rows (F_VEC), from this
        thread's accumulators: ``acc[4 j + 2 h + e]`` is row ``m0 + fr + 8 h``, column
        ``c = n0 + fc + 8 j + e`` (wgmma's fragment layout, fc even). Each (j, h) pair
        of columns gets the bias pair (one 32-bit load), then its pre-activation word
        (F_PREACT) and its two outputs act(v) as one 32-bit store each, to
        ``row * ldc + c``; eight values (j = 2q, 2q + 1, both h) under one switch.
        F_GATED: the pair is (gate, up), stored as a pre-activation word at ``row * 2
        ldc + c`` and ``act(gate) * up`` at ``out[row * ldc + c / 2]``; four gates under
        one switch. The same values and roundings as the chunk path's (epi 2). The q
        steps are written out (unrolled_over_acc): a loop over q would index acc
        dynamically, and the accumulators would go to local memory. epi 4 (QUAD):
        the same values in steps of four column tiles, each quad's words transposed
        into 16-byte row chunks (quad_plain / quad_gated)."""
        o0 = (m0 + fr) * ldc
        o1 = o0 + 8 * ldc
        if QUAD:
            if pair or flags & F_GATED:
                quad_gated_all(acc, o0, o1, n0, fc >> 1, bias, aux, out, act, flags)
            else:
                quad_plain_all(acc, o0, o1, n0, fc >> 1, bias, aux, out, act, flags)
            return
        c0 = n0 + fc
        if pair or flags & F_GATED:
            gated_all(acc, o0, o1, c0, bias, aux, out, act, flags)
        else:
            plain_all(acc, o0, o1, c0, bias, aux, out, act, flags)

    @inline_device
    def epilogue_sync():
        """The epilogue's barrier: the whole block, or (warp specialised, the producer
        gone) the consumer threads on named barrier 1."""
        if WS:
            named_barrier_sync(1, NC)
        else:
            cuda.syncthreads()

    @inline_device
    def body(a, b, b2, bias, aux, out, ma, mb, mb2, M, N, K, lda, ldb, ldc, act, flags):
        """The kernel's work; ``b2``: the pair kernel's sixth array, else unused;
        ``ma``, ``mb``, ``mb2``: with ``tma``, the tensor maps of A, B (the pair form:
        b) and the pair form's b2, else unused."""
        smem = cuda.shared.array(0, SDT, alignment=SMEM_ALIGN)
        tid = cuda.threadIdx.x
        wg = tid >> 7
        m0, n0 = _block_tile(cuda.blockIdx.x, M, N, BM, BN, GROUP_M)
        acc = cuda.local.array(NACC, np.float32)
        for i in range(NACC):
            acc[i] = f32(0.0)
        bacc = cuda.local.array(4, np.float32)
        for i in range(4):
            bacc[i] = f32(0.0)
        # Uniform over the block: the ones-wgmma is warpgroup-collective.
        do_bias = WGRAD and (flags & F_BIAS) != 0 and n0 == 0
        if do_bias:
            sm32 = cuda.shared.array(0, U32_DT, alignment=SMEM_ALIGN)
            if tid < 64:
                sm32[ONES_OFF // 2 + tid] = ONES
        KT = (K + BK - 1) // BK
        inside = m0 + BM <= M and n0 + BN <= N
        a_wg = wg * A_WG
        if WS:
            bars = cuda.shared.array(0, U64_DT, alignment=SMEM_ALIGN)
            if tid == 0:
                for s in range(STAGES):
                    # TMA: the one thread's arrival (its bytes complete the phase).
                    mbarrier_init(bars, FULL + s, 1 if TMA else 128)
                    mbarrier_init(bars, EMPTY + s, NC)
            cuda.syncthreads()
            if tid >= NC:
                # Few registers here; the consumers take them (the 64 x bn
                # accumulators: 128 a thread at bn = 256). The producer's path never
                # joins the consumers' code (ptxas holds it to PRODUCER_REGS).
                setmaxnreg_dec(PRODUCER_REGS)
                if TMA:
                    tma_produce(smem, bars, ma, mb, mb2, m0, n0, tid - NC, KT)
                else:
                    ws_produce(smem, bars, a, b, b2, M, N, K, lda, ldb, m0, n0, tid - NC, KT,
                               inside)
                return
            setmaxnreg_inc(CONSUMER_REGS)
            ws_consume(smem, bars, acc, bacc, a_wg, KT, do_bias)
        else:
            mainloop(smem, acc, bacc, a, b, b2, M, N, K, lda, ldb, m0, n0, tid, a_wg, KT,
                     inside, do_bias)
        lane = tid & 31
        # Consumer threads hold accumulators (all threads unless warp specialised).
        mma_thread = tid < NC
        if do_bias and (lane & 3) == 0 and mma_thread:
            for h in range(2):
                row = m0 + wg * 64 + ((tid >> 5) & 3) * 16 + (lane >> 2) + 8 * h
                if row < M:
                    store(bias, row, bacc[2 * h])

        if REG and inside and (flags & F_VEC) != 0:
            # Uniform over the block: no thread reaches the barriers below.
            if mma_thread:
                reg_epilogue(acc, m0, n0, wg * 64 + ((tid >> 5) & 3) * 16 + (lane >> 2),
                             (lane & 3) * 2, ldc, bias, aux, out, act, flags)
            return
        # Epilogue as make_tc_kernel's: the accumulators to a float32 [BM][CLD] tile
        # in the ring's memory, then 8 consecutive columns per thread and step.
        epilogue_sync()
        cs = cuda.shared.array(0, F32_DT, alignment=SMEM_ALIGN)
        fr = wg * 64 + ((tid >> 5) & 3) * 16 + (lane >> 2)
        fc = (lane & 3) * 2
        if mma_thread and LEAN and not TMA_PAIR:
            # One unsigned base, compile-time offsets: no wrap-around, no per-store
            # 64-bit address sum.
            cb = np.uint32(fr * CLD + fc)
            for j in range(BN // 8):
                for h in range(2):
                    ci = cb + np.uint32(8 * h * CLD + 8 * j)
                    cs[ci] = acc[4 * j + 2 * h]
                    cs[ci + U1] = acc[4 * j + 2 * h + 1]
        elif mma_thread:
            for j in range(BN // 8):
                for h in range(2):
                    c = fc + 8 * j
                    if not TMA_PAIR:
                        ci = (fr + 8 * h) * CLD + c
                        cs[ci] = acc[4 * j + 2 * h]
                        cs[ci + 1] = acc[4 * j + 2 * h + 1]
                    else:
                        # Columns c, c + 1 of one half: interleaved 2 c (+ 1 in b2's
                        # half) and two further on.
                        if 8 * j < BN // 2:
                            ci = (fr + 8 * h) * CLD + 2 * c
                        else:
                            ci = (fr + 8 * h) * CLD + 2 * (c - BN // 2) + 1
                        cs[ci] = acc[4 * j + 2 * h]
                        cs[ci + 2] = acc[4 * j + 2 * h + 1]
        epilogue_sync()
        pre = False
        bw = ZERO4
        if HOIST:
            colh = n0 + (tid % CCH) * 8
            if ((flags & F_BIAS) != 0 and (flags & F_VEC) != 0 and (flags & F_GATED) == 0
                    and colh + 8 <= N):
                bw = ld_global_v4(bias, colh)
                pre = True
        if LEAN_LOOP:
            # A thread's chunks share one column (NC a multiple of CCH), its row
            # advancing by NC / CCH: unsigned 32-bit row and shared index.
            tr = np.uint32(tid) // np.uint32(CCH)
            c8 = (np.uint32(tid) % np.uint32(CCH)) * U8
            col = n0 + c8
            for it in range(EPI_ITERS):
                r = tr + np.uint32(it * (NC // CCH))
                row = m0 + r
                ci = np.uint32(r * np.uint32(CLD) + c8)
                if r < BM and row < M and col < N:
                    if pre:
                        chunk_pre(cs, ci, row, col, ldc, bw, aux, out, act, flags)
                    else:
                        put(cs, ci, row, col, N, ldc, bias, aux, out, b2, act, flags)
            return
        for it in range(EPI_ITERS):
            e = tid + it * NC
            r = e // CCH
            c8 = (e % CCH) * 8
            row = m0 + r
            col = n0 + c8
            if r < BM and row < M and col < N:
                if pre:
                    chunk_pre(cs, r * CLD + c8, row, col, ldc, bw, aux, out, act, flags)
                else:
                    put(cs, r * CLD + c8, row, col, N, ldc, bias, aux, out, b2, act, flags)

    def kernel(a, b, bias, aux, out, M, N, K, lda, ldb, ldc, act, flags):
        """:func:`make_tc_kernel`'s role (fwd: C = A B^T, preact = C + bias, out =
        act(preact); dgrad: out = C * act'(aux), C = A B with B ``b[k * ldb + n]``;
        wgrad: out = C, C = A B with A ``a[k * lda + m]``, grad_bias[m] = sum_k A[m, k])
        with the k-loop on wgmma; arguments as there."""
        body(a, b, b, bias, aux, out, a, a, a, M, N, K, lda, ldb, ldc, act, flags)

    def pair_kernel(a, b, bias, aux, out, b2, M, N, K, lda, ldb, ldc, act, flags):
        """The kernel with :func:`make_tc_kernel`'s ``pair`` sixth array ``b2``."""
        body(a, b, b2, bias, aux, out, a, a, a, M, N, K, lda, ldb, ldc, act, flags)

    def tma_kernel(a, b, bias, aux, out, ma, mb, M, N, K, lda, ldb, ldc, act, flags):
        """The forward with ``tma``: ``ma`` / ``mb`` the tensor maps (16 int64 words
        each, :func:`_tma_maps`) of A ``[M, K]`` (boxes bm x bk) and B ``[N, K]`` (bn x
        bk); ``a`` and ``b`` themselves are not read."""
        body(a, b, b, bias, aux, out, ma, mb, mb, M, N, K, lda, ldb, ldc, act, flags)

    def tma_pair_kernel(a, b, bias, aux, out, b2, ma, mb, mb2, M, N, K, lda, ldb, ldc, act,
                        flags):
        """The pair forward with ``tma``: ``mb`` / ``mb2`` the maps of ``b`` and ``b2``
        ``[N / 2, K]`` (boxes bn / 2 x bk), ``ma`` A's; the arrays are not read."""
        body(a, b, b2, bias, aux, out, ma, mb, mb2, M, N, K, lda, ldb, ldc, act, flags)

    name = (f"linear_{role}_{dtype}_wgmma_{BM}x{BN}x{BK}_s{STAGES}"
            + (f"_f{INFLIGHT}" if INFLIGHT else "") + (f"_sw{SW}" if SW else "")
            + ("_ws" if WS else "") + ("_pf" if PFENCE else "") + ("_hb" if HOIST else "")
            + ("_tma" if TMA else "") + (f"_e{EPI}" if EPI else "") + ("_pair" if pair else ""))
    # Warp specialised: 384 threads share one SM's registers (up to 168 each). The
    # pair kernels of the others keep the plain kernels' two blocks an SM (ptxas gave
    # the fwd tiling's pair kernel 168 registers for a few more live values, one block).
    opts = {}
    if WS and not SIMULATOR:
        opts = {"launch_bounds": (NT, 1)}
    elif pair and not SIMULATOR and NT <= 256:
        opts = {"launch_bounds": (NT, 2)}
    if TMA:
        return Kernel(name, tma_pair_kernel if pair else tma_kernel, _tma_argtypes(dtype, pair),
                      **opts)
    return Kernel(name, pair_kernel if pair else kernel, _argtypes(dtype, pair), **opts)


def _tma_argtypes(dtype, pair=False):
    """The TMA forward's: the plain (pair) kernel's five (six) arrays, the tensor maps
    (int64 arrays of 16 words: A's and B's, the pair form's b's and b2's), the plain
    eight integers."""
    narr = 6 if pair else 5
    maps = (types.Array(types.int64, 1, "C"),) * (narr - 3)
    return _argtypes(dtype, pair)[:narr] + maps + (_I64,) * 8


def _tma_maps(flat, Mg, Ng, Kg, lda, ldb, cfg, stream, pair, ex):
    """The tensor maps (KernelArrays) of a TMA forward's A (``flat[0]``, ``[Mg, Kg]``
    with row stride lda; boxes bm x bk) and B (``flat[1]``, ``[Ng, Kg]``, ldb; bn x
    bk; the pair form: b ``flat[1]`` and b2 ``flat[5]``, ``[Ng / 2, Kg]`` each, boxes
    bn / 2 x bk), 128-byte swizzled, for launches on ``stream``: cached by what they
    encode and the stream (a miss costs an encode and a one-thread launch on the
    stream, no host sync; a weight's map is made once a stream). Through ``ex``: a
    plan makes or looks them up from each replay's pointers."""
    ops = [(flat[0], Mg, lda, cfg.bm)]
    if pair:
        ops += [(flat[1], Ng // 2, ldb, cfg.bn // 2), (flat[5], Ng // 2, ldb, cfg.bn // 2)]
    else:
        ops += [(flat[1], Ng, ldb, cfg.bn)]
    maps = []
    for arr, rows, ld, box in ops:
        src = tma.view_2d(arr, rows, Kg, ld)
        tma.check_map_2d(src, box, cfg.bk, 128)
        make = functools.partial(_tma_map_of, box=box, bk=cfg.bk)
        maps.append(ex.derived(src, make, (16,), "int64", stream))
    return maps


def _tma_map_of(src, stream, box, bk):
    """A TMA forward operand's map (:func:`_tma_maps`): boxes ``box x bk``, 128-byte
    swizzle, written on ``stream``."""
    return tma.cached_map_2d(src, box, bk, 128, stream)


# ---------------------------------------------------------------------------
# CUDA-core float32 GEMM
# ---------------------------------------------------------------------------


def _simt_stager(R, BK, NT, LD_S, KMAJOR):
    """Device function ``stage(src, ld, r0, rows, k0, K, dst, tid)``: the float32
    GEMM's operand tile of ``R`` rows (``r0`` ..) by ``BK`` k's (``k0`` ..) from
    ``src`` (``ld`` apart: k-major rows, or k-lines of the rows when not ``KMAJOR``) into
    shared ``dst`` as ``dst[k * LD_S + r]``, zeros past ``rows`` and ``K``; ``NT``
    threads, ``tid``'s elements ``tid + i NT`` in the source's order (coalesced)."""
    ITERS = cdiv(R * BK, NT)
    f32 = np.float32

    @inline_device
    def stage(src, ld, r0, rows, k0, K, dst, tid):
        for i in range(ITERS):
            e = tid + i * NT
            if e < R * BK:
                v = f32(0.0)
                if KMAJOR:
                    r = e // BK
                    c = e % BK
                    if r0 + r < rows and k0 + c < K:
                        v = src[(r0 + r) * ld + k0 + c]
                else:
                    c = e // R
                    r = e % R
                    if k0 + c < K and r0 + r < rows:
                        v = src[(k0 + c) * ld + r0 + r]
                dst[c * LD_S + r] = v

    return stage


@functools.lru_cache(maxsize=None)
def make_simt_kernel(role, cfg):
    """float32 CUDA-core GEMM kernel for ``role``; same arguments and epilogues as
    :func:`make_tc_kernel`. Launch: 1-D grid of ``cdiv(Mg, bm) * cdiv(Ng, bn)`` blocks
    of ``cfg.threads``, no dynamic shared memory."""
    if role not in ROLES:
        raise ValueError(f"no kernel for role={role!r}")
    BM, BN, BK, TM, TN, GROUP_M = cfg
    TX = BN // TN
    NT = cfg.threads
    A_KMAJOR = role != "wgrad"
    B_KMAJOR = role == "fwd"
    WGRAD = role == "wgrad"
    # Rows padded by one float: the transposing stores of k-major operands then hit
    # distinct banks.
    LDA_S = BM + 1
    LDB_S = BN + 1
    chunk = _chunk_epilogue(role, "float32")
    NACC = TM * TN
    CLD = BN + 1
    CCH = BN // 8
    CTOT = BM * CCH
    AS_SIZE = BK * LDA_S
    BS_SIZE = BK * LDB_S
    CS_SIZE = BM * CLD
    EPI_ITERS = cdiv(CTOT, NT)
    f32 = np.float32
    MID_TILES = 16
    stage_a = _simt_stager(BM, BK, NT, LDA_S, A_KMAJOR)
    stage_b = _simt_stager(BN, BK, NT, LDB_S, B_KMAJOR)

    def kernel(a, b, bias, aux, out, M, N, K, lda, ldb, ldc, act, flags):
        """As :func:`make_tc_kernel`'s kernel, on float32 with FMA (thread ``(tx, ty)``
        owns rows ``m0 + ty + i * BM/TM`` and columns ``n0 + tx + j * BN/TN``)."""
        As = cuda.shared.array(AS_SIZE, np.float32)
        Bs = cuda.shared.array(BS_SIZE, np.float32)
        Cs = cuda.shared.array(CS_SIZE, np.float32)
        tid = cuda.threadIdx.x
        tx = tid % TX
        ty = tid // TX
        m0, n0 = _block_tile(cuda.blockIdx.x, M, N, BM, BN, GROUP_M)
        acc = cuda.local.array(NACC, np.float32)
        for i in range(NACC):
            acc[i] = f32(0.0)
        # Three-level accumulation: each k-tile's BK products are summed on their own
        # (part), MID_TILES such sums in mid, and those in acc, so no float32 running
        # sum has more than max(BK, MID_TILES) terms. One running sum over all of K had
        # 3-4x cuBLAS's error at K = 4096 on the H200; two levels still 3x for M = 1.
        part = cuda.local.array(NACC, np.float32)
        mid = cuda.local.array(NACC, np.float32)
        for i in range(NACC):
            mid[i] = f32(0.0)
        tiles = 0
        bsum = cuda.local.array(TM, np.float32)
        for i in range(TM):
            bsum[i] = f32(0.0)
        ar = cuda.local.array(TM, np.float32)
        br = cuda.local.array(TN, np.float32)
        do_bias = WGRAD and (flags & F_BIAS) != 0 and n0 == 0 and tx == 0
        for k0 in range(0, K, BK):
            stage_a(a, lda, m0, M, k0, K, As, tid)
            stage_b(b, ldb, n0, N, k0, K, Bs, tid)
            cuda.syncthreads()
            for i in range(NACC):
                part[i] = f32(0.0)
            for kk in range(BK):
                for i in range(TM):
                    ar[i] = As[kk * LDA_S + ty + i * (BM // TM)]
                for j in range(TN):
                    br[j] = Bs[kk * LDB_S + tx + j * TX]
                for i in range(TM):
                    for j in range(TN):
                        part[i * TN + j] += ar[i] * br[j]
                if WGRAD:
                    if do_bias:
                        for i in range(TM):
                            bsum[i] += ar[i]
            for i in range(NACC):
                mid[i] += part[i]
            tiles += 1
            if tiles == MID_TILES:
                for i in range(NACC):
                    acc[i] += mid[i]
                    mid[i] = f32(0.0)
                tiles = 0
            cuda.syncthreads()
        for i in range(NACC):
            acc[i] += mid[i]
        if WGRAD:
            if do_bias:
                for i in range(TM):
                    row = m0 + ty + i * (BM // TM)
                    if row < M:
                        bias[row] = bsum[i]
        # Stage C through shared memory, as the tensor-core kernel does, so the
        # epilogue code is shared.
        for i in range(TM):
            for j in range(TN):
                Cs[(ty + i * (BM // TM)) * CLD + tx + j * TX] = acc[i * TN + j]
        cuda.syncthreads()
        for it in range(EPI_ITERS):
            e = tid + it * NT
            r = e // CCH
            c8 = (e % CCH) * 8
            row = m0 + r
            col = n0 + c8
            if e < CTOT and row < M and col < N:
                chunk(Cs, r * CLD + c8, row, col, N, ldc, bias, aux, out, act, flags)

    name = f"linear_{role}_float32_simt_{BM}x{BN}x{BK}_t{TM}x{TN}"
    return Kernel(name, kernel, _argtypes("float32"))


# ---------------------------------------------------------------------------
# grad_z = grad_out * act'(preact), elementwise
# ---------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def make_act_grad_kernel(dtype, vec, threads=ACT_GRAD_THREADS):
    """Kernel ``(g, pre, out, n, act)``: ``out[i] = g[i] * act'(pre[i])`` for the ``n``
    elements of flat arrays. ``vec``: thread ``i`` handles the 16 bytes at element
    ``i * P`` (P = 16 / itemsize; 16-byte aligned arrays) and threads also cover the
    ``n % P`` tail; else one element per thread. Grid: ``cdiv(n // P + 1, threads)``
    (vec) or ``cdiv(n, threads)``."""
    load = dtypes.loader(dtype)
    store = dtypes.storer(dtype)
    per = 4 if dtype == "float32" else 8
    if dtype == "float32":
        @inline_device
        def word(gw, pw, act):
            return f32_as_u32(u32_as_f32(gw) * act_grad_by_code(act, u32_as_f32(pw)))
    else:
        pack, unpack = half_packers(dtype)

        @inline_device
        def word(gw, pw, act):
            g2 = unpack(gw)
            z2 = unpack(pw)
            return pack(g2[0] * act_grad_by_code(act, z2[0]), g2[1] * act_grad_by_code(act, z2[1]))

    def kernel(g, pre, out, n, act):
        """out = g * act'(pre) elementwise over n elements (flat, same layout)."""
        i = cuda.grid(1)
        if vec:
            nv = n // per
            if i < nv:
                u = ld_global_v4(g, i * per)
                p = ld_global_v4(pre, i * per)
                st_global_v4(out, i * per, word(u[0], p[0], act), word(u[1], p[1], act),
                             word(u[2], p[2], act), word(u[3], p[3], act))
            j = nv * per + i
            if j < n:
                store(out, j, load(g, j) * act_grad_by_code(act, load(pre, j)))
        elif i < n:
            store(out, i, load(g, i) * act_grad_by_code(act, load(pre, i)))

    arr = _storage(dtype)
    return Kernel(f"linear_act_grad_{dtype}_{'vec' if vec else 'scalar'}", kernel,
                  (arr, arr, arr, _I64, _I64))


RESTRIDE_PER_THREAD = 8
# 128 threads x 8 columns: a block spans 1024 columns, so K = 1023-wide rows keep every
# thread busy and an SM 16 blocks of 2-byte loads in flight (256-thread blocks left
# half their threads idle there: 10-15 us for an 8 MB weight on the H200).
RESTRIDE_THREADS = 128


@functools.lru_cache(maxsize=None)
def make_restride_kernel(dtype, fuse_act=False):
    """Kernel ``(src, pre, dst, rows, cols, lds, ldd, act)``: for ``r < rows``,
    ``dst[r * ldd + c] = src[r * lds + c]`` for ``c < cols`` and 0 for ``cols <= c <
    ldd``: a GEMM operand copied to rows that start 16-byte aligned (``ldd`` a multiple
    of 8 elements), the padding zeroed; raw element copies (bit for bit). With
    ``fuse_act`` the copied value is ``src * act'(pre)`` (``pre`` laid out as ``src``;
    activation code ``act``), rounded once as :func:`make_act_grad_kernel` rounds it;
    without, ``pre`` and ``act`` are unused.

    Grid ``(cdiv(ldd, threads * RESTRIDE_PER_THREAD), min(rows, 65535))`` of 1-D
    blocks (``RESTRIDE_THREADS`` threads in the launcher; any count works): block
    (x, y) covers a span of ``threads * RESTRIDE_PER_THREAD`` columns of rows y,
    y + gridDim.y, ...; each thread takes every ``threads``-th column of it, so each
    warp-wide access is contiguous (no index division: the first version divided by
    ldd per element, 12-16 us for an 8 MB weight on the H200)."""
    load = dtypes.loader(dtype)
    store = dtypes.storer(dtype)
    per = RESTRIDE_PER_THREAD
    elem = dtypes.numba_storage_type(dtype)

    def kernel(src, pre, dst, rows, cols, lds, ldd, act):
        """dst [rows, ldd] <- src [rows, cols] (row stride lds), zero padded."""
        c0 = cuda.blockIdx.x * (cuda.blockDim.x * per) + cuda.threadIdx.x
        # A thread's loads all issue before any arithmetic or store: interleaved, each
        # store (which may alias the next load, for all the compiler knows) or the
        # activation's branches waited for the load before it, a memory round trip
        # per element (2-3x the copy's time).
        gw = cuda.local.array(per, elem)
        pw = cuda.local.array(per, elem)
        for r in range(cuda.blockIdx.y, rows, cuda.gridDim.y):
            s = r * lds
            d = r * ldd
            for j in range(per):
                c = c0 + j * cuda.blockDim.x
                gw[j] = 0
                pw[j] = 0
                if c < cols:
                    gw[j] = src[s + c]
                    if fuse_act:
                        pw[j] = pre[s + c]
            for j in range(per):
                c = c0 + j * cuda.blockDim.x
                if fuse_act and c < cols:
                    store(dst, d + c, load(gw, j) * act_grad_by_code(act, load(pw, j)))
                elif c < ldd:
                    dst[d + c] = gw[j]

    arr = _storage(dtype)
    name = f"linear_restride_{dtype}" + ("_act" if fuse_act else "")
    return Kernel(name, kernel, (arr, arr, arr, _I64, _I64, _I64, _I64, _I64))


# ---------------------------------------------------------------------------
# Launch
# ---------------------------------------------------------------------------


def _pick_config(Mg, Ng, device=None):
    """Tensor-core tiling for an ``Mg x Ng`` output: the large tiles when they fill
    every SM of ``device`` (None: the current one) at least twice, else the small
    ones; the simulator's tiny ones there."""
    if SIMULATOR:
        return TC_SIM
    tiles = cdiv(Mg, TC_LARGE.bm) * cdiv(Ng, TC_LARGE.bn)
    return TC_LARGE if tiles >= 2 * sm_count(device) else TC_SMALL


def _address(arr):
    if arr.ptr is not None:
        return int(arr.ptr)
    return int(arr.host.__array_interface__["data"][0])


def _flat(arr):
    return arr.reshape((arr.size,))


# Whether GEMMs run on wgmma (sm_90 only; see use_wgmma): None picks by size.
_WGMMA = [None]


@contextlib.contextmanager
def use_wgmma(enabled=True):
    """While active, choose how the GEMMs (forward, dgrad, wgrad) run on sm_90
    devices: True, every float16 / bfloat16 GEMM with 16-byte aligned rows on Hopper's
    warpgroup MMA (:func:`make_wgmma_kernel`); False, every one on ``mma.sync``;
    None, the default: wgmma where the output has at least
    :data:`WG_MIN_TILES_PER_SM` 128x128 tiles per SM and more than
    :data:`WG_MAX_SKINNY_ROWS` rows, on the role's tiling
    (:data:`WG_ROLE`, or :data:`WG_LARGE` where set). Other GPUs, float32 and
    unaligned rows always take the ``mma.sync`` / SIMT kernels."""
    saved = _WGMMA[0]
    _WGMMA[0] = None if enabled is None else bool(enabled)
    try:
        yield
    finally:
        _WGMMA[0] = saved


@functools.lru_cache(maxsize=None)
def _hopper(device):
    """Whether CUDA device ``device`` (an ordinal) is sm_90 (wgmma's target)."""
    return cuda.gpus[device].compute_capability[0] == 9


def _role_tiling(role, Kg):
    """The wgmma tiling of ``role`` with reduction length ``Kg``: :data:`WG_LARGE` where
    set, else :data:`WG_ROLE`'s (the forward by K, see :data:`WG_FWD_LONG_K`)."""
    if WG_LARGE is not None:
        return WG_LARGE
    if role == "fwd" and Kg >= WG_FWD_LONG_K:
        role = "fwd_long_k"
    return WG_ROLE[role]


def wgmma_auto(role, Mg, Ng, sms, Kg=0):
    """The default's wgmma tiling for a GEMM with an ``Mg x Ng`` output and reduction
    length ``Kg`` on a Hopper GPU of ``sms`` multiprocessors, or None (``mma.sync``):
    see :func:`use_wgmma`."""
    if Mg <= WG_MAX_SKINNY_ROWS or cdiv(Mg, 128) * cdiv(Ng, 128) < WG_MIN_TILES_PER_SM * sms:
        return None
    return _role_tiling(role, Kg)


# How many ways forward GEMMs split K (see use_split_k): None picks by size.
_SPLIT_K = [None]


@contextlib.contextmanager
def use_split_k(splits=None):
    """While active, split the k-tiles of every forward GEMM on ``mma.sync`` with
    16-byte aligned rows ``splits`` ways (at most one part a k-tile; 1: never split);
    None, the default: :func:`split_k_auto`'s choice on a GPU where
    :data:`SPLITK_BY_DEFAULT` is set, else no split (always in the simulator)."""
    if splits is not None and (isinstance(splits, bool) or not isinstance(splits, int)
                               or splits < 1):
        raise ValueError(f"use_split_k: splits must be a positive int or None, got {splits!r}")
    saved = _SPLIT_K[0]
    _SPLIT_K[0] = splits
    try:
        yield
    finally:
        _SPLIT_K[0] = saved


def split_k_auto(Mg, Ng, Kg, cfg, sms):
    """The default number of k-splits of a forward GEMM with an ``Mg x Ng`` output and
    reduction length ``Kg`` on tiling ``cfg`` and a GPU of ``sms`` multiprocessors
    (1: none); see :data:`SPLITK_MAX_ROWS`."""
    tiles = cdiv(Mg, cfg.bm) * cdiv(Ng, cfg.bn)
    if Mg > SPLITK_MAX_ROWS or tiles >= sms:
        return 1
    ways = min(SPLITK_MAX, cdiv(SPLITK_BLOCKS_PER_SM * sms, tiles),
               cdiv(Kg, cfg.bk) // SPLITK_MIN_KTILES)
    return max(1, ways)


# Whether forwards with a few output rows take make_skinny_kernel (see use_skinny):
# None picks by size.
_SKINNY = [None]


@contextlib.contextmanager
def use_skinny(enabled=True):
    """While active, choose how forward GEMMs of at most :data:`SKINNY_MAX_ROWS` output
    rows (float16 / bfloat16, 16-byte aligned x and weight rows, K a multiple of 8)
    run: True, every one on the few-row kernel (:func:`make_skinny_kernel`); False,
    none; None, the default: :func:`skinny_auto`'s choice on a GPU where
    :data:`SKINNY_BY_DEFAULT` is set, else none (always in the simulator). Forced
    here, it takes precedence over :func:`use_split_k`; the default yields to a split
    forced there."""
    saved = _SKINNY[0]
    _SKINNY[0] = None if enabled is None else bool(enabled)
    try:
        yield
    finally:
        _SKINNY[0] = saved


def skinny_auto(Mg, Ng, sms, cfg=None):
    """Whether the default runs a forward with an ``Mg x Ng`` output on the few-row
    kernel (layout ``cfg``, :data:`SKINNY_DEFAULT` for None) on a GPU of ``sms``
    multiprocessors: at most :data:`SKINNY_AUTO_ROWS` rows and at least one block
    per multiprocessor."""
    cfg = SKINNY_DEFAULT if cfg is None else cfg
    return Mg <= SKINNY_AUTO_ROWS and cdiv(Ng, cfg.cols) >= sms


def _skinny_for(role, dtype, vec_ab, device, Mg, Ng, Kg):
    """The :class:`SkinnyConfig` this GEMM runs with on the few-row kernel
    (SKINNY_SIM / SKINNY_DEFAULT, read per call so tests and benchmarks can patch
    them), or None: a forward of at most SKINNY_MAX_ROWS rows, 16-bit with 16-byte
    rows (``vec_ab``) and K a multiple of 8, where :func:`use_skinny` or the default
    takes it (the default not while :func:`use_split_k` forces a split)."""
    mode = _SKINNY[0]
    if (mode is False or role != "fwd" or dtype == "float32" or not vec_ab or Kg % 8
            or Mg > SKINNY_MAX_ROWS):
        return None
    if mode:
        return SKINNY_SIM if SIMULATOR else SKINNY_DEFAULT
    if SIMULATOR or not SKINNY_BY_DEFAULT or (_SPLIT_K[0] or 1) > 1:
        return None  # the rule yields to a split forced by use_split_k
    return SKINNY_DEFAULT if skinny_auto(Mg, Ng, sm_count(device)) else None


def _kernel_choice(role, dtype, vec_ab, device, Mg, Ng, Kg, wg):
    """(skinny, splits) of a GEMM not on wgmma (``wg`` None) or on it: the few-row
    layout (:func:`_skinny_for`) or None, and how many ways its kernel splits K (the
    few-row layout's ``splits``, the tiled kernel's choice; 1 on wgmma)."""
    skinny = None if wg is not None else _skinny_for(role, dtype, vec_ab, device, Mg, Ng, Kg)
    if skinny is not None:
        return skinny, skinny.splits
    return None, _tiled_splits(role, dtype, vec_ab, device, Mg, Ng, Kg, wg)


def _splits_for(role, dtype, vec_ab, device, Mg, Ng, Kg, wg):
    """How many ways this GEMM splits K (1: the plain kernel): forwards on mma.sync
    with 16-byte tile loads only (the tiled kernel's rule, or the few-row layout's
    ``splits``)."""
    return _kernel_choice(role, dtype, vec_ab, device, Mg, Ng, Kg, wg)[1]


def _tiled_splits(role, dtype, vec_ab, device, Mg, Ng, Kg, wg):
    """:func:`_splits_for` of a GEMM the few-row kernel does not take."""
    forced = _SPLIT_K[0]
    if role != "fwd" or wg is not None or dtype == "float32" or not vec_ab:
        return 1
    if forced is None and (SIMULATOR or not SPLITK_BY_DEFAULT):
        return 1  # the common case: no tiling lookup on the launch path
    cfg = _pick_config(Mg, Ng, device)
    if forced is not None:
        return max(1, min(forced, cdiv(Kg, cfg.bk)))
    return split_k_auto(Mg, Ng, Kg, cfg, sm_count(device))


def _wgmma_for(role, dtype, vec_ab, device, Mg, Ng, Kg):
    """The :class:`WgmmaConfig` this GEMM runs with on wgmma (WG_SIM / WG_LARGE /
    WG_ROLE, read per call so tests and benchmarks can patch them), or None for
    mma.sync. The simulator runs wgmma only when forced (use_wgmma(True))."""
    mode = _WGMMA[0]
    if mode is False or not (vec_ab and dtype in ("float16", "bfloat16")):
        return None
    if SIMULATOR:
        return WG_SIM if mode else None
    ordinal = cuda.get_current_device().id if device is None else device
    if not _hopper(ordinal):
        return None
    if mode:
        return _role_tiling(role, Kg)
    return wgmma_auto(role, Mg, Ng, sm_count(ordinal), Kg)


def _gemm_setup(role, dtype, Mg, Ng, vec_ab, device=None, wgmma=None, pair=False, splits=1,
                skinny=None):
    """(kernel, grid, block, shared bytes) of one GEMM; the tiling is ``_pick_config``'s
    (tests and benchmarks patch it), or ``wgmma`` (a WgmmaConfig) on warpgroup MMA;
    ``pair``: the kernel taking a gated unit's two weights (or their gradients) in
    place, a sixth array (see :func:`make_tc_kernel`; 16-bit only); ``splits`` > 1:
    the tensor-core kernel's split-K form, ``splits`` blocks a tile; ``skinny`` (a
    SkinnyConfig): the few-row forward (``splits`` blocks a column block)."""
    if skinny is not None:
        kernel = make_skinny_kernel(dtype, skinny, cdiv(Mg, 8), pair)
        return kernel, (cdiv(Ng, skinny.cols) * splits,), (skinny.threads,), 0
    if wgmma is not None:
        cfg = wgmma
        kernel = make_wgmma_kernel(role, dtype, cfg, pair)
        shared = cfg.smem_bytes
    elif dtype == "float32":
        cfg = SIMT_SIM if SIMULATOR else SIMT_DEFAULT
        kernel = make_simt_kernel(role, cfg)
        shared = 0
    else:
        cfg = _pick_config(Mg, Ng, device)
        kernel = make_tc_kernel(role, dtype, vec_ab, cfg, pair=pair, split=splits > 1)
        shared = cfg.smem_bytes
    return kernel, (cdiv(Mg, cfg.bm) * cdiv(Ng, cfg.bn) * splits,), (cfg.threads,), shared


def _template(dtype, size):
    """A flat array argument of ``size`` elements with no memory yet (a prepared
    launch's template: every ABI field but the data pointer)."""
    return KernelArray(None, None, dtype, (size,), (1,), 0)


@functools.lru_cache(maxsize=512)
def _gemm_prepared(role, dtype, Mg, Ng, Kg, lda, ldb, ldc, act, flags, vec_ab, sizes, device,
                   wgmma=None, pair=False, splits=1, skinny=None):
    """The cached :class:`~numba_fused.launch.PreparedLaunch` of one GEMM on CUDA device
    ``device``; ``sizes``: element counts of the array arguments (a, b, bias, aux, out,
    with ``pair`` b2), then with ``splits`` > 1 those of the workspace and the
    counters, or with a TMA tiling those of the two tensor maps; ``skinny``: the
    few-row forward's layout (see :func:`_gemm_setup`)."""
    kernel, grid, block, shared = _gemm_setup(role, dtype, Mg, Ng, vec_ab, device, wgmma, pair,
                                              splits, skinny)
    narr = 6 if pair else 5
    args = [_template(dtype, n) for n in sizes[:narr]]
    if wgmma is not None and wgmma.tma:
        args += [_template("int64", n) for n in sizes[narr:narr + narr - 3]]
    if splits > 1:
        args += [_template("float32", sizes[narr]), _template("uint32", sizes[narr + 1])]
    args += [Mg, Ng, Kg, lda, ldb, ldc, act, flags] + ([splits] if splits > 1 else [])
    return kernel.prepare(grid, block, shared, args, device=device)


def _vec_flags(role, dtype, ldc, act, flags, out_ok, aux_ok, bias_ok):
    """``flags`` plus F_VEC when the epilogue's rows (out, and aux / bias where the
    role writes or reads them) are 16-byte aligned; ``*_ok``: whether each array's
    start is."""
    if dtype == "float32" or ldc % 8 or not out_ok:
        return flags
    if (role == "fwd" and flags & F_PREACT or role == "dgrad" and act != 0) and not aux_ok:
        return flags
    if role == "fwd" and flags & F_BIAS and not bias_ok:
        return flags
    return flags | F_VEC


def _vec_ab(dtype, a_ok, b_ok, lda, ldb):
    """Whether the A and B tiles can be loaded with 16-byte cp.async: every row of
    both starts 16-byte aligned (``*_ok``: the arrays' starts are)."""
    return dtype != "float32" and a_ok and b_ok and (lda * 2) % 16 == 0 and (ldb * 2) % 16 == 0


# A 16-bit GEMM whose A or B rows do not all start 16-byte aligned (K = 1023, an
# offset view) loads element by element on mma.sync. From this many multiply-adds it
# copies such an operand to aligned rows first (make_restride_kernel: one read and one
# write of the operand) and runs the 16-byte loads, on wgmma where its rule takes it.
RESTRIDE_MIN_MACS = 1 << 24


def _operand_extent(role, which, Mg, Ng, Kg):
    """(rows, cols) of GEMM operand ``which`` ('a' or 'b') of ``role``: fwd A = x
    [Mg, Kg], B = weight [Ng, Kg]; dgrad A = grad_z [Mg, Kg], B = weight [Kg, Ng];
    wgrad A = grad_z [Kg, Mg], B = x [Kg, Ng]."""
    if which == "a":
        return (Kg, Mg) if role == "wgrad" else (Mg, Kg)
    return (Ng, Kg) if role == "fwd" else (Kg, Ng)


def _restrided(dtype, g, rows, cols, ld, stream, ex, pre=None, act=0):
    """(copy, its row stride): operand ``g`` (``rows`` rows of ``cols`` elements, row
    stride ``ld``) in a new array whose rows start 16-byte aligned; with ``pre`` (laid
    out as g) the copy holds ``g * act'(pre)`` for activation code ``act``."""
    ldd = cdiv(cols, 8) * 8
    dst = ex.alloc(g, (rows * ldd,), dtype)
    threads = RESTRIDE_THREADS
    grid = (cdiv(ldd, threads * RESTRIDE_PER_THREAD), min(rows, 65535))
    ex.launch(make_restride_kernel(dtype, pre is not None), grid, (threads,), stream,
              [g, g if pre is None else pre, dst, rows, cols, ld, ldd, act])
    return dst, ldd


def _restrides(dtype, vec_ab, macs):
    """Whether a GEMM of ``macs`` multiply-adds whose A / B rows are (``vec_ab``) or
    are not all 16-byte aligned first copies the unaligned ones to aligned rows."""
    return not vec_ab and dtype != "float32" and macs > 0 and macs >= RESTRIDE_MIN_MACS


def _aligned_rows(arr, ld):
    """Whether every row of 16-bit ``arr`` (row stride ``ld``) starts 16-byte aligned."""
    return _address(arr) % 16 == 0 and ld % 8 == 0


def _gemm(role, dtype, a, b, bias, aux, out, Mg, Ng, Kg, lda, ldb, ldc, act, flags, stream,
          ex=NOW):
    """Launch one GEMM (arguments as the kernels take them; arrays as KernelArrays).
    16-bit A / B with rows not 16-byte aligned are first copied to aligned rows where
    the GEMM has at least :data:`RESTRIDE_MIN_MACS` multiply-adds."""
    flat = [_flat(a), _flat(b), _flat(bias), _flat(aux), _flat(out)]
    ok = [_address(t) % 16 == 0 for t in flat]
    flags = _vec_flags(role, dtype, ldc, act, flags, ok[4], ok[3], ok[2])
    vec_ab = _vec_ab(dtype, ok[0], ok[1], lda, ldb)
    if _restrides(dtype, vec_ab, Mg * Ng * Kg):
        if not (ok[0] and lda % 8 == 0):
            flat[0], lda = _restrided(dtype, flat[0], *_operand_extent(role, "a", Mg, Ng, Kg),
                                      lda, stream, ex)
        if not (ok[1] and ldb % 8 == 0):
            flat[1], ldb = _restrided(dtype, flat[1], *_operand_extent(role, "b", Mg, Ng, Kg),
                                      ldb, stream, ex)
        vec_ab = True
    device = None if SIMULATOR else out.device
    wg = _wgmma_for(role, dtype, vec_ab, device, Mg, Ng, Kg)
    _launch_gemm(role, dtype, flat, Mg, Ng, Kg, lda, ldb, ldc, act, flags, vec_ab, device, wg,
                 False, stream, ex)


def _launch_gemm(role, dtype, flat, Mg, Ng, Kg, lda, ldb, ldc, act, flags, vec_ab, device, wg,
                 pair, stream, ex):
    """Launch (or record) one GEMM whose kernel choices are made: ``flat`` the flat
    array arguments (a, b, bias, aux, out, with ``pair`` b2). A split-K GEMM
    (:func:`_splits_for`) also takes a float32 workspace (allocated here) and the
    stream's arrival counters. A forward of a few rows may take the few-row kernel
    (:func:`_skinny_for`) instead of the tiled ones."""
    skinny, splits = _kernel_choice(role, dtype, vec_ab, device, Mg, Ng, Kg, wg)
    if wg is not None and wg.tma:
        if role != "fwd":
            # The TMA producer is the forward's: the same tiling with the cp.async one.
            wg = wg._replace(tma=0)
        else:
            narr = 6 if pair else 5
            flat = flat[:narr] + _tma_maps(flat, Mg, Ng, Kg, lda, ldb, wg, stream, pair, ex)
    extra = []
    if splits > 1:
        if skinny is not None:
            # A column block's C^T tile: cols x 8 tokens a token tile.
            tiles, part = cdiv(Ng, skinny.cols), skinny.cols * 8 * cdiv(Mg, 8)
        else:
            cfg = _pick_config(Mg, Ng, device)
            tiles, part = cdiv(Mg, cfg.bm) * cdiv(Ng, cfg.bn), cfg.bm * cfg.bn
        flat = flat + [ex.alloc(flat[4], (tiles * splits * part,), "float32"),
                       ex.stream_buffer(functools.partial(_SPLIT_COUNTERS, flat[4], n=tiles),
                                        stream)]
        extra = [splits]
    if SIMULATOR or ex.recording:
        kernel, grid, block, shared = _gemm_setup(role, dtype, Mg, Ng, vec_ab, device, wg, pair,
                                                  splits, skinny)
        ex.launch(kernel, grid, block, stream,
                  flat + [Mg, Ng, Kg, lda, ldb, ldc, act, flags] + extra, shared=shared)
        return
    plan = _gemm_prepared(role, dtype, Mg, Ng, Kg, lda, ldb, ldc, act, flags, vec_ab,
                          tuple(t.size for t in flat), device, wg, pair, splits, skinny)
    plan.launch(stream, [t.ptr for t in flat])


# The split-K GEMMs' arrival counters: ``_SPLIT_COUNTERS(like, stream, n)``, a uint32
# array of at least n zeros per (library, device, stream); the last block of each
# tile resets its counter.
_SPLIT_COUNTERS = StreamZeros(clear_u32_counters)


def gated_pair_ok(dtype, aligned, M, N2, K, device=None, backward=False):
    """Whether a gated unit's forward GEMM (:func:`gemm_gated_pair`) of ``M`` rows, and
    with ``backward`` its gradient GEMMs (:func:`gemm_pair_dgrad`,
    :func:`gemm_pair_wgrad`), use its gate and up weights ``[N2 / 2, K]`` in place:
    16-bit, with the tiles' rows 16-byte aligned (x and both weights, ``aligned``
    saying whether they start so; backward, the pairs' gradient ``[M, N2]`` too), and
    while :data:`GATED_PAIRS_EVERYWHERE` is off only the forward on mma.sync.
    Otherwise the caller builds their interleaved copy."""
    if dtype == "float32" or not aligned or K % 8 or (backward and N2 % 8):
        return False
    if GATED_PAIRS_EVERYWHERE:
        return True
    return not backward and _wgmma_for("fwd", dtype, True, device, M, N2, K) is None


def _pair_launch(role, dtype, flat, Mg, Ng, Kg, lda, ldb, ldc, flags, stream, ex, act=0,
                 aux_ok=True):
    """Launch a pair GEMM (16-byte A / B rows, :func:`gated_pair_ok`): ``flat`` its six
    flat arrays (a, b, bias, aux, out, b2; wgrad's b2 is the second output)."""
    out_ok = all(_address(t) % 16 == 0 for t in flat[4:6 if role == "wgrad" else 5])
    flags = _vec_flags(role, dtype, ldc, act, flags, out_ok, aux_ok,
                       _address(flat[2]) % 16 == 0)
    device = None if SIMULATOR else flat[4].device
    wg = _wgmma_for(role, dtype, True, device, Mg, Ng, Kg)
    _launch_gemm(role, dtype, flat, Mg, Ng, Kg, lda, ldb, ldc, act, flags, True, device, wg,
                 True, stream, ex)


def gemm_gated_pair(dtype, a, bg, bu, bias, aux, out, M, N2, K, act, flags, stream, ex=NOW):
    """The gated forward's GEMM with B's rows read in place from two weights: row 2j is
    ``bg``'s row j (gate), row 2j + 1 ``bu``'s (up), both ``[N2 / 2, K]``; a ``[M, K]``;
    bias ``[N2]`` interleaved (read with ``F_BIAS``); aux: the pairs ``[M, N2]``
    (written with ``F_PREACT``); out ``h`` ``[M, N2 / 2]``. Only where
    :func:`gated_pair_ok` holds; flags hold ``F_GATED``."""
    if not flags & F_GATED:
        raise ValueError("gemm_gated_pair: flags must hold F_GATED")
    flat = [_flat(a), _flat(bg), _flat(bias), _flat(aux), _flat(out), _flat(bu)]
    _pair_launch("fwd", dtype, flat, M, N2, K, K, K, N2 // 2, flags, stream, ex, act,
                 _address(flat[3]) % 16 == 0)


def gemm_pair_dgrad(dtype, dz, wg, wu, gx, M, K, N2, stream, ex=NOW):
    """``gx [M, K] = dz [M, N2] @ W`` with W's row 2j ``wg``'s row j and 2j + 1 ``wu``'s
    (both ``[N2 / 2, K]``): the input gradient of a gated unit's gate and up GEMM from
    the pairs' gradient, the weights read in place. Only where :func:`gated_pair_ok`
    holds."""
    g = _flat(gx)
    _pair_launch("dgrad", dtype, [_flat(dz), _flat(wg), g, g, g, _flat(wu)], M, K, N2, N2, K,
                 K, 0, stream, ex)


def gemm_pair_wgrad(dtype, dz, x, gwg, gwu, gb, M, N2, K, stream, ex=NOW):
    """``dz^T x`` ``[N2, K]`` from the pairs' gradient ``dz [M, N2]`` and ``x [M, K]``,
    its row 2j written to ``gwg``'s row j and 2j + 1 to ``gwu``'s (both ``[N2 / 2, K]``:
    the gate and up weights' gradients); ``gb`` ``[N2]`` (interleaved) gets ``sum_m
    dz`` unless None. Only where :func:`gated_pair_ok` holds."""
    o = _flat(gwg)
    _pair_launch("wgrad", dtype, [_flat(dz), _flat(x), o if gb is None else _flat(gb), o, o,
                                  _flat(gwu)], N2, K, M, N2, K, K,
                 0 if gb is None else F_BIAS, stream, ex)


def forward_plan(M, N, K, dtype, has_bias, save_preact, activation, x_aligned, w_aligned,
                 device=None, bias_aligned=True):
    """A launcher for :func:`linear_act_forward` on already-validated inputs: returns
    ``launch(stream, x_ptr, w_ptr, bias_ptr, y_ptr, preact_ptr)`` for contiguous x
    ``[M, K]``, weight ``[N, K]``, bias ``[N]`` (pointer ignored unless ``has_bias``),
    fresh 16-byte aligned outputs y and preact ``[M, N]`` (preact ignored unless
    ``save_preact``); ``x_aligned`` / ``w_aligned``: whether x / weight start 16-byte
    aligned, ``bias_aligned`` whether bias does (the epilogue's 16-byte bias loads
    need it); ``device``: the CUDA device ordinal the tensors live on. The torch front
    end caches one per input signature (host cost). None where the GEMM first copies
    x or weight to aligned rows (:data:`RESTRIDE_MIN_MACS`), splits K (its workspace
    and counters) or runs a TMA tiling (tensor maps made from each call's pointers):
    take :func:`forward_record_plan` there."""
    act = ACT_CODES[activation]
    flags = (F_BIAS if has_bias else 0) | (F_PREACT if save_preact else 0)
    flags = _vec_flags("fwd", dtype, N, act, flags, True, True, bias_aligned)
    vec_ab = _vec_ab(dtype, x_aligned, w_aligned, K, K)
    wg = _wgmma_for("fwd", dtype, vec_ab, device, M, N, K)
    skinny, splits = _kernel_choice("fwd", dtype, vec_ab, device, M, N, K, wg)
    if _restrides(dtype, vec_ab, M * N * K) or splits > 1 or (wg is not None and wg.tma):
        return None
    plan = _gemm_prepared("fwd", dtype, M, N, K, K, K, N, act, flags, vec_ab,
                          (M * K, N * K, N if has_bias else M * N, M * N, M * N), device, wg,
                          skinny=skinny)

    def launch(stream, x_ptr, w_ptr, bias_ptr, y_ptr, pre_ptr):
        plan.launch(stream, (x_ptr, w_ptr, bias_ptr if has_bias else y_ptr,
                             pre_ptr if save_preact else y_ptr, y_ptr))
    return launch


def forward_record_plan(x, weight, bias, activation, save_preact):
    """A :class:`~numba_fused.plan.Plan` of :func:`linear_act_forward` for inputs of
    this signature (validated, contiguous, non-empty): inputs ``(x, weight, bias or
    None)``, outputs ``(y, preact or None)``. GPU only."""
    rec = Recorder(_plan_inputs(x, weight, bias))
    return rec.plan(_forward(*rec.inputs, activation, save_preact, ex=rec))


def _check_flag(value, name):
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
    return bool(value)


def _matrix(arr, name, ndim=None):
    if arr.size == 0:
        # KernelArray.is_contiguous rejects some zero-size arrays (torch gives (3, 0)
        # strides (1, 1)); any zero-size array is trivially row-major.
        arr = KernelArray(arr.owner, arr.lib, arr.dtype, arr.shape, c_strides(arr.shape),
                          arr.ptr, arr.host, arr.device)
    checks.require_contiguous(arr, name)
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {arr.shape}")
    if arr.ndim < 1:
        raise ValueError(f"{name} must have at least one dimension, got a scalar")
    return arr


def _linear_inputs(x, weight, bias, rows="N"):
    """(x, weight, bias) as validated KernelArrays: x ``[..., K]``, weight ``[rows, K]``,
    bias ``[rows]`` or None; floating, contiguous, one dtype, one device. ``rows``
    names weight's first dimension in the messages."""
    xa = _matrix(checks.floating_array(x, "x"), "x")
    wa = _matrix(checks.floating_array(weight, "weight"), "weight", 2)
    ba = checks.optional_array(bias, "bias")
    checks.check_same_dtype(xa, "x", (wa, "weight"), (ba, "bias"))
    checks.check_same_device(xa, "x", (wa, "weight"), (ba, "bias"))
    n, K = wa.shape
    if xa.shape[-1] != K:
        raise ValueError(f"x has {xa.shape[-1]} features (last dimension) but weight "
                         f"[{rows}, K] = {list(wa.shape)} expects K = {K}")
    if ba is not None:
        _matrix(ba, "bias", 1)
        if ba.shape[0] != n:
            raise ValueError(f"bias must have shape [{n}] (weight's {rows}), got "
                             f"{list(ba.shape)}")
    return xa, wa, ba


def linear_act_forward(x, weight, bias=None, activation="none", save_preact=False):
    """``y = act(x @ weight^T + bias)``; with ``save_preact`` also the pre-activation.

    x: ``[..., K]``; weight: ``[N, K]``; bias: ``[N]`` or None; all one dtype
    (float32, float16, bfloat16), contiguous, on one device. Returns ``y`` ``[..., N]``
    or ``(y, preact)``, in x's dtype and library. float32 accumulation; float16 /
    bfloat16 on tensor cores, float32 on CUDA cores.
    """
    check_activation(activation)
    save_preact = _check_flag(save_preact, "save_preact")
    y, pre = _forward(*_linear_inputs(x, weight, bias), activation, save_preact)
    if save_preact:
        return y.owner, pre.owner
    return y.owner


def _forward(xa, wa, ba, activation, save_preact, ex=NOW):
    """(y, preact or None) of :func:`linear_act_forward` from validated KernelArrays
    (a plan's launcher; the public function checks)."""
    N, K = wa.shape
    dtype = xa.dtype
    lead = xa.shape[:-1]
    y = ex.alloc(xa, lead + (N,), dtype)
    pre = ex.alloc(xa, lead + (N,), dtype) if save_preact else None
    M = y.size // N if N else 0
    if M and N:
        x2 = xa.reshape((M, K))
        y2 = y.reshape((M, N))
        pre2 = pre.reshape((M, N)) if pre is not None else y2
        flags = (F_BIAS if ba is not None else 0) | (F_PREACT if save_preact else 0)
        _gemm("fwd", dtype, x2, wa, ba if ba is not None else y2, pre2, y2, M, N, K, K, K, N,
              ACT_CODES[activation], flags, stream_handle(xa), ex)
    return y, pre


def linear_act_dgrad(grad_out, weight, activation="none", preact=None):
    """``(grad_out @ weight) * act'(preact)`` (the seed's ``kernel_bwd``).

    grad_out: ``[..., N]``; weight: ``[N, K]``; preact: ``[..., K]`` (required unless
    activation is 'none', where it is ignored). Returns ``[..., K]`` in grad_out's
    dtype and library.
    """
    return _dgrad(*_dgrad_inputs(grad_out, weight, activation, preact), activation).owner


def _dgrad_inputs(grad_out, weight, activation, preact):
    """(grad_out, weight, preact or None) of :func:`linear_act_dgrad`, validated."""
    check_activation(activation)
    ga = _matrix(checks.floating_array(grad_out, "grad_out"), "grad_out")
    wa = _matrix(checks.floating_array(weight, "weight"), "weight", 2)
    N, K = wa.shape
    pa = None
    if activation != "none":
        if preact is None:
            raise ValueError(f"preact is required for activation {activation!r}")
        pa = _matrix(checks.floating_array(preact, "preact"), "preact")
    checks.check_same_dtype(ga, "grad_out", (wa, "weight"), (pa, "preact"))
    checks.check_same_device(ga, "grad_out", (wa, "weight"), (pa, "preact"))
    if ga.shape[-1] != N:
        raise ValueError(f"grad_out has {ga.shape[-1]} features (last dimension) but weight "
                         f"[N, K] = {list(wa.shape)} expects N = {N}")
    lead = ga.shape[:-1]
    if pa is not None and pa.shape != lead + (K,):
        raise ValueError(f"preact must have shape {list(lead + (K,))} (grad_out's leading "
                         f"dimensions, weight's K), got {list(pa.shape)}")
    return ga, wa, pa


def _dgrad(ga, wa, pa, activation, ex=NOW):
    """:func:`linear_act_dgrad` on validated KernelArrays (pa None for 'none')."""
    N, K = wa.shape
    dtype = ga.dtype
    out = ex.alloc(ga, ga.shape[:-1] + (K,), dtype)
    M = out.size // K if K else 0
    if M and K:
        o2 = out.reshape((M, K))
        aux = pa.reshape((M, K)) if pa is not None else o2
        _gemm("dgrad", dtype, ga.reshape((M, N)), wa, o2, aux, o2, M, K, N, N, K, K,
              ACT_CODES[activation], 0, stream_handle(ga), ex)
    return out


def _act_grad_mul(ga, pa, code, ex=NOW):
    """New array ``ga * act'(pa)`` for activation code ``code`` (KernelArrays, same shape)."""
    out = ex.alloc(ga, ga.shape, ga.dtype)
    n = ga.size
    if n:
        per = 4 if ga.dtype == "float32" else 8
        vec = all(_address(t) % 16 == 0 for t in (ga, pa, out))
        kernel = make_act_grad_kernel(ga.dtype, vec)
        work = n // per + 1 if vec else n
        ex.launch(kernel, (cdiv(work, ACT_GRAD_THREADS),), (ACT_GRAD_THREADS,),
                  stream_handle(ga), [_flat(ga), _flat(pa), _flat(out), n, code])
    return out


def _wgrad(gz2, x2, M, N, K, need_bias, stream, ex=NOW, ldz=None):
    """(grad_weight [N, K], grad_bias [N] or None) from grad_z [M, N] (row stride
    ``ldz``, default N) and x [M, K]."""
    gw = ex.alloc(gz2, (N, K), gz2.dtype)
    gb = ex.alloc(gz2, (N,), gz2.dtype) if need_bias else None
    if N and (K or need_bias):
        _gemm("wgrad", gz2.dtype, gz2, x2, gb if gb is not None else gw, gw, gw, N, K, M,
              ldz or N, K, K, 0, F_BIAS if need_bias else 0, stream, ex)
    return gw, gb


def _grad_z(g2, p2, activation, K, stream, ex=NOW):
    """(grad_z, its row stride) of linear_act's backward from grad_out ``g2`` ``[M, N]``
    and preact ``p2`` (None for 'none'): ``g2 * act'(p2)``, or g2 itself. Where the two
    GEMMs would each copy grad_z to aligned rows (:data:`RESTRIDE_MIN_MACS`), it is
    written once with aligned rows instead (the activation's gradient in the same
    pass), and both read that copy."""
    M, N = g2.shape
    code = ACT_CODES[activation]
    if _restrides(g2.dtype, _aligned_rows(g2, N), M * N * K):
        return _restrided(g2.dtype, _flat(g2), M, N, N, stream, ex,
                          None if activation == "none" else _flat(p2), code)
    if activation != "none":
        return _act_grad_mul(g2, p2, code, ex), N
    return g2, N


def _grads(ga, xa, wa, pa, activation, need_x, need_w, need_b, ex=NOW):
    """(grad_x, grad_weight, grad_bias), None where not asked, of ``act(x W^T + b)``
    from grad_out ``ga`` ``[..., N]``, x ``xa`` ``[..., K]``, weight ``wa`` ``[N, K]``
    and preact ``pa`` (``[..., N]``, None for 'none'): validated, non-empty
    KernelArrays (a plan's launcher; the public functions check)."""
    N, K = wa.shape
    M = ga.size // N
    dtype = ga.dtype
    stream = stream_handle(ga)
    gz, ldz = _grad_z(ga.reshape((M, N)), None if pa is None else pa.reshape((M, N)),
                      activation, K, stream, ex)
    gx = None
    if need_x:
        gx = ex.alloc(ga, xa.shape, dtype)
        gx2 = gx.reshape((M, K))
        _gemm("dgrad", dtype, gz, wa, gx2, gx2, gx2, M, K, N, ldz, K, K, 0, 0, stream, ex)
    gw = gb = None
    if need_w or need_b:
        gw, gb = _wgrad(gz, xa.reshape((M, K)), M, N, K, need_b, stream, ex, ldz)
    return gx, (gw if need_w else None), gb


def _mlp_grads(gy, xa, w1, w2, h, z1, activation, needs, ex=NOW):
    """(grad_x, grad_w1, grad_b1, grad_w2, grad_b2), None where not asked (``needs``:
    five flags), of ``fc2(act(fc1(x)))`` from grad_y ``gy`` ``[..., N2]``, x ``[..., K]``,
    w1 ``[H, K]``, w2 ``[N2, H]``, the hidden activations h ``[..., H]`` and the
    pre-activation z1 ``[..., H]`` (None for 'none'): as :func:`_grads`."""
    need_x, need_w1, need_b1, need_w2, need_b2 = needs
    N2, hid = w2.shape
    M = gy.size // N2
    stream = stream_handle(gy)
    gy2 = gy.reshape((M, N2))
    gw2, gb2 = None, None
    if need_w2 or need_b2:
        gw2, gb2 = _wgrad(gy2, h.reshape((M, hid)), M, N2, hid, need_b2, stream, ex)
    gx = gw1 = gb1 = None
    if need_x or need_w1 or need_b1:
        # d loss / d z1 in one GEMM: (grad_y @ W2) * act'(z1).
        gz1 = ex.alloc(gy, (M, hid), gy.dtype)
        aux = z1.reshape((M, hid)) if activation != "none" else gz1
        _gemm("dgrad", gy.dtype, gy2, w2, gz1, aux, gz1, M, hid, N2, N2, hid, hid,
              ACT_CODES[activation], 0, stream, ex)
        gx, gw1, gb1 = _grads(gz1, xa, w1, None, "none", need_x, need_w1, need_b1, ex)
    return gx, gw1, gb1, (gw2 if need_w2 else None), gb2


def _plan_inputs(*objs):
    from interop.dlpack import as_kernel_array

    return [None if o is None else as_kernel_array(o, "input") for o in objs]


def backward_plan(grad_out, x, weight, preact, activation, need_x, need_w, need_b):
    """A :class:`~numba_fused.plan.Plan` of linear_act's backward (as
    :func:`linear_act_backward`, only the gradients asked for) for inputs of this
    signature, already validated by the array-level functions (contiguous, one dtype
    and device, non-empty): inputs ``(grad_out, x, weight, preact or None)``, outputs
    ``(grad_x, grad_weight, grad_bias)`` with None where not asked. GPU only."""
    rec = Recorder(_plan_inputs(grad_out, x, weight, preact))
    return rec.plan(_grads(*rec.inputs, activation, need_x, need_w, need_b, ex=rec))


def dgrad_plan(grad_out, weight, activation="none", preact=None):
    """A :class:`~numba_fused.plan.Plan` of :func:`linear_act_dgrad` for inputs of this
    signature (validated here as there; non-empty): inputs ``(grad_out, weight, preact
    or None)`` (preact recorded as absent with 'none'), outputs ``(grad_in,)``. GPU
    only."""
    pre = None if activation == "none" else preact
    rec = Recorder(_plan_inputs(*_dgrad_inputs(grad_out, weight, activation, pre)))
    return rec.plan((_dgrad(*rec.inputs, activation, ex=rec),))


def weight_grad_plan(grad_z, x, need_bias_grad=True):
    """A :class:`~numba_fused.plan.Plan` of :func:`linear_weight_grad` for inputs of this
    signature (validated here as there; non-empty): inputs ``(grad_z, x)``, outputs
    ``(grad_weight, grad_bias or None)``. GPU only."""
    need_bias_grad = _check_flag(need_bias_grad, "need_bias_grad")
    rec = Recorder(_plan_inputs(*_weight_grad_inputs(grad_z, x)))
    return rec.plan(_weight_grad(*rec.inputs, need_bias_grad, ex=rec))


def activation_backward_plan(grad_out, preact, activation):
    """A :class:`~numba_fused.plan.Plan` of :func:`activation_backward` for inputs of
    this signature (validated here as there; non-empty): inputs ``(grad_out, preact)``,
    outputs ``(grad_in,)``. GPU only."""
    rec = Recorder(_plan_inputs(*_activation_backward_inputs(grad_out, preact, activation)))
    return rec.plan((_act_grad_mul(*rec.inputs, ACT_CODES[activation], ex=rec),))


def mlp_backward_plan(grad_y, x, w1, w2, h, z1, activation, needs):
    """A :class:`~numba_fused.plan.Plan` of the two-layer MLP's backward
    (``fc2(act(fc1(x)))``; ``needs``: flags for x, w1, b1, w2, b2) for inputs of this
    signature, validated as :func:`backward_plan`'s: inputs ``(grad_y, x, w1, w2, h,
    z1 or None)``, outputs ``(grad_x, grad_w1, grad_b1, grad_w2, grad_b2)``, None where
    not asked. GPU only."""
    rec = Recorder(_plan_inputs(grad_y, x, w1, w2, h, z1))
    return rec.plan(_mlp_grads(*rec.inputs, activation, tuple(needs), ex=rec))


def linear_weight_grad(grad_z, x, need_bias_grad=True):
    """``(grad_z^T @ x, sum over rows of grad_z or None)``: the weight and bias
    gradients of a linear layer given the gradient of its pre-activation.

    grad_z: ``[..., N]``; x: ``[..., K]`` with the same leading dimensions.
    """
    need_bias_grad = _check_flag(need_bias_grad, "need_bias_grad")
    gw, gb = _weight_grad(*_weight_grad_inputs(grad_z, x), need_bias_grad)
    return gw.owner, (gb.owner if gb is not None else None)


def _weight_grad_inputs(grad_z, x):
    """(grad_z, x) of :func:`linear_weight_grad`, validated."""
    ga = _matrix(checks.floating_array(grad_z, "grad_z"), "grad_z")
    xa = _matrix(checks.floating_array(x, "x"), "x")
    checks.check_same_dtype(ga, "grad_z", (xa, "x"))
    checks.check_same_device(ga, "grad_z", (xa, "x"))
    if ga.shape[:-1] != xa.shape[:-1]:
        raise ValueError(f"grad_z {list(ga.shape)} and x {list(xa.shape)} must have the same "
                         f"leading dimensions")
    return ga, xa


def _weight_grad(ga, xa, need_bias_grad, ex=NOW):
    N, K = ga.shape[-1], xa.shape[-1]
    M = int(np.prod(ga.shape[:-1], dtype=np.int64))
    return _wgrad(ga.reshape((M, N)), xa.reshape((M, K)), M, N, K, need_bias_grad,
                  stream_handle(ga), ex)


def activation_backward(grad_out, preact, activation):
    """``grad_out * act'(preact)`` elementwise, in grad_out's dtype and library
    (float32 math, one rounding). grad_out and preact: same shape, dtype, device."""
    ga, pa = _activation_backward_inputs(grad_out, preact, activation)
    return _act_grad_mul(ga, pa, ACT_CODES[activation]).owner


def _activation_backward_inputs(grad_out, preact, activation):
    """(grad_out, preact) of :func:`activation_backward`, validated."""
    check_activation(activation)
    ga = _matrix(checks.floating_array(grad_out, "grad_out"), "grad_out")
    pa = _matrix(checks.floating_array(preact, "preact"), "preact")
    checks.check_same_dtype(ga, "grad_out", (pa, "preact"))
    checks.check_same_device(ga, "grad_out", (pa, "preact"))
    if pa.shape != ga.shape:
        raise ValueError(f"preact must have grad_out's shape {list(ga.shape)}, got "
                         f"{list(pa.shape)}")
    return ga, pa


def linear_act_backward(grad_out, x, weight, preact=None, activation="none"):
    """Gradients of ``y = act(x @ weight^T + bias)``: ``(grad_x, grad_weight, grad_bias)``.

    grad_out: ``[..., N]`` (dL/dy); x: ``[..., K]``; weight: ``[N, K]``; preact:
    ``[..., N]`` from the forward (required unless activation is 'none'). With
    ``grad_z = grad_out * act'(preact)`` (rounded to the dtype, as torch's separate
    activation backward does): ``grad_x = grad_z @ weight``, ``grad_weight = grad_z^T @ x``,
    ``grad_bias = sum_m grad_z`` (float32 accumulation, in the dtype).
    """
    check_activation(activation)
    ga = _matrix(checks.floating_array(grad_out, "grad_out"), "grad_out")
    xa = _matrix(checks.floating_array(x, "x"), "x")
    wa = _matrix(checks.floating_array(weight, "weight"), "weight", 2)
    pa = None
    if activation != "none":
        if preact is None:
            raise ValueError(f"preact is required for activation {activation!r}")
        pa = _matrix(checks.floating_array(preact, "preact"), "preact")
    checks.check_same_dtype(ga, "grad_out", (xa, "x"), (wa, "weight"), (pa, "preact"))
    checks.check_same_device(ga, "grad_out", (xa, "x"), (wa, "weight"), (pa, "preact"))
    N, K = wa.shape
    if xa.shape[-1] != K:
        raise ValueError(f"x has {xa.shape[-1]} features (last dimension) but weight "
                         f"[N, K] = {list(wa.shape)} expects K = {K}")
    if ga.shape != xa.shape[:-1] + (N,):
        raise ValueError(f"grad_out must have shape {list(xa.shape[:-1] + (N,))} (x's leading "
                         f"dimensions, weight's N), got {list(ga.shape)}")
    if pa is not None and pa.shape != ga.shape:
        raise ValueError(f"preact must have grad_out's shape {list(ga.shape)}, got "
                         f"{list(pa.shape)}")
    dtype = ga.dtype
    lead = xa.shape[:-1]
    M = int(np.prod(lead, dtype=np.int64))
    stream = stream_handle(ga)
    gz, ldz = _grad_z(ga.reshape((M, N)), None if pa is None else pa.reshape((M, N)),
                      activation, K, stream)
    gx = empty_like_lib(ga, lead + (K,), dtype)
    if M and K:
        gx2 = gx.reshape((M, K))
        _gemm("dgrad", dtype, gz, wa, gx2, gx2, gx2, M, K, N, ldz, K, K, 0, 0, stream)
    gw, gb = _wgrad(gz, xa.reshape((M, K)), M, N, K, True, stream, ldz=ldz)
    return gx.owner, gw.owner, gb.owner


# ---------------------------------------------------------------------------
# float64 references
# ---------------------------------------------------------------------------


def linear_act_ref(x, weight, bias=None, activation="none", save_preact=False):
    """float64 NumPy reference of :func:`linear_act_forward` (inputs taken exactly as
    given: their float64 values)."""
    x, w, b = dtypes.to_float64(x), dtypes.to_float64(weight), dtypes.to_float64(bias)
    pre = x @ w.T
    if b is not None:
        pre = pre + b
    y = act_ref(activation, pre)
    return (y, pre) if save_preact else y


def linear_act_dgrad_ref(grad_out, weight, activation="none", preact=None):
    """float64 reference of :func:`linear_act_dgrad`."""
    d = dtypes.to_float64(grad_out) @ dtypes.to_float64(weight)
    if activation != "none":
        d = d * act_grad_ref(activation, dtypes.to_float64(preact))
    return d


def linear_act_backward_ref(grad_out, x, weight, preact=None, activation="none"):
    """float64 reference of :func:`linear_act_backward`: (grad_x, grad_weight, grad_bias)."""
    g, x, w = dtypes.to_float64(grad_out), dtypes.to_float64(x), dtypes.to_float64(weight)
    if activation != "none":
        g = g * act_grad_ref(activation, dtypes.to_float64(preact))
    g2 = g.reshape(-1, w.shape[0])
    x2 = x.reshape(-1, w.shape[1])
    return (g @ w), g2.T @ x2, g2.sum(axis=0)


# ---------------------------------------------------------------------------
# Shipped specialisations
# ---------------------------------------------------------------------------


def shipped_kernels():
    """Every kernel the launchers can pick on a GPU."""
    for dtype in ("float16", "bfloat16"):
        for role in ROLES:
            for cfg in (TC_LARGE, TC_SMALL):
                for vec in (True, False):
                    yield make_tc_kernel(role, dtype, vec, cfg)
        # A gated unit's GEMMs using its gate and up weights in place (16-byte rows
        # only): the forward, grad_x and the weight gradients.
        for role in ROLES:
            for cfg in (TC_LARGE, TC_SMALL):
                yield make_tc_kernel(role, dtype, True, cfg, pair=True)
        # Split-K forwards: on the small tiles only (split_k_auto splits outputs of
        # fewer tiles than multiprocessors; _pick_config's large ones fill two waves).
        for pair in (False, True):
            yield make_tc_kernel("fwd", dtype, True, TC_SMALL, pair=pair, split=True)
        # The few-row forward, plain and pair, at every token count it takes.
        for tiles in range(1, SKINNY_MAX_ROWS // 8 + 1):
            for pair in (False, True):
                yield make_skinny_kernel(dtype, SKINNY_DEFAULT, tiles, pair)
    for role in ROLES:
        yield make_simt_kernel(role, SIMT_DEFAULT)
    for dtype in dtypes.DTYPES:
        for vec in (True, False):
            yield make_act_grad_kernel(dtype, vec)
    for dtype in ("float16", "bfloat16"):
        for fuse_act in (False, True):
            yield make_restride_kernel(dtype, fuse_act)

