"""On-disk cache of compiled kernels, shared across processes (on by default).

A kernel specialisation costs 0.6-3 s of numba typing, lowering and NVVM on its first
use in a process (bench/NOTES.md, seventy-first session), and numba's own
``cache=True`` cannot serve the ops' kernels: they are closures made by factories,
and numba keys a closure by pickling its cells, which for a device helper or an
intrinsic includes a per-process uuid, so no entry is ever found again.

:meth:`launch.Kernel._compiled` looks a kernel up in :func:`cache_dir` before
compiling it and stores what it compiled there: numba's own compiled form
(``_Kernel``: the LLVM IR, PTX and cubin per compute capability, serialized as
numba's cache serializes it), under a key of

- the kernel function's *fingerprint*: its code, and every value numba freezes into
  it at compile time (closure cells, defaults, the module globals its code names,
  and recursively those of the device helpers, intrinsics and functions among them;
  of this package's modules it names, the attributes its code names);
- its numba signature and jit options;
- the compute capability it was compiled for;
- the versions of Python, numba, numba-cuda, llvmlite, NVVM, the CUDA Python
  packages and the driver, and a hash of this package's sources (so an edited kernel
  never meets an old entry).

The directory: ``NUMBA_FUSED_CACHE_DIR`` where it is set and not empty, else
``numba_fused`` under ``$XDG_CACHE_HOME`` (an absolute path) or ``~/.cache``.
``NUMBA_FUSED_DISABLE_CACHE=1`` turns the cache off: nothing is read or written.
Entries are stored compressed (a LayerNorm forward: 55 KB from 328 KB), and a store
removes the least recently used ones while the directory holds more than
``NUMBA_FUSED_CACHE_MAX_MB`` (1024 MiB).

A kernel whose closure holds something without a stable value (a mutable container,
an object this module does not know) gets no key and is compiled as without the
cache. Entries are pickles, loaded with ``pickle``, so the directory must be the
user's alone: it is created with mode 0o700, and one that exists but belongs to
another user or that others may write is not used (the cache is off, nothing is read
or written there). A file that fails to load is a miss.
"""

import hashlib
import os
import pickle
import sys
import tempfile
import threading
import types as pytypes
import zlib

import numpy as np

ENV = "NUMBA_FUSED_CACHE_DIR"
DISABLE_ENV = "NUMBA_FUSED_DISABLE_CACHE"
MAX_ENV = "NUMBA_FUSED_CACHE_MAX_MB"
DEFAULT_MAX_MB = 1024
_PACKAGE = __name__.split(".")[0]
_SUFFIX = ".nfk"
# An entry: this magic, then the zlib-compressed pickle (numba's LLVM IR, PTX and cubin
# compress about 6x at level 1 for ~2 ms; bench/NOTES.md, seventy-fourth session).
_MAGIC = b"NFK1"

_lock = threading.Lock()
_counts = {"hits": 0, "misses": 0, "stores": 0, "unkeyed": 0}
_miss_why = {}


class Unkeyable(TypeError):
    """A value numba would freeze into a kernel that has no stable fingerprint."""


def default_dir():
    """``numba_fused`` under ``$XDG_CACHE_HOME`` where that is an absolute path (the
    XDG spec has a relative one ignored), else under ``~/.cache``; None where there is
    no home directory to expand."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        home = os.path.expanduser("~")
        if not os.path.isabs(home):
            return None
        base = os.path.join(home, ".cache")
    return os.path.join(base, _PACKAGE)


def cache_dir():
    """The cache directory, or None (cache off): None where ``NUMBA_FUSED_DISABLE_CACHE``
    is set to anything but "" or "0", else ``NUMBA_FUSED_CACHE_DIR`` where set and not
    empty, else :func:`default_dir`; None too where that directory exists and is not
    private (:func:`private`)."""
    return _resolve()[0]


def _resolve():
    """(the cache directory, None), or (None, why the cache is off)."""
    if os.environ.get(DISABLE_ENV, "") not in ("", "0"):
        return None, f"{DISABLE_ENV}={os.environ[DISABLE_ENV]}"
    path = os.environ.get(ENV, "")
    path = os.path.abspath(os.path.expanduser(path)) if path else default_dir()
    if path is None:
        return None, "no home directory for the default"
    if not private(path):
        return None, f"{path} belongs to another user, is not a directory, or others may write it"
    return path, None


def private(path):
    """Whether ``path`` may hold this user's entries: absent (it will be created
    0o700), or a directory this user owns that neither group nor others may write."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if not os.path.isdir(path) or st.st_mode & 0o022:
        return False
    return not hasattr(os, "getuid") or st.st_uid == os.getuid()


