"""Bit-level intrinsics shared by the kernels, with exact simulator emulations.

On the GPU these are ``@intrinsic`` functions lowered to single LLVM instructions;
under ``NUMBA_ENABLE_CUDASIM=1`` kernels run as Python, where an ``@intrinsic``
cannot be called, so the same names are bound to NumPy emulations that give the
same bits. Which set is bound is decided once, from numba's config at import.
"""

import numpy as np
from numba import config

__all__ = ["f32_as_u32", "u32_as_f32", "mul_rn", "fma_rn", "fence_acq_rel_gpu",
           "grid_dependency_wait", "grid_dependents_launch", "bar_sync", "ir_i32",
           "ld_cg_f32", "ld_cg_f32x4"]

if config.ENABLE_CUDASIM:

    def f32_as_u32(x):
        """The IEEE-754 bits of float32 ``x`` as a uint32."""
        return np.float32(x).view(np.uint32)

    def u32_as_f32(bits):
        """The float32 whose IEEE-754 bits are the low 32 bits of ``bits``."""
        return np.uint32(int(bits) & 0xFFFFFFFF).view(np.float32)

    def mul_rn(a, b):
        """float32 ``a * b`` rounded on its own: never fused into an add (FMA)."""
        with np.errstate(over="ignore", invalid="ignore"):
            return np.float32(a) * np.float32(b)

    def fma_rn(a, b, c):
        """float32 ``a * b + c`` rounded once (to nearest, ties to even), exactly: the
        candidates around the float64 value are compared with the exact rational."""
        from fractions import Fraction

        a, b, c = np.float32(a), np.float32(b), np.float32(c)
        if not (np.isfinite(a) and np.isfinite(b) and np.isfinite(c)):
            with np.errstate(all="ignore"):
                return np.float32(np.float64(a) * np.float64(b) + np.float64(c))
        exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
        f = np.float32(float(exact))
        if not np.isfinite(f):
            return f
        best = f
        for g in (np.nextafter(f, np.float32(-np.inf)), np.nextafter(f, np.float32(np.inf))):
            if not np.isfinite(g):
                continue
            dg, db = abs(Fraction(float(g)) - exact), abs(Fraction(float(best)) - exact)
            if dg < db or (dg == db and int(g.view(np.uint32)) % 2 == 0):
                best = g
        return np.float32(best)

    def fence_acq_rel_gpu():
        """PTX ``fence.acq_rel.gpu``; the simulator's memory is coherent: nothing to do."""

    def ld_cg_f32(arr, idx):
        """float32 ``arr[idx]`` loaded through L2 only (``ld.global.cg``)."""
        return arr[int(idx)]

    def ld_cg_f32x4(arr, idx):
        """float32 ``arr[idx:idx + 4]`` as one ``ld.global.cg.v4`` (idx a multiple of 4)."""
        i = int(idx)
        return arr[i], arr[i + 1], arr[i + 2], arr[i + 3]

    def grid_dependency_wait():
        """PTX ``griddepcontrol.wait``; the simulator runs grids one after another."""

    def grid_dependents_launch():
        """PTX ``griddepcontrol.launch_dependents``; nothing to launch early in the
        simulator."""

    def bar_sync(barrier_id, nthreads):
        """PTX ``barrier.sync``: the simulator has no named barriers. Kernels call the
        block barrier there instead (a stronger one), never this."""
        raise NotImplementedError("named barriers do not exist in the simulator; "
                                  "use cuda.syncthreads() there")

