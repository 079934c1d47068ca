"""Why a warm kernel cache misses (seventy-second session's H100 run: dropout's and
attention's kernels missed in a second process, LayerNorm's and linear's hit).

Two fresh processes over one cache directory run LayerNorm, dropout(gelu) and
attention forwards in that order; each records, per kernel, its key, the lines of its
fingerprint walk, what it stored and why a load failed. The parent prints each
process's stores and loads by kernel name (a kernel the second asks for that the first
never made shows by its name), and for every kernel whose key differs between the two
the first walk lines that differ.

Usage: python bench/ab/cache_diag.py OUTDIR
"""

import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)


def child(path):
    import torch

    import numba_fused as nf
    from numba_fused import kernel_cache as kc

    rec = {"keys": [], "loads": [], "stores": []}
    key0 = kc.key

    def key(fn, argtypes, options, cc):
        out = []
        try:
            kc._walk_function(fn, out, {})
        except Exception as e:  # noqa: BLE001 - recorded, not hidden
            out.append(f"walk raised {type(e).__name__}: {e}")
        digest = key0(fn, argtypes, options, cc)
        rec["keys"].append({"fn": fn.__qualname__, "digest": digest, "walk": out,
                            "argtypes": [str(a) for a in argtypes],
                            "options": repr(sorted(options.items())), "cc": repr(cc)})
        return digest

    load0 = kc.load

    def load(root, name, digest, argtypes):
        kernel = load0(root, name, digest, argtypes)
        why = "ok" if kernel is not None else kc.misses().get(name, "?")
        rec["loads"].append({"name": name, "digest": digest, "why": why})
        return kernel

    store0 = kc.store

    def store(root, name, digest, kernel):
        rec["stores"].append({"name": name, "digest": digest})
        return store0(root, name, digest, kernel)

    kc.key = key
    kc.load = load
    kc.store = store
    g = torch.Generator(device="cuda").manual_seed(0)
    h = torch.float16
    x = torch.randn(4096, 1024, device="cuda", dtype=h, generator=g)
    w = torch.randn(1024, device="cuda", dtype=h, generator=g)
    q = torch.randn(2, 256, 4, 64, device="cuda", dtype=h, generator=g)
    nf.layer_norm_forward(x, w, w)
    nf.dropout_bias_act_forward(x, w, p=0.1, seed=3, activation="gelu")
    nf.attention_forward(q, q, q, causal="top_left")
    torch.cuda.synchronize()
    rec["stats"] = kc.stats()
    rec["env"] = repr(kc._environment())
    with open(path, "w") as f:
        json.dump(rec, f)


def main(out_dir):
    recs = []
    with tempfile.TemporaryDirectory() as cache:
        for i in range(2):
            path = os.path.join(out_dir, f"cache_diag_{i}.json")
            env = dict(os.environ, NUMBA_FUSED_CACHE_DIR=cache, PYTHONPATH=ROOT)
            env.pop("NUMBA_FUSED_DISABLE_CACHE", None)
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", path],
                                  env=env, capture_output=True, text=True, timeout=400)
            if proc.returncode:
                print(proc.stderr[-3000:])
                return 1
            with open(path) as f:
                recs.append(json.load(f))
    a, b = recs
    print("stats", a["stats"], b["stats"])
    print("environment", "same" if a["env"] == b["env"] else f"DIFFERS\n {a['env']}\n {b['env']}")
    for i, r in enumerate(recs):
        for st in r["stores"]:
            print(f"process {i} stored", st["name"], st["digest"][:12])
        for ld in r["loads"]:
            print(f"process {i} load", ld["name"], ld["digest"][:12], ld["why"][:300])
    for ka, kb in zip(a["keys"], b["keys"]):
        same = ka["digest"] == kb["digest"]
        print("key", ka["fn"], "same" if same else "DIFFERS")
        if not same:
            for f in ("argtypes", "options", "cc"):
                if ka[f] != kb[f]:
                    print("  ", f, ka[f], "|", kb[f])
            wa, wb = ka["walk"], kb["walk"]
            print("   walk lines", len(wa), len(wb))
            shown = 0
            for j, (la, lb) in enumerate(zip(wa, wb)):
                if la != lb and shown < 6:
                    print(f"   {j}: {la[:300]}\n   {j}: {lb[:300]}")
                    shown += 1
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        child(sys.argv[2])
    else:
        sys.exit(main(sys.argv[1]))
