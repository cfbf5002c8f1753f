"""One flit simulation on several threads: speed-up and the per-cycle cost of synchronising.

    .venv/bin/python benches/flitsim_threads.py [--threads 1,2] [--repeat 3]

Cases: the BookSim comparison's 16×16 torus (uniform, 0.007 packets/cycle, 10-flit packets)
and the same on a 32×32 torus; each runs to BookSim's convergence with every thread count, in
this process, best wall time of --repeat. The results must be equal field for field (the
benchmark checks). The synchronisation cost per cycle is measured on a 2×2 mesh at a load so
low that a cycle holds almost no router work: (wall per cycle with N threads) − (with 1).
"""

from __future__ import annotations

import argparse
import time

from netweave import flitsim

SPEED = {"topology": "torus", "n": 2, "routing_function": "dim_order", "num_vcs": 2, "vc_buf_size": 8,
         "packet_size": 10, "traffic": "uniform", "injection_rate": 0.007, "sample_period": 10000}
CASES = {"torus 16x16": {**SPEED, "k": 16}, "torus 32x32": {**SPEED, "k": 32, "sample_period": 4000}}
IDLE = {**SPEED, "topology": "mesh", "k": 2, "injection_rate": 0.0005, "sample_period": 50000, "warmup_periods": 1, "max_samples": 4}


def timed(cfg: dict, threads: int, repeat: int) -> tuple[float, dict]:
    best, result = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = flitsim.simulate({**cfg, "threads": threads})
        best = min(best, time.perf_counter() - t0)
    return best, result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="1,2", help="thread counts, the first is the reference")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    counts = [int(t) for t in args.threads.split(",")]
    print(f"{'case':<14}{'threads':>8}{'cycles':>9}{'wall s':>9}{'cycles/s':>11}{'speed-up':>10}")
    for name, cfg in CASES.items():
        ref_s, ref = None, None
        for t in counts:
            wall, r = timed(cfg, t, args.repeat)
            if ref is None:
                ref_s, ref = wall, r
            elif r != ref:
                raise SystemExit(f"{name}: {t} threads gave a different result than {counts[0]}")
            print(f"{name:<14}{t:>8}{r['cycles']:>9}{wall:>9.2f}{r['cycles'] / wall:>11,.0f}{ref_s / wall:>10.2f}",
                  flush=True)
    walls = {t: timed(IDLE, t, args.repeat) for t in counts}
    base_wall, base = walls[counts[0]]
    for t in counts[1:]:
        wall, r = walls[t]
        per_cycle = (wall / r["cycles"] - base_wall / base["cycles"]) * 1e6
        print(f"synchronisation, {t} threads: {per_cycle:.2f} µs per cycle "
              f"(2x2 mesh, {base_wall / base['cycles'] * 1e6:.2f} µs per cycle on one thread)")


if __name__ == "__main__":
    main()
