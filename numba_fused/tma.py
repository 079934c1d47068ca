"""Tensor Memory Accelerator (TMA) tensor maps for 2-D tiles (Hopper, sm_90).

A tensor map describes a 2-D operand in global memory (``rows x cols`` elements,
``ld`` elements between rows) and the box one copy moves (``box_rows x box_cols``)
with its shared-memory layout (``swizzle``). ``tensor_core.tma_load_2d`` copies the
box at element coordinates (``col0``, ``row0``) into shared memory; elements outside
the operand arrive as zeros. One thread issues the copy; its bytes complete a
phase of an mbarrier (``mbarrier_arrive_expect_tx`` announces them).

numba cannot declare a ``__grid_constant__`` 128-byte kernel parameter, so the map
lives in global memory (16 64-bit words, 64-byte aligned: any allocation is) and a
kernel takes it as an int64 array; ``tensor_core.fence_proxy_tensormap`` makes the
words (a host copy, or :data:`WRITE_WORDS`'s stores) visible to the copy engine
before the first use. Given a stream, a map's words travel as the arguments of a
one-thread launch on it (:data:`WRITE_WORDS`): ordered before that stream's later
launches with no host sync, and recorded by a CUDA graph capture like any launch.

Shared layout of a box (what the simulator reproduces, byte offsets from a base
aligned to 1024 bytes):

- ``swizzle=0``: row ``r`` at ``r * box_cols * itemsize``, packed.
- ``swizzle=128`` (rows of exactly 128 bytes): 16-byte chunk ``c`` of row ``r`` at
  ``r * 128 + 16 * (c ^ (r % 8))``, the layout the wgmma 128-byte swizzle reads.

Under the simulator the map's words hold a key into a registry of the described
arrays, and ``tma_load_2d`` copies from the registered host array.
"""

import collections
import itertools
import threading

import numpy as np
from numba import cuda, types

from interop.dlpack import KernelArray, empty_like_lib

from .launch import SIMULATOR, Kernel

__all__ = ["TMA_SWIZZLES", "TMA_DTYPES", "tensor_map_2d", "cached_map_2d", "check_map_2d",
           "encode_2d", "view_2d", "box_layout_ref", "sim_map", "WRITE_WORDS"]

TMA_SWIZZLES = (0, 128)
# Element types a map may describe, with their sizes in bytes.
TMA_DTYPES = {"float16": 2, "bfloat16": 2, "uint16": 2, "int16": 2, "float32": 4,
              "int32": 4, "uint32": 4}
# The simulator's maps: word 0 holds _SIM_MAGIC, word 1 the registry key. The
# registry keeps the last _SIM_KEEP maps (each holds its operand's host array).
_SIM_MAGIC = 0x544D41_5349_4D00
_SIM_KEEP = 1024
_SIM_MAPS = collections.OrderedDict()
_SIM_KEYS = itertools.count(1)
_SIM_LOCK = threading.Lock()


def _check(dtype, rows, cols, ld, box_rows, box_cols, swizzle, ptr):
    if dtype not in TMA_DTYPES:
        raise TypeError(f"tensor map: dtype must be one of {sorted(TMA_DTYPES)}, got {dtype!r}")
    size = TMA_DTYPES[dtype]
    if swizzle not in TMA_SWIZZLES:
        raise ValueError(f"tensor map: swizzle must be one of {TMA_SWIZZLES}, got {swizzle!r}")
    if not (1 <= rows < 2**32 and 1 <= cols < 2**32):
        raise ValueError(f"tensor map: rows and cols must be in [1, 2^32), got {rows} x {cols}")
    if ld < cols or (ld * size) % 16:
        raise ValueError(f"tensor map: the row stride ({ld} elements) must be >= cols ({cols}) "
                         f"and a multiple of 16 bytes")
    if ptr % 16:
        raise ValueError(f"tensor map: the operand must start 16-byte aligned, got {ptr:#x}")
    if not (1 <= box_rows <= 256 and 1 <= box_cols <= 256):
        raise ValueError(f"tensor map: box dimensions must be in [1, 256], got "
                         f"{box_rows} x {box_cols}")
    if (box_cols * size) % 16:
        raise ValueError(f"tensor map: a box row must be a multiple of 16 bytes, got "
                         f"{box_cols} x {size}")
    if swizzle and box_cols * size != swizzle:
        raise ValueError(f"tensor map: with the {swizzle}-byte swizzle a box row must be "
                         f"{swizzle} bytes, got {box_cols * size}")