def stats():
    """Counts since import: hits, misses (a key but no usable entry), stores, and
    unkeyed kernels (compiled without the cache)."""
    with _lock:
        return dict(_counts)


def misses():
    """For each kernel (by name) that missed since import, why its latest miss was:
    "no entry" (never stored, or stored under another key), the exception loading its
    entry raised, or the signature the entry was stored for."""
    with _lock:
        return dict(_miss_why)


def _count(what):
    with _lock:
        _counts[what] += 1


def _miss(name, why):
    with _lock:
        _counts["misses"] += 1
        _miss_why[name] = why


def _walk(obj, out, seen):
    """Append to ``out`` a stable description of ``obj``; raise Unkeyable where there
    is none. ``seen``: functions already described (a helper met twice, or one that
    refers to itself, is described once and then by name)."""
    kind = type(obj)
    if obj is None or kind in (bool, int, str, bytes):
        out.append(f"{kind.__name__}:{obj!r}")
    elif kind is float:
        out.append(f"float:{obj.hex()}")
    elif isinstance(obj, np.generic):
        out.append(f"np:{obj.dtype.str}:{obj.tobytes().hex()}")
    elif isinstance(obj, np.dtype):
        out.append(f"dtype:{obj.str}")
    elif isinstance(obj, np.ndarray):
        out.append(f"nd:{obj.dtype.str}:{obj.shape}:"
                   f"{hashlib.sha256(np.ascontiguousarray(obj).tobytes()).hexdigest()}")
    elif isinstance(obj, (tuple, list)):  # named tuples too (their class, then fields)
        out.append(f"{kind.__module__}.{kind.__qualname__}({len(obj)})")
        for v in obj:
            _walk(v, out, seen)
    elif kind is frozenset:
        parts = []
        for v in obj:
            sub = []
            _walk(v, sub, seen)
            parts.append("|".join(sub))
        out.append("frozenset:" + ",".join(sorted(parts)))
    elif isinstance(obj, pytypes.ModuleType):
        out.append(f"module:{_module_name(obj)}")
    elif isinstance(obj, pytypes.CodeType):
        _walk_code(obj, out, seen)
    elif isinstance(obj, pytypes.FunctionType):
        _walk_function(obj, out, seen)
    elif isinstance(obj, (pytypes.BuiltinFunctionType, np.ufunc)):
        out.append(f"builtin:{getattr(obj, '__module__', None)}.{obj.__name__}")
    elif isinstance(obj, type):
        out.append(f"class:{obj.__module__}.{obj.__qualname__}")
    else:
        _walk_numba(obj, out, seen)


def _module_name(mod):
    """A module's name, numba's redirect shims named by the module they stand for.

    ``numba.types`` is such a shim (a copy of ``numba.core.types`` named
    ``numba.types``); the first ``import numba.types`` in a process, which numba-cuda
    runs while it compiles some kernels, makes the shim the ``types`` attribute of
    ``numba``, so a module of this package imported after that binds the shim where one
    imported before bound ``numba.core.types``: the same names, which by their own
    names would key one kernel two ways."""
    target = vars(mod).get("_RedirectSubpackage__new_module")
    return target if isinstance(target, str) else mod.__name__


