"""Bit-level intrinsics shared by the kernels, with exact simulator emulations.

On the GPU these are ``@intrinsic`` functions lowered to single LLVM instructions;
under ``NUMBA_ENABLE_CUDASIM=1`` kernels run as Python, where an ``@intrinsic``
cannot be called, so the same names are bound to NumPy emulations that give the
same bits. Which set is bound is decided once, from numba's config at import.
"""

import numpy as np
from numba import config

__all__ = ["f32_as_u32", "u32_as_f32", "mul_rn"]

if config.ENABLE_CUDASIM:

    def f32_as_u32(x):
        """The IEEE-754 bits of float32 ``x`` as a uint32."""
        return np.float32(x).view(np.uint32)

    def u32_as_f32(bits):
        """The float32 whose IEEE-754 bits are the low 32 bits of ``bits``."""
        return np.uint32(int(bits) & 0xFFFFFFFF).view(np.float32)

    def mul_rn(a, b):
        """float32 ``a * b`` rounded on its own: never fused into an add (FMA)."""
        return np.float32(a) * np.float32(b)

else:
    from llvmlite import ir
    from numba import types
    from numba.core.extending import intrinsic

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