else:
    from llvmlite import ir
    from numba import types
    from numba.core.extending import intrinsic

    def ir_i32(builder, value):
        """An LLVM integer ``value`` as i32 for an intrinsic's codegen: truncated from
        wider, zero-extended from narrower (numba passes uint32 arguments as i64)."""
        width = value.type.width
        if width > 32:
            return builder.trunc(value, ir.IntType(32))
        if width < 32:
            return builder.zext(value, ir.IntType(32))
        return value

    def plain_asm(name, text):
        """A no-argument ``@intrinsic`` named ``name`` that emits the PTX ``text`` as
        a side-effecting inline asm with a memory clobber: the compiler keeps it in
        place and moves no load or store across it."""

        @intrinsic
        def impl(typingctx):
            def codegen(context, builder, signature, args):
                fty = ir.FunctionType(ir.VoidType(), [])
                builder.asm(fty, text, "~{memory}", [], side_effect=True)
                return context.get_dummy_value()

            return types.void(), codegen

        impl.__name__ = name
        return impl

    # An acquire-release fence at GPU scope. numba's cuda.threadfence() emits
    # membar.gl, i.e. fence.sc.gpu, the sequentially consistent (and slower) form.
    # Cumulative: run by one thread after a block barrier it orders the whole
    # block's earlier writes before that thread's next (relaxed) atomic, the
    # pattern of cooperative groups' grid sync.
    fence_acq_rel_gpu = plain_asm("fence_acq_rel_gpu", "fence.acq_rel.gpu;")

    # Programmatic dependent launch (sm_90, PTX ISA 7.8). A kernel launched with the
    # programmatic-stream-serialization attribute may start before the previous
    # kernel in its stream has finished: grid_dependency_wait blocks until that
    # kernel has completed and its memory operations are visible, and returns at
    # once when the launch had no such dependency (a plain launch). The previous
    # kernel's blocks call grid_dependents_launch to let it be scheduled before they
    # exit (without it, only at their exit). The memory clobber keeps the compiler
    # from moving loads or stores across either.
    grid_dependency_wait = plain_asm("grid_dependency_wait", "griddepcontrol.wait;")
    grid_dependents_launch = plain_asm("grid_dependents_launch",
                                       "griddepcontrol.launch_dependents;")

    def _cg_load(n):
        # ld.global.cg: through L2 only, for data other SMs wrote in this launch (their
        # L1s are not coherent with ours: a last block's reads of partial sums).
        # Volatile with a memory clobber: never moved above the fence and atomic.
        regs = ",".join(f"${i}" for i in range(n))
        text = (f"ld.global.cg.v{n}.f32 {{{regs}}}, [${n}];" if n > 1
                else "ld.global.cg.f32 $0, [$1];")
        cons = ",".join(["=f"] * n) + ",l,~{memory}"

        @intrinsic
        def op(typingctx, arr, idx):
            if not (isinstance(arr, types.Array) and arr.dtype == types.float32
                    and isinstance(idx, types.Integer)):
                return None
            ret = types.UniTuple(types.float32, n) if n > 1 else types.float32

            def codegen(context, builder, signature, args):
                ary = context.make_array(signature.args[0])(context, builder, value=args[0])
                i = context.cast(builder, args[1], signature.args[1], types.intp)
                ptr = builder.gep(ary.data, [i])
                gptr = builder.addrspacecast(ptr, ir.PointerType(ptr.type.pointee, 1))
                addr = builder.ptrtoint(gptr, ir.IntType(64))
                rty = ir.LiteralStructType([ir.FloatType()] * n) if n > 1 else ir.FloatType()
                fnty = ir.FunctionType(rty, [ir.IntType(64)])
                res = builder.call(ir.InlineAsm(fnty, text, cons, side_effect=True), [addr])
                if n == 1:
                    return res
                vals = [builder.extract_value(res, k) for k in range(n)]
                return context.make_tuple(builder, ret, vals)

            return ret(arr, idx), codegen

        return op

    # float32 arr[idx] / arr[idx:idx + 4] (idx a multiple of 4) through L2 only.
    ld_cg_f32 = _cg_load(1)
    ld_cg_f32x4 = _cg_load(4)

    @intrinsic
    def bar_sync(typingctx, barrier_id, nthreads):
        # A named barrier (PTX barrier.sync a, b): the calling threads wait until
        # ``nthreads`` (a multiple of 32) have arrived at barrier ``barrier_id`` (0-15;
        # 0 is the one syncthreads uses). The form without .aligned, so threads of a
        # warp may reach it from different branches if the compiler splits a path.
        # The memory clobber keeps loads and stores on their side of it; the PTX
        # barrier orders the participating threads' shared-memory accesses.
        if not (isinstance(barrier_id, types.Integer) and isinstance(nthreads, types.Integer)):
            return None
        sig = types.void(barrier_id, nthreads)

        def codegen(context, builder, signature, args):
            i32 = ir.IntType(32)
            fty = ir.FunctionType(ir.VoidType(), [i32, i32])
            builder.asm(fty, "barrier.sync $0, $1;", "r,r,~{memory}",
                        [ir_i32(builder, args[0]), ir_i32(builder, args[1])],
                        side_effect=True)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def f32_as_u32(typingctx, x):
        if x != types.float32:
            return None
        sig = types.uint32(types.float32)

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], ir.IntType(32))

        return sig, codegen

    @intrinsic
    def u32_as_f32(typingctx, bits):
        if not isinstance(bits, types.Integer):
            return None
        sig = types.float32(bits)

        def codegen(context, builder, signature, args):
            value = args[0]
            width = value.type.width
            if width > 32:
                value = builder.trunc(value, ir.IntType(32))
            elif width < 32:
                value = builder.zext(value, ir.IntType(32))
            return builder.bitcast(value, ir.FloatType())

        return sig, codegen

    @intrinsic
    def mul_rn(typingctx, a, b):
        # NVVM contracts a product into a following add or subtract (one FMA, no
        # rounding in between); PTX's mul.rn is never contracted. For a value that
        # must be rounded exactly as another use of it was (a sum's term, then
        # subtracted from that sum).
        if a != types.float32 or b != types.float32:
            return None
        sig = types.float32(types.float32, types.float32)

        def codegen(context, builder, signature, args):
            fty = ir.FunctionType(ir.FloatType(), [ir.FloatType(), ir.FloatType()])
            return builder.asm(fty, "mul.rn.f32 $0, $1, $2;", "=f,f,f", list(args),
                               side_effect=False)

        return sig, codegen

    @intrinsic
    def fma_rn(typingctx, a, b, c):
        # One rounding of a * b + c, spelled out (PTX fma.rn.f32) so that an
        # error-free product (h = a * b, then fma_rn(a, b, -h) is its exact
        # rounding error) does not depend on what NVVM chooses to contract.
        if a != types.float32 or b != types.float32 or c != types.float32:
            return None
        sig = types.float32(types.float32, types.float32, types.float32)

        def codegen(context, builder, signature, args):
            f = ir.FloatType()
            fty = ir.FunctionType(f, [f, f, f])
            return builder.asm(fty, "fma.rn.f32 $0, $1, $2, $3;", "=f,f,f,f", list(args),
                               side_effect=False)

        return sig, codegen
