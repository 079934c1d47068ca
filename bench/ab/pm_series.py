"""Print the PM-sampling time series in ncu reports (bench/ab/ncu_pm.sh's): per
metric, the samples in order, bucketed into ``--buckets`` spans of the kernel's
duration (mean of each), so two kernels' DRAM throughput over time can be compared
(sixty-first session: where ours leaves the DRAM idle).

    python3 bench/ab/pm_series.py REPORT.ncu-rep [...] [--buckets 20]

Needs Nsight Compute's ``ncu_report`` module (its extras/python folder, found
beside the ``ncu`` on PATH).
"""

import argparse
import glob
import os
import shutil
import sys


def _import_ncu_report():
    ncu = shutil.which("ncu")
    if ncu is None:
        raise SystemExit("ncu is not on PATH")
    root = os.path.dirname(os.path.realpath(ncu))
    for cand in glob.glob(os.path.join(root, "**", "extras", "python"), recursive=True) + \
            glob.glob(os.path.join(root, "..", "**", "extras", "python"), recursive=True):
        if os.path.exists(os.path.join(cand, "ncu_report.py")):
            sys.path.insert(0, cand)
            break
    import ncu_report
    return ncu_report


def series(action, name):
    m = action.metric_by_name(name)
    if m is None:
        return None
    n = m.num_instances()
    return [m.as_double(i) for i in range(n)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reports", nargs="+")
    ap.add_argument("--buckets", type=int, default=20)
    args = ap.parse_args(argv)
    ncu_report = _import_ncu_report()
    for path in args.reports:
        ctx = ncu_report.load_report(path)
        act = ctx.range_by_idx(0).action_by_idx(0)
        allnames = list(act.metric_names())
        names = sorted(n for n in allnames if "pmsampling" in n.lower()
                       or (act.metric_by_name(n).num_instances() > 20))
        print(f"== {os.path.basename(path)}: {act.name()[:60]}; {len(names)} sampled metrics "
              f"of {len(allnames)}")
        if not names:
            print("metric names:", " ".join(sorted(allnames)))
        for name in names:
            vals = series(act, name)
            if not vals:
                continue
            k = args.buckets
            per = max(1, len(vals) // k)
            means = [sum(vals[i:i + per]) / len(vals[i:i + per])
                     for i in range(0, per * k, per) if vals[i:i + per]]
            print(f"{name} ({len(vals)} samples): " + " ".join(f"{v:.4g}" for v in means))


if __name__ == "__main__":
    main()