def encode_2d(ptr, dtype, rows, cols, ld, box_rows, box_cols, swizzle):
    """The 16 64-bit words of the tensor map of the ``rows x cols`` operand at device
    address ``ptr`` (row stride ``ld`` elements of ``dtype``), boxes of ``box_rows x
    box_cols``, shared layout ``swizzle`` (module docstring): ``cuTensorMapEncodeTiled``
    through ``cuda.bindings``. Raises ValueError / TypeError for what the hardware
    cannot describe, RuntimeError if the driver refuses."""
    _check(dtype, rows, cols, ld, box_rows, box_cols, swizzle, ptr)
    from cuda.bindings import driver as drv

    kinds = {"float16": "FLOAT16", "bfloat16": "BFLOAT16", "uint16": "UINT16",
             "int16": "UINT16", "float32": "FLOAT32", "int32": "INT32", "uint32": "UINT32"}
    u64, u32 = drv.cuuint64_t, drv.cuuint32_t
    swz = {0: "NONE", 128: "128B"}[swizzle]
    err, tmap = drv.cuTensorMapEncodeTiled(
        getattr(drv.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{kinds[dtype]}"), 2, ptr,
        [u64(cols), u64(rows)], [u64(ld * TMA_DTYPES[dtype])], [u32(box_cols), u32(box_rows)],
        [u32(1), u32(1)], drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(drv.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{swz}"),
        drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    if err != drv.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed: {err!r}")
    return np.array([int(w) for w in tmap.opaque], dtype=np.uint64)


def _write_words(out, w0, w1, w2, w3, w4, w5, w6, w7, w8, w9, w10, w11, w12, w13, w14,
                 w15):
    """out[i] = w<i> for i < 16: a tensor map's words, which arrive as this launch's
    arguments (``out``: the map's int64 array of 16)."""
    if cuda.threadIdx.x == 0:
        out[0] = w0
        out[1] = w1
        out[2] = w2
        out[3] = w3
        out[4] = w4
        out[5] = w5
        out[6] = w6
        out[7] = w7
        out[8] = w8
        out[9] = w9
        out[10] = w10
        out[11] = w11
        out[12] = w12
        out[13] = w13
        out[14] = w14
        out[15] = w15


# A map's words written on a stream (one thread): ``WRITE_WORDS.launch(1, 1, stream,
# [out, *words])``.
WRITE_WORDS = Kernel("tma_write_map", _write_words,
                     (types.Array(types.int64, 1, "C"),) + (types.int64,) * 16)


def check_map_2d(src, box_rows, box_cols, swizzle=128):
    """Raise what :func:`tensor_map_2d` would for ``src`` and the box (a plan's
    stand-in keeps its array's 16-byte residue, so it checks as the real one);
    returns ``(rows, cols, ld)``."""
    if src.ndim != 2 or src.strides[1] != 1:
        raise ValueError(f"tensor_map_2d: src must be 2-D with unit column stride, got shape "
                         f"{src.shape}, strides {src.strides}")
    rows, cols = src.shape
    ld = src.strides[0] if src.strides[0] >= cols else cols
    _check(src.dtype, rows, cols, ld, box_rows, box_cols, swizzle, 0 if SIMULATOR else src.ptr)
    return rows, cols, ld


def tensor_map_2d(src, box_rows, box_cols, swizzle=128, stream=None):
    """The tensor map (a KernelArray of 16 int64 words, in ``src``'s library and on its
    device) of the 2-D operand ``src`` (a KernelArray ``[rows, cols]`` with unit column
    stride, rows 16-byte aligned), boxes of ``box_rows x box_cols``, shared layout
    ``swizzle`` (0 or 128, module docstring). The map holds ``src``'s address: it
    describes that storage only, and the caller keeps ``src`` alive while it is used.
    ``stream`` None: the words have reached the device when this returns (a blocking
    copy). A raw stream handle (int): a launch on that stream writes them (no host
    sync; capturable); only launches on that stream after this call may read the map."""
    rows, cols, ld = check_map_2d(src, box_rows, box_cols, swizzle)
    if SIMULATOR:
        host = np.asarray(src.host)
        with _SIM_LOCK:
            key = next(_SIM_KEYS)
            _SIM_MAPS[key] = (host, src.dtype, rows, cols, ld, box_rows, box_cols, swizzle)
            while len(_SIM_MAPS) > _SIM_KEEP:
                _SIM_MAPS.popitem(last=False)
        words = np.zeros(16, dtype=np.uint64)
        words[0], words[1] = _SIM_MAGIC, key
    else:
        words = encode_2d(src.ptr, src.dtype, rows, cols, ld, box_rows, box_cols, swizzle)
    out = empty_like_lib(src, (16,), "int64")
    if stream is None or SIMULATOR:
        _fill(out, words.view(np.int64))
    else:
        WRITE_WORDS.launch(1, 1, stream, [out, *(int(w) for w in words.view(np.int64))])
    return out


# Maps by what they encode (library, device, address, dtype, shape, row stride, box,
# swizzle): a map holds no reference to the tensor it was made from, so an entry is
# right for any later operand with the same key. Weights hit every call; activations
# hit whenever the caching allocator hands out the same address again.
MAP_CACHE_SIZE = 256
_MAPS = collections.OrderedDict()
_MAPS_LOCK = threading.Lock()


def cached_map_2d(src, box_rows, box_cols, swizzle=128, stream=None):
    """:func:`tensor_map_2d` of ``src`` through a cache of the last
    :data:`MAP_CACHE_SIZE` maps (on the GPU; the simulator makes a new one each
    call). ``stream`` None: a new map's words reach the device before this returns (a
    blocking copy, once per key), so launches on any stream may read it. A raw
    stream handle: the stream is part of the key and a new map is written on it (no
    host sync), for launches on that stream."""
    if SIMULATOR:
        return tensor_map_2d(src, box_rows, box_cols, swizzle)
    key = (src.lib, src.device, src.ptr, src.dtype, src.shape, src.strides, box_rows,
           box_cols, swizzle, stream)
    with _MAPS_LOCK:
        hit = _MAPS.get(key)
        if hit is not None:
            _MAPS.move_to_end(key)
            return hit
    made = tensor_map_2d(src, box_rows, box_cols, swizzle, stream)
    with _MAPS_LOCK:
        _MAPS[key] = made
        while len(_MAPS) > MAP_CACHE_SIZE:
            _MAPS.popitem(last=False)
    return made


def view_2d(flat, rows, cols, ld):
    """The ``rows x cols`` operand with row stride ``ld`` elements that starts at flat
    KernelArray ``flat``'s first element, as a 2-D KernelArray (same storage)."""
    if rows < 1 or cols < 1 or ld < cols or (rows - 1) * ld + cols > flat.size:
        raise ValueError(f"view_2d: {rows} x {cols} rows {ld} apart do not fit in "
                         f"{flat.size} elements")
    host = None
    if flat.host is not None:
        h = np.asarray(flat.host).reshape(-1)
        host = np.lib.stride_tricks.as_strided(h, (rows, cols), (ld * h.itemsize, h.itemsize))
    return KernelArray(flat.owner, flat.lib, flat.dtype, (rows, cols), (ld, 1), ptr=flat.ptr,
                       host=host, device=flat.device)


def _fill(out, words):
    """Copy the host words into the new device array ``out`` (a KernelArray); the
    copy has landed when this returns."""
    if out.lib == "torch":
        import torch

        out.owner.copy_(torch.from_numpy(words))
        if out.owner.is_cuda:
            torch.cuda.current_stream(out.owner.device).synchronize()
    elif out.lib == "cupy":
        import cupy

        out.owner.set(words)
        cupy.cuda.get_current_stream().synchronize()
    elif out.host is not None:
        out.host[...] = words
    else:
        out.owner.copy_to_device(words)


def sim_map(words):
    """The simulator's registry entry ``(host array, dtype, rows, cols, ld, box_rows,
    box_cols, swizzle)`` of a map's words."""
    if int(words[0]) != _SIM_MAGIC:
        raise ValueError("tma_load_2d: the tensor map was not made by tensor_map_2d")
    with _SIM_LOCK:
        entry = _SIM_MAPS.get(int(words[1]))
    if entry is None:
        raise RuntimeError(f"tma_load_2d: the simulator no longer holds this map (it keeps "
                           f"the last {_SIM_KEEP})")
    return entry


def box_layout_ref(a, row0, col0, box_rows, box_cols, swizzle):
    """The bytes one copy leaves in shared memory (a uint8 array of ``box_rows *
    box_cols * itemsize``): the box of 2-D host array ``a`` at (row0, col0), zeros
    outside ``a``, laid out as ``swizzle`` says (module docstring)."""
    rows, cols = a.shape
    box = np.zeros((box_rows, box_cols), dtype=a.dtype)
    r_lo, c_lo = max(row0, 0), max(col0, 0)
    r_hi, c_hi = min(row0 + box_rows, rows), min(col0 + box_cols, cols)
    if r_lo < r_hi and c_lo < c_hi:
        box[r_lo - row0:r_hi - row0, c_lo - col0:c_hi - col0] = a[r_lo:r_hi, c_lo:c_hi]
    raw = np.ascontiguousarray(box).view(np.uint8).reshape(box_rows, -1)
    if not swizzle:
        return raw.reshape(-1)
    chunks = raw.reshape(box_rows, -1, 16)
    out = np.empty_like(chunks)
    for r in range(box_rows):
        for c in range(chunks.shape[1]):
            out[r, c ^ (r % 8)] = chunks[r, c]
    return out.reshape(-1)
