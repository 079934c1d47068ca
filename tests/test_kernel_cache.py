"""The on-disk kernel cache (numba_fused.kernel_cache; on by default).

The keys (every shipped kernel keyed, no two alike, the same in another process) and
numba's compiled form surviving a store and a load in another process are checked
without a GPU (``ptx``: real numba typing and NVVM); the cache serving a second
process's launches, with the same output bits, needs one (``gpu``)."""

import json
import os
import pickle
import subprocess
import sys
import textwrap
import types as pytypes

import numpy as np
import pytest

from numba_fused import kernel_cache as kc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULES = ("dropout", "layer_norm", "attention", "linear_act", "gated_linear")


def _closure(value):
    def kernel(a):
        a[0] = value
    return kernel


def _with_global(value):
    """A function reading global G, made with its own globals dict holding G = value."""
    src = compile("def kernel(a):\n    a[0] = G\n", "<k>", "exec")
    g = {"G": value}
    exec(src, g)
    return g["kernel"]


def _with_module_attr(module_name, value):
    """A function reading m.X, m a module named ``module_name`` with X = value."""
    mod = pytypes.ModuleType(module_name)
    mod.X = value
    g = {"m": mod}
    exec(compile("def kernel(a):\n    a[0] = m.X\n", "<k>", "exec"), g)
    return g["kernel"]


def test_fingerprint_follows_the_values_numba_freezes():
    """Closure cells and the globals a function names are part of its fingerprint
    (numba compiles them in as constants); separately made closures of equal values
    agree; floats by their bits (0.0 and -0.0 give different code)."""
    assert kc.fingerprint(_closure(3)) == kc.fingerprint(_closure(3))
    assert kc.fingerprint(_closure(3)) != kc.fingerprint(_closure(4))
    assert kc.fingerprint(_closure(3)) != kc.fingerprint(_closure(3.0))
    assert kc.fingerprint(_closure(0.0)) != kc.fingerprint(_closure(-0.0))
    assert kc.fingerprint(_closure(np.float32(1))) != kc.fingerprint(_closure(np.float64(1)))
    assert kc.fingerprint(_closure((1, "a"))) != kc.fingerprint(_closure((1, "b")))
    assert kc.fingerprint(_with_global(7)) == kc.fingerprint(_with_global(7))
    assert kc.fingerprint(_with_global(7)) != kc.fingerprint(_with_global(8))
    # numba freezes module.X too: this package's modules' attributes are walked
    # (a tuning may rebind one); others' stand for their version.
    ours = kc._PACKAGE + ".some_module"
    assert kc.fingerprint(_with_module_attr(ours, 1)) != kc.fingerprint(_with_module_attr(ours, 2))
    assert (kc.fingerprint(_with_module_attr("elsewhere", 1))
            == kc.fingerprint(_with_module_attr("elsewhere", 2)))
    # A helper in a cell is described by its own code and cells.
    assert kc.fingerprint(_closure(_closure(1))) != kc.fingerprint(_closure(_closure(2)))


def test_unkeyable_values_turn_the_cache_off_for_that_kernel(monkeypatch):
    """A mutable container (or an object without a stable description) in a cell: no
    fingerprint, and key() answers None and counts the kernel as unkeyed."""
    with pytest.raises(kc.Unkeyable):
        kc.fingerprint(_closure({"a": 1}))
    with pytest.raises(kc.Unkeyable):
        kc.fingerprint(_closure(object()))
    monkeypatch.setattr(kc, "_environment", lambda: ("env",))
    before = kc.stats()["unkeyed"]
    assert kc.key(_closure({"a": 1}), (), {}, (9, 0)) is None
    assert kc.stats()["unkeyed"] == before + 1


def test_numba_redirect_shims_key_as_the_module_they_stand_for():
    """``numba.types`` (once imported, the ``types`` attribute of ``numba``) and
    ``numba.core.types`` freeze the same names into a kernel: one fingerprint."""
    import importlib

    shim = importlib.import_module("numba.types")
    real = importlib.import_module("numba.core.types")
    assert shim is not real and shim.__name__ != real.__name__
    assert kc.fingerprint(_closure(shim)) == kc.fingerprint(_closure(real))
    assert kc.fingerprint(_closure(shim)) != kc.fingerprint(_closure(np))


def test_fingerprint_takes_a_function_only():
    """Not a Python function (None, a number, a builtin, a bound method): TypeError
    naming the argument."""
    for bad in (None, 3, print, _Compiled(("a",), b"").__init__):
        with pytest.raises(TypeError, match="fn must be a Python function"):
            kc.fingerprint(bad)