def _walk_numba(obj, out, seen):
    """numba's and llvmlite's objects: types by name, dispatchers by their function
    and options, intrinsics by their definition; anything else is Unkeyable."""
    from llvmlite import ir
    from numba.core import types

    if isinstance(obj, ir.Type):  # an intrinsic's LLVM types: "i32", "<4 x i32>"
        out.append(f"irtype:{type(obj).__qualname__}:{obj}")
        return

    if isinstance(obj, types.Type):
        # numba names a type by everything its identity holds (dtype, ndim, layout,
        # readonly, aligned for arrays).
        out.append(f"nbtype:{type(obj).__qualname__}:{obj.name}")
        return
    py_func = getattr(obj, "py_func", None)
    options = getattr(obj, "targetoptions", None)
    if isinstance(py_func, pytypes.FunctionType) and isinstance(options, dict):
        out.append(f"dispatcher:{type(obj).__qualname__}")
        _walk(tuple(sorted(options.items())), out, seen)
        _walk_function(py_func, out, seen)
        return
    defn = getattr(obj, "_defn", None)
    if isinstance(defn, pytypes.FunctionType):
        out.append(f"intrinsic:{type(obj).__qualname__}:{getattr(obj, '_name', '')}")
        _walk_function(defn, out, seen)
        return
    raise Unkeyable(f"no stable fingerprint for a {type(obj).__module__}."
                    f"{type(obj).__qualname__}")


def _walk_code(code, out, seen):
    out.append(f"code:{code.co_name}:{code.co_argcount}:{code.co_kwonlyargcount}:"
               f"{code.co_flags}:{code.co_code.hex()}:{code.co_names}:{code.co_varnames}:"
               f"{code.co_freevars}:{code.co_cellvars}")
    for c in code.co_consts:
        _walk(c, out, seen)


def _global_names(code):
    """The names ``code`` and the code objects nested in it load as globals (a
    superset: co_names also holds attribute names)."""
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, pytypes.CodeType):
            names |= _global_names(c)
    return names


def _walk_function(fn, out, seen):
    ident = f"{fn.__module__}.{fn.__qualname__}"
    if id(fn) in seen:
        out.append(f"seen:{ident}:{seen[id(fn)]}")
        return
    seen[id(fn)] = len(seen)
    out.append(f"function:{ident}")
    _walk_code(fn.__code__, out, seen)
    _walk(fn.__defaults__ or (), out, seen)
    _walk(tuple(sorted((fn.__kwdefaults__ or {}).items())), out, seen)
    for cell in fn.__closure__ or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell (a name bound after the function was made)
            out.append("cell:empty")
            continue
        _walk(value, out, seen)
    g = fn.__globals__
    names = sorted(_global_names(fn.__code__))
    for name in names:
        if name in g:
            out.append(f"global:{name}")
            value = g[name]
            _walk(value, out, seen)
            if isinstance(value, pytypes.ModuleType) and value.__name__.startswith(_PACKAGE):
                # numba freezes ``module.attr`` too: this package's attributes by value
                # (a tuning may rebind one), other modules' through their versions.
                attrs = vars(value)
                for attr in names:
                    if attr in attrs and not isinstance(attrs[attr], pytypes.ModuleType):
                        out.append(f"attr:{value.__name__}.{attr}")
                        _walk(attrs[attr], out, seen)


def fingerprint(fn):
    """sha256 hex of ``fn``'s code and everything numba would freeze into a kernel
    compiled from it; raises Unkeyable where some value has no stable description."""
    if not isinstance(fn, pytypes.FunctionType):
        raise TypeError(f"fn must be a Python function (a kernel's pyfunc), got "
                        f"{type(fn).__name__}")
    out = []
    _walk_function(fn, out, {})
    return hashlib.sha256("\n".join(out).encode()).hexdigest()


_env_key = None


