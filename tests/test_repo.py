"""The repository documents itself: no shipped file refers to documents outside it
(the project's brief, the lent machines' manuals, local paths) that users of the
package do not have (issue #15). The API reference is docs/API.md."""

import ast
import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTSIDE = re.compile(r"\.\./shared|\bSPEC\b|\b(?:KINDS|METHOD|HOPPER|H200)\.md\b|/work/")
SKIP_DIRS = {".git", ".venv", "__pycache__", "build", "dist", "results", ".whl"}


def _shipped_files():
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                             cwd=ROOT, capture_output=True, text=True, check=True, timeout=60)
        return [p for p in out.stdout.splitlines() if p]
    except (OSError, subprocess.SubprocessError):
        files = []
        for d, dirs, names in os.walk(ROOT):
            dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.endswith(".egg-info")]
            files += [os.path.relpath(os.path.join(d, n), ROOT) for n in names]
        return files


def test_no_file_refers_outside_the_repository():
    hits = []
    for rel in _shipped_files():
        if rel == os.path.relpath(__file__, ROOT):
            continue  # this test names the patterns it looks for
        try:
            with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # binary (plots) or removed in the work tree
        for n, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                hits.append(f"{rel}:{n}: {line.strip()[:100]}")
    assert not hits, "references outside the repository:\n" + "\n".join(hits)


def test_every_python_file_parses():
    """Every Python file of the repository is valid Python: the benchmark and
    sanitizer scripts run only on the GPU, where a syntax error would cost a device
    call (bench/sanitize.py once carried a doubled ``def`` line)."""
    bad = []
    for rel in _shipped_files():
        if not rel.endswith(".py"):
            continue
        try:
            with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
                ast.parse(f.read(), filename=rel)
        except FileNotFoundError:
            continue  # removed in the work tree
        except SyntaxError as e:
            bad.append(f"{rel}:{e.lineno}: {e.msg}")
    assert not bad, "files that do not parse:\n" + "\n".join(bad)


def test_api_reference_names_every_public_function():
    import numba_fused

    with open(os.path.join(ROOT, "docs", "API.md"), encoding="utf-8") as f:
        doc = f.read()
    public = [n for n in numba_fused.__all__ if not n.endswith("_ref")]
    public += ["layer_norm", "rms_norm", "dropout_bias_act", "scaled_dot_product_attention",
               "linear_act", "FusedLayerNorm", "FusedRMSNorm", "FusedDropoutBiasAct",
               "FusedLinearAct", "FusedMLP", "FusedAttention"]
    missing = [n for n in public if n not in doc]
    assert not missing, f"docs/API.md does not mention {missing}"