def test_key_covers_signature_options_and_device(monkeypatch):
    from numba.core import types

    monkeypatch.setattr(kc, "_environment", lambda: ("env",))
    fn = _closure(1)
    f32 = (types.Array(types.float32, 1, "C"),)
    base = kc.key(fn, f32, {"fastmath": False}, (9, 0))
    assert base == kc.key(_closure(1), f32, {"fastmath": False}, (9, 0))
    assert base != kc.key(fn, (types.Array(types.float16, 1, "C"),), {"fastmath": False}, (9, 0))
    assert base != kc.key(fn, f32, {"fastmath": True}, (9, 0))
    assert base != kc.key(fn, f32, {"fastmath": False}, (8, 0))
    monkeypatch.setattr(kc, "_environment", lambda: ("other env",))
    assert base != kc.key(fn, f32, {"fastmath": False}, (9, 0))


class _Compiled:
    """Stands in for numba's compiled kernel: what load() checks is its signature."""

    def __init__(self, args, payload):
        self.signature = pytypes.SimpleNamespace(args=args)
        self.payload = payload


def test_store_and_load(tmp_path):
    """An entry comes back whole (stored compressed); another signature, a truncated
    file, one of another format or a missing one are misses; a directory that cannot
    be made skips the store."""
    root = str(tmp_path / "cache")
    digest = "ab" * 32
    start = kc.stats()
    assert kc.load(root, "k", digest, ("a",)) is None
    assert kc.misses()["k"] == "no entry"
    assert kc.store(root, "k/1 x", digest, _Compiled(("a",), b"x" * 1000))
    assert oct(os.stat(root).st_mode & 0o777) == oct(0o700)
    names = os.listdir(root)
    assert len(names) == 1 and names[0].endswith(".nfk") and "/" not in names[0]
    assert os.path.getsize(os.path.join(root, names[0])) < 500  # compressed
    got = kc.load(root, "k/1 x", digest, ("a",))
    assert got.payload == b"x" * 1000
    assert kc.load(root, "k/1 x", digest, ("b",)) is None
    assert kc.misses()["k/1 x"] == "ValueError: stored for signature ('a',)"
    path = os.path.join(root, names[0])
    with open(path, "r+b") as f:
        f.truncate(10)
    assert kc.load(root, "k/1 x", digest, ("a",)) is None
    assert kc.misses()["k/1 x"].startswith("error: Error -5")  # zlib: truncated stream
    with open(path, "wb") as f:
        pickle.dump(_Compiled(("a",), b"x"), f)  # the uncompressed format before it
    assert kc.load(root, "k/1 x", digest, ("a",)) is None
    assert kc.misses()["k/1 x"] == "ValueError: not an entry of this format"
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert not kc.store(str(blocked / "sub"), "k", digest, _Compiled(("a",), b""))
    end = kc.stats()
    assert end["hits"] - start["hits"] == 1
    assert end["misses"] - start["misses"] == 4
    assert end["stores"] - start["stores"] == 1
    assert [n for n in os.listdir(root) if n.endswith(".tmp")] == []


def test_concurrent_stores_leave_whole_entries(tmp_path):
    """Writers racing on one key (pytest workers, two training ranks): every load
    after the first store finds a whole entry, and no temporary file is left."""
    from concurrent.futures import ThreadPoolExecutor

    root = str(tmp_path)
    digest = "ef" * 32
    assert kc.store(root, "race", digest, _Compiled(("a",), b"0" * 200_000))

    def work(i):
        found = []
        for j in range(20):
            assert kc.store(root, "race", digest, _Compiled(("a",), bytes([i]) * 200_000))
            got = kc.load(root, "race", digest, ("a",))
            found.append(got is not None and len(got.payload) == 200_000
                         and len(set(got.payload)) == 1)
        return all(found)

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(work, range(8)))
    assert os.listdir(root) == [n for n in os.listdir(root) if n.endswith(".nfk")]
    assert len(os.listdir(root)) == 1