def _environment():
    """What compiled code depends on beyond the kernel: the toolchain's versions and
    this package's sources (computed once)."""
    global _env_key
    if _env_key is None:
        import llvmlite
        import numba
        from numba.cuda.cudadrv import nvvm

        try:
            import numba_cuda
            nbc = numba_cuda.__version__
        except ImportError:
            nbc = "none"
        src = hashlib.sha256()
        root = os.path.dirname(os.path.abspath(__file__))
        for name in sorted(os.listdir(root)):
            if name.endswith(".py"):
                with open(os.path.join(root, name), "rb") as f:
                    src.update(name.encode() + b"\0" + f.read())
        _env_key = (sys.version, numba.__version__, nbc, llvmlite.__version__,
                    str(nvvm.NVVM().get_version()), *_linker_versions(), src.hexdigest())
    return _env_key


def _linker_versions():
    """The CUDA Python packages that link the cubin, and the driver that loads it
    (a cache on a shared file system may meet another machine's); "none" for any
    that is not there (no driver on a machine without a GPU)."""
    found = []
    for mod in ("cuda.bindings", "cuda.core"):
        try:
            found.append(f"{mod}:{__import__(mod, fromlist=['_']).__version__}")
        except Exception:
            found.append(f"{mod}:none")
    try:
        from numba.cuda.cudadrv.driver import driver

        found.append(f"driver:{driver.get_version()}")
    except Exception:
        found.append("driver:none")
    return found


def key(fn, argtypes, options, cc):
    """The cache key (hex) of kernel function ``fn`` compiled for ``argtypes`` with
    jit ``options`` for compute capability ``cc``; None where ``fn`` is Unkeyable."""
    try:
        fp = fingerprint(fn)
        parts = []
        seen = {}
        _walk(tuple(argtypes), parts, seen)
        _walk(tuple(sorted(options.items())), parts, seen)
    except Unkeyable:
        _count("unkeyed")
        return None
    text = "\n".join([fp, *parts, repr(tuple(cc)), *_environment()])
    return hashlib.sha256(text.encode()).hexdigest()


def _path(root, name, digest):
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)[:96]
    return os.path.join(root, f"{safe}-{digest[:40]}{_SUFFIX}")


def read(path):
    """The object an entry file holds (raises where the file is not a whole entry)."""
    with open(path, "rb") as f:
        blob = f.read()
    if not blob.startswith(_MAGIC):
        raise ValueError("not an entry of this format")
    return pickle.loads(zlib.decompress(blob[len(_MAGIC):]))


def load(root, name, digest, argtypes):
    """numba's compiled kernel stored under ``digest``, or None (no entry, an entry
    that fails to load, or one for another signature). A hit marks the entry used
    (its mtime), which :func:`prune` keeps longest."""
    path = _path(root, name, digest)
    try:
        kernel = read(path)
        stored = tuple(kernel.signature.args)
        if stored != tuple(argtypes):
            raise ValueError(f"stored for signature {stored}")
    except FileNotFoundError:
        _miss(name, "no entry")
        return None
    except Exception as e:  # truncated or stale: compile again, overwrite it
        _miss(name, f"{type(e).__name__}: {str(e)[:500]}")
        return None
    try:
        os.utime(path)
    except OSError:
        pass
    _count("hits")
    return kernel


