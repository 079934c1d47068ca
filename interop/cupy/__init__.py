"""CuPy front end: the numba_fused ops taking and returning CuPy arrays, launched
on CuPy's current stream."""