def test_prune_removes_the_least_recently_used(monkeypatch, tmp_path):
    """Over the bound, the entries stored or hit longest ago go first; a hit counts as
    a use; a store prunes to NUMBA_FUSED_CACHE_MAX_MB (a bad value: the default)."""
    root = str(tmp_path)
    monkeypatch.delenv(kc.MAX_ENV, raising=False)
    assert kc.max_bytes() == 1024 * 2**20
    for bad in ("x", "0", "-3", "nan"):
        monkeypatch.setenv(kc.MAX_ENV, bad)
        assert kc.max_bytes() == 1024 * 2**20, bad
    monkeypatch.setenv(kc.MAX_ENV, "0.5")
    assert kc.max_bytes() == 2**19
    monkeypatch.setenv(kc.MAX_ENV, "1024")
    rng = np.random.default_rng(0)
    paths = []
    for i in range(5):
        assert kc.store(root, f"k{i}", f"{i:064x}", _Compiled(("a",), rng.bytes(100_000)))
        paths.append(kc._path(root, f"k{i}", f"{i:064x}"))
        os.utime(paths[-1], (1000 + i, 1000 + i))
    size = os.path.getsize(paths[0])
    assert 100_000 < size < 101_000 and kc.entries(root) == (5, 5 * size)
    assert kc.load(root, "k0", f"{0:064x}", ("a",)) is not None  # k0 now the newest
    assert kc.prune(root, limit=5 * size) == 0
    assert kc.prune(os.path.join(root, "absent")) == 0
    assert kc.prune(root, limit=3 * size + 1) == 2
    assert sorted(os.listdir(root)) == sorted(os.path.basename(p) for p in (paths[0], paths[3], paths[4]))
    monkeypatch.setenv(kc.MAX_ENV, str(2.5 * size / 2**20))
    assert kc.store(root, "k5", f"{5:064x}", _Compiled(("a",), rng.bytes(100_000)))
    assert sorted(os.listdir(root)) == sorted(
        [os.path.basename(paths[0]), os.path.basename(kc._path(root, "k5", f"{5:064x}"))])


def test_entries_and_clear(monkeypatch, tmp_path):
    """entries() counts the entries and their bytes, clear() removes them and stray
    temporary files, and touches nothing else; both default to the directory the
    environment names and answer 0 where there is none."""
    monkeypatch.setenv(kc.ENV, str(tmp_path))
    for i in range(3):
        assert kc.store(str(tmp_path), f"k{i}", f"{i:064x}", _Compiled(("a",), b"x" * 100))
    (tmp_path / "stray.tmp").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("mine")
    count, size = kc.entries()
    assert count == 3 and size > 300
    assert kc.clear() == 3
    assert sorted(os.listdir(tmp_path)) == ["notes.txt"]
    assert kc.entries() == (0, 0)
    assert kc.entries(str(tmp_path / "absent")) == (0, 0) and kc.clear(str(tmp_path / "absent")) == 0
    monkeypatch.setenv(kc.DISABLE_ENV, "1")
    assert kc.entries() == (0, 0) and kc.clear() == 0