def store(root, name, digest, kernel):
    """Write numba's compiled ``kernel`` under ``digest`` (atomically: a reader sees
    the old file or the whole new one), then :func:`prune` the directory to
    :func:`max_bytes`. Returns whether it was written; a kernel numba cannot
    serialize, or a directory that cannot be written, is skipped."""
    try:
        blob = _MAGIC + zlib.compress(pickle.dumps(kernel, protocol=pickle.HIGHEST_PROTOCOL), 1)
        os.makedirs(root, mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=root, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
            os.replace(tmp, _path(root, name, digest))
        except BaseException:
            os.unlink(tmp)
            raise
    except Exception:
        return False
    _count("stores")
    try:
        prune(root)
    except OSError:
        pass
    return True


def max_bytes():
    """The cache's size bound: ``NUMBA_FUSED_CACHE_MAX_MB`` (a positive number of
    MiB) where set, else 1024 MiB."""
    try:
        mb = float(os.environ.get(MAX_ENV, ""))
    except ValueError:
        mb = DEFAULT_MAX_MB
    if not mb > 0:
        mb = DEFAULT_MAX_MB
    return int(mb * 2**20)


def prune(root, limit=None):
    """Remove the least recently used entries under ``root`` (by mtime: a store or a
    hit) until their bytes are at most ``limit`` (default :func:`max_bytes`); none
    where there is no such directory. Entries this package's edits or a numba upgrade
    left unreachable are never hit again, so they go first. Returns how many were
    removed."""
    limit = max_bytes() if limit is None else limit
    found = _scan(root)
    total = sum(size for _, _, size in found)
    removed = 0
    for _, n, size in sorted(found):
        if total <= limit:
            break
        try:
            os.unlink(os.path.join(root, n))
            removed += 1
        except FileNotFoundError:
            pass
        total -= size
    return removed


def entries(root=None):
    """(count, bytes) of the entries under ``root`` (default: :func:`cache_dir`);
    (0, 0) where there is none."""
    root = root or cache_dir()
    found = _scan(root) if root else []
    return len(found), sum(size for _, _, size in found)


def _scan(root):
    """(mtime_ns, name, bytes) of each entry under ``root``; [] where there is no such
    directory. An entry removed while it is listed (another process pruning or
    clearing) is left out."""
    if not os.path.isdir(root):
        return []
    found = []
    with os.scandir(root) as it:
        for e in it:
            if e.name.endswith(_SUFFIX):
                try:
                    st = e.stat()
                except FileNotFoundError:
                    continue
                found.append((st.st_mtime_ns, e.name, st.st_size))
    return found


def clear(root=None):
    """Remove the entries (and any temporary file a killed writer left) under
    ``root`` (default: :func:`cache_dir`); other files are left alone. Returns how many
    entries were removed."""
    root = root or cache_dir()
    if not root or not os.path.isdir(root):
        return 0
    removed = 0
    for name in os.listdir(root):
        if name.endswith((_SUFFIX, ".tmp")):
            try:
                os.unlink(os.path.join(root, name))
            except FileNotFoundError:
                continue
            if name.endswith(_SUFFIX):
                removed += 1
    return removed


def main(argv=None):
    """``python -m numba_fused.kernel_cache [--clear | --prune]``: where the cache is
    (or why it is off), its entries and bytes against the bound; ``--clear`` removes
    every entry, ``--prune`` the least recently used ones past the bound."""
    import argparse

    ap = argparse.ArgumentParser(
        prog="python -m numba_fused.kernel_cache",
        description="Where numba-fused's kernel cache is (or why it is off), and its "
                    "entries and bytes against its bound.")
    act = ap.add_mutually_exclusive_group()
    act.add_argument("--clear", action="store_true", help="remove every entry")
    act.add_argument("--prune", action="store_true",
                     help=f"remove the least recently used entries past {MAX_ENV}")
    args = ap.parse_args(argv)
    root, why_off = _resolve()
    if root is None:
        print(f"kernel cache: off ({why_off})")
        return 0
    if args.clear:
        print(f"removed {clear(root)} entries")
    elif args.prune:
        print(f"removed {prune(root)} entries")
    count, size = entries(root)
    print(f"kernel cache: {root}\nentries: {count}, {size / 2**20:.1f} MiB "
          f"(bound {max_bytes() / 2**20:g} MiB, {MAX_ENV})")
    return 0


if __name__ == "__main__":
    # Run as a script this file is module __main__; the package's own module holds
    # the package name and the counters.
    from numba_fused import kernel_cache as _self

    sys.exit(_self.main())