def test_command_line_reports_prunes_and_clears(tmp_path):
    """python -m numba_fused.kernel_cache: the directory and its entries, --prune to the
    bound, --clear, and why the cache is off when it is."""
    root = tmp_path / "cache"
    rng = np.random.default_rng(1)
    for i in range(3):
        assert kc.store(str(root), f"k{i}", f"{i:064x}", _Compiled(("a",), rng.bytes(300_000)))
        os.utime(kc._path(str(root), f"k{i}", f"{i:064x}"), (1000 + i, 1000 + i))

    def cli(*args, **env):
        base = {k: v for k, v in os.environ.items() if k not in (kc.ENV, kc.DISABLE_ENV, kc.MAX_ENV)}
        out = subprocess.run([sys.executable, "-m", "numba_fused.kernel_cache", *args],
                             env=dict(base, PYTHONPATH=ROOT, **env), cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout

    got = cli(NUMBA_FUSED_CACHE_DIR=str(root))
    assert f"kernel cache: {root}\nentries: 3, 0.9 MiB (bound 1024 MiB" in got
    got = cli("--prune", NUMBA_FUSED_CACHE_DIR=str(root), NUMBA_FUSED_CACHE_MAX_MB="0.4")
    assert got.startswith("removed 2 entries\n") and "entries: 1, 0.3 MiB (bound 0.4 MiB" in got
    assert os.listdir(root) == [os.path.basename(kc._path(str(root), "k2", f"{2:064x}"))]
    assert cli("--clear", NUMBA_FUSED_CACHE_DIR=str(root)).startswith("removed 1 entries\n")
    assert os.listdir(root) == []
    got = cli(NUMBA_FUSED_CACHE_DIR=str(root), NUMBA_FUSED_DISABLE_CACHE="1")
    assert got == "kernel cache: off (NUMBA_FUSED_DISABLE_CACHE=1)\n"
    root.chmod(0o777)
    got = cli(NUMBA_FUSED_CACHE_DIR=str(root))
    assert got.startswith(f"kernel cache: off ({root} belongs to another user")


def test_cache_dir_from_the_environment(monkeypatch, tmp_path):
    """On by default under $XDG_CACHE_HOME (absolute) or ~/.cache; NUMBA_FUSED_CACHE_DIR
    (not empty) names another; NUMBA_FUSED_DISABLE_CACHE (not "" or "0") turns it off."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    for var in (kc.ENV, kc.DISABLE_ENV, "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    assert kc.cache_dir() == str(home / ".cache" / "numba_fused")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    assert kc.cache_dir() == str(home / ".cache" / "numba_fused")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert kc.cache_dir() == str(tmp_path / "xdg" / "numba_fused")
    monkeypatch.setenv(kc.ENV, "")
    assert kc.cache_dir() == str(tmp_path / "xdg" / "numba_fused")
    monkeypatch.setenv(kc.ENV, str(tmp_path / "mine"))
    assert kc.cache_dir() == str(tmp_path / "mine")
    monkeypatch.setenv(kc.DISABLE_ENV, "0")
    assert kc.cache_dir() == str(tmp_path / "mine")
    for off in ("1", "yes"):
        monkeypatch.setenv(kc.DISABLE_ENV, off)
        assert kc.cache_dir() is None
    assert kc.entries() == (0, 0)


def test_a_directory_others_can_write_is_not_used(monkeypatch, tmp_path):
    """Entries are unpickled, so a cache directory that group or others may write (or
    that is not a directory) turns the cache off; one that does not exist yet is used
    (store creates it 0o700)."""
    monkeypatch.delenv(kc.DISABLE_ENV, raising=False)
    root = tmp_path / "cache"
    monkeypatch.setenv(kc.ENV, str(root))
    assert kc.cache_dir() == str(root)
    assert kc.store(str(root), "k", "0" * 64, _Compiled(("a",), 1))
    assert (root.stat().st_mode & 0o777) == 0o700 and kc.cache_dir() == str(root)
    for mode in (0o770, 0o707, 0o722):
        root.chmod(mode)
        assert kc.cache_dir() is None, oct(mode)
    root.chmod(0o755)
    assert kc.cache_dir() == str(root)
    monkeypatch.setenv(kc.ENV, kc._path(str(root), "k", "0" * 64))
    assert kc.cache_dir() is None
    monkeypatch.setattr(kc.os, "getuid", lambda: os.stat(root).st_uid + 1)
    monkeypatch.setenv(kc.ENV, str(root))
    assert kc.cache_dir() is None


def _shipped():
    import importlib

    out = []
    for mod in MODULES:
        m = importlib.import_module("numba_fused." + mod)
        out += sorted({k.name: k for k in m.shipped_kernels()}.values(), key=lambda k: k.name)
    return out


_KEYS_SCRIPT = textwrap.dedent("""
    import hashlib, importlib, sys
    from numba_fused import kernel_cache as kc
    h = hashlib.sha256()
    for mod in sys.argv[1].split(","):
        m = importlib.import_module("numba_fused." + mod)
        for k in sorted({k.name: k for k in m.shipped_kernels()}.values(), key=lambda k: k.name):
            h.update((k.name + kc.key(k.pyfunc, k.argtypes, k.jit_options, (9, 0))).encode())
    print(h.hexdigest())
""")


@pytest.mark.ptx
def test_every_shipped_kernel_has_its_own_key():
    """Every kernel the ops ship is keyed (none falls back to compiling) and no two
    share a key; another process, under other hash seeds, computes the same keys, and
    so does one that imports ``numba.types`` (numba's shim for ``numba.core.types``)
    before this package's modules, as numba-cuda does while compiling some kernels."""
    import hashlib

    h = hashlib.sha256()
    seen = {}
    for k in _shipped():
        digest = kc.key(k.pyfunc, k.argtypes, k.jit_options, (9, 0))
        assert digest is not None, k.name
        assert digest not in seen, (seen.get(digest), k.name)
        seen[digest] = k.name
        h.update((k.name + digest).encode())
    assert len(seen) > 2000
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    for seed, first in (("1", ""), ("2", "import numba.types\n")):
        env["PYTHONHASHSEED"] = seed
        out = subprocess.run([sys.executable, "-c", first + _KEYS_SCRIPT, ",".join(MODULES)],
                             env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.strip() == h.hexdigest()


_ORDER_SCRIPT = textwrap.dedent("""
    import importlib, sys
    import numba_fused.layer_norm as ln
    from numba_fused import kernel_cache as kc
    from numba_fused.registry import offline_compile
    if sys.argv[1] == "compile":
        k = sorted({k.name: k for k in ln.shipped_kernels()}.values(), key=lambda k: k.name)[0]
        with offline_compile():
            k.ptx()
    for mod in ("dropout", "attention"):
        m = importlib.import_module("numba_fused." + mod)
        for k in sorted({k.name: k for k in m.shipped_kernels()}.values(),
                        key=lambda k: k.name)[:40]:
            print(k.name, kc.key(k.pyfunc, k.argtypes, k.jit_options, (9, 0)))
""")


@pytest.mark.ptx
def test_keys_do_not_depend_on_what_compiled_first():
    """The seventy-third session's miss: a process that compiled a LayerNorm kernel
    before its first dropout or attention call keyed those kernels one way, one that
    loaded the LayerNorm kernel from the cache another. The same keys either way."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    outs = []
    for first in ("compile", "load"):
        out = subprocess.run([sys.executable, "-c", _ORDER_SCRIPT, first], env=env, cwd=ROOT,
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-2000:]
        outs.append(out.stdout.split())
    assert len(outs[0]) == 160 and outs[0] == outs[1]


_LOAD_SCRIPT = textwrap.dedent("""
    import json, sys, time
    from numba_fused import kernel_cache as kc
    t0 = time.perf_counter()
    kernel = kc.read(sys.argv[1])
    lib = kernel._codelibrary
    cc = tuple(json.loads(sys.argv[2]))
    print(json.dumps({"ptx": lib._ptx_cache[cc], "cubin": bytes(lib._cubin_cache[cc].code).hex(),
                      "entry": kernel.entry_name, "args": [str(a) for a in kernel.signature.args],
                      "seconds": time.perf_counter() - t0}))
""")


@pytest.mark.ptx
def test_numba_compiled_kernel_survives_a_store_and_a_load(tmp_path, monkeypatch):
    """A shipped LayerNorm kernel compiled by numba without a GPU (as
    ``Kernel._compiled`` compiles it on one, but for sm_90a given, not asked of a
    device), stored by kernel_cache and loaded by another process: the same PTX,
    cubin, entry point and signature, with nothing compiled there."""
    from numba import cuda

    from numba_fused import layer_norm as ln
    from numba_fused.registry import offline_compile

    dispatch = sys.modules[type(cuda.jit(device=True)(lambda: None)).__module__]
    codegen = sys.modules[dispatch.__name__.replace("dispatcher", "codegen")]
    cc = (9, 0, "a")  # what numba compiles for on an sm_90 device
    monkeypatch.setattr(codegen.CUDACodeLibrary, "_ensure_cc",
                        lambda self, want: cc if want is None else want)
    k = ln.make_plain_forward_kernel("float16", False, True, True, 4, 32, 4)
    with offline_compile():
        options = cuda.jit(**k.jit_options)(k.pyfunc).targetoptions
        compiled = dispatch._Kernel(k.pyfunc, k.argtypes, **options)
        cubin = bytes(compiled._codelibrary.get_cubin(cc).code)
    ptx = compiled._codelibrary.get_asm_str(cc)
    assert ".entry" in ptx and len(cubin) > 1000
    root = str(tmp_path)
    digest = "cd" * 32
    assert kc.store(root, k.name, digest, compiled)
    (path,) = [os.path.join(root, n) for n in os.listdir(root)]
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    out = subprocess.run([sys.executable, "-c", _LOAD_SCRIPT, path, json.dumps(cc)], env=env,
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout)
    assert got["ptx"] == compiled._codelibrary._ptx_cache[cc]
    assert got["cubin"] == cubin.hex()
    assert got["entry"] == compiled.entry_name
    assert got["args"] == [str(a) for a in k.argtypes]
    assert got["seconds"] < 5
    loaded = kc.load(root, k.name, digest, k.argtypes)
    assert loaded is not None and loaded.entry_name == compiled.entry_name
    assert kc.read(path).entry_name == compiled.entry_name
    assert os.path.getsize(path) < len(pickle.dumps(compiled)) / 3  # LLVM IR, PTX compress


_RUN_SCRIPT = textwrap.dedent("""
    import hashlib, json, time
    import numpy as np
    import torch
    import numba_fused as nf
    from numba_fused import kernel_cache as kc
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(4099, 1024, device="cuda", dtype=torch.float16, generator=g)
    w = torch.randn(1024, device="cuda", dtype=torch.float16, generator=g)
    b = torch.randn(1024, device="cuda", dtype=torch.float16, generator=g)
    t0 = time.perf_counter()
    y, mean, rstd = nf.layer_norm_forward(x, w, b)
    out = nf.dropout_bias_act_forward(x, b, p=0.1, seed=5, activation="gelu")
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    h = hashlib.sha256()
    for t in (y, mean, rstd, out):
        h.update(torch.as_tensor(t).view(-1).view(torch.uint8).cpu().numpy().tobytes())
    print(json.dumps({"stats": kc.stats(), "misses": kc.misses(), "bits": h.hexdigest(),
                      "seconds": seconds}))
""")


@pytest.mark.gpu
@pytest.mark.timeout(900)
@pytest.mark.parametrize("where", ["env", "default"])
def test_cache_serves_a_second_process(tmp_path, where):
    """A process compiles and stores its kernels (in NUMBA_FUSED_CACHE_DIR, or with
    nothing set in the default directory under $XDG_CACHE_HOME); a second one loads
    all of them (no miss, no store) and writes the same bits, which are also those of
    a process with the cache turned off."""
    root = tmp_path / "cache" if where == "env" else tmp_path / "xdg" / "numba_fused"

    def run(cache):
        env = dict(os.environ, PYTHONPATH=ROOT, XDG_CACHE_HOME=str(tmp_path / "xdg"))
        env.pop(kc.ENV, None)
        env.pop(kc.DISABLE_ENV, None)
        if not cache:
            env[kc.DISABLE_ENV] = "1"
        elif where == "env":
            env[kc.ENV] = str(root)
        out = subprocess.run([sys.executable, "-c", _RUN_SCRIPT], env=env, cwd=ROOT,
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    first = run(True)
    second = run(True)
    plain = run(False)
    assert first["stats"]["stores"] >= 2 and first["stats"]["hits"] == 0, first
    assert kc.entries(str(root))[0] == first["stats"]["stores"]
    assert second["stats"]["hits"] == first["stats"]["stores"], (first, second)
    assert second["stats"]["misses"] == 0 and second["stats"]["stores"] == 0, second
    assert first["bits"] == second["bits"] == plain["bits"]
    assert plain["stats"] == {"hits": 0, "misses": 0, "stores": 0, "unkeyed": 0}
    assert sorted(os.listdir(tmp_path)) == (["cache"] if where == "env" else ["xdg"])


def test_kernel_compiled_reads_and_fills_the_cache(monkeypatch, tmp_path):
    """Kernel._compiled's flow, with numba's compile and the device stood in for:
    turned off, no key is made and nothing is written; on, a miss compiles and
    stores, the next Kernel of the same specialisation loads that entry and compiles
    nothing; an unkeyable kernel compiles and stores nothing."""
    from numba.core import types

    from numba_fused import launch

    monkeypatch.setattr(kc, "_environment", lambda: ("env",))
    monkeypatch.setattr(launch.cuda, "get_current_device",
                        lambda: pytypes.SimpleNamespace(compute_capability=(9, 0)))
    argtypes = (types.Array(types.float32, 1, "C"),)
    compiles = []

    def kernel(value):
        k = launch.Kernel("cache_flow", _closure(value), argtypes)

        class Dispatcher:
            @property
            def overloads(self):
                compiles.append(k.name)
                return {argtypes: _Compiled(argtypes, value)}

        k.__dict__["dispatcher"] = Dispatcher()
        return k

    monkeypatch.setenv(kc.ENV, str(tmp_path))
    monkeypatch.setenv(kc.DISABLE_ENV, "1")
    start = kc.stats()
    assert kernel(1)._compiled.payload == 1 and len(compiles) == 1
    assert kc.stats() == start and not os.listdir(tmp_path)
    monkeypatch.delenv(kc.DISABLE_ENV)
    assert kernel(2)._compiled.payload == 2 and len(compiles) == 2
    assert kc.stats()["stores"] == start["stores"] + 1
    assert kernel(2)._compiled.payload == 2 and len(compiles) == 2  # loaded
    assert kc.stats()["hits"] == start["hits"] + 1
    assert kernel({"unkeyable": 1})._compiled.payload == {"unkeyable": 1}
    assert len(compiles) == 3 and kc.stats()["stores"] == start["stores"] + 1
    assert len(os.listdir(tmp_path)) == 1
