"""netweave map against Scotch's `scotch_gmap`, side by side on the same graphs and tori.

For every case: Scotch maps the symmetrised traffic graph onto a `torus3D` target (the whole
`scotch_gmap -b0` run is timed: reading, mapping, writing; `-b0` asks for one rank per host);
netweave starts from full-depth BISEM (geometric cuts when the pattern is a stencil, METIS
otherwise; greedy for the unstructured random graph, followed there by swap descent,
`mapping.descend`, within what is left of Scotch's time), and anneals on hop-bytes for
whatever then remains, so "ours" never takes longer than Scotch; a second column
anneals for a fixed longer budget. Both results are scored by netweave's exact cost under
dimension-order routes.

    python benches/mapping_vs_scotch.py [--budget 10] [--large] [--shuffle SEED] [--discovery]

`--large` adds the 65,536-rank stencil on a 16x64x64 torus (needs the lattice network model
that computes dimension-order routes from coordinates). `--shuffle SEED` renumbers the ranks
of every pattern by a seeded random permutation before either mapper sees it, as a trace from
an application that numbered its ranks its own way would: the stencils' geometry is then in the
graph only, and netweave finds it by structure discovery (`netweave.mapping.structure`).
`--discovery` instead times structure discovery on shuffled periodic stencils from 512 to
65,536 ranks against Scotch's whole run on the same graph.

Needs Debian's `scotch` package (the `scotch_gmap` command); prints a note and exits if absent.
"""

from __future__ import annotations

import argparse
import functools
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

import netweave
from netweave import mapping

CASES = [
    # (name, pattern spec, torus dims, netweave's start: full-depth BISEM for structured
    # patterns; for an unstructured graph, greedy — BISEM costs more than Scotch's whole run)
    ("stencil 16x16x16 on 16^3", "stencil:16x16x16:4096", [16, 16, 16], "bisem-full"),
    ("stencil 8x8x64 on 16^3", "stencil:8x8x64:4096", [16, 16, 16], "bisem-full"),
    ("stencil 32x32x4 on 16^3", "stencil:32x32x4:4096", [16, 16, 16], "bisem-full"),
    ("bruck 4096 on 16^3", "bruck:4096:2048", [16, 16, 16], "bisem-full"),
    ("random deg 6 on 8^3", "random:512:6:4096:1", [8, 8, 8], "greedy"),
]

LARGE_CASES = [
    ("stencil 64x64x16 on 16x64x64", "stencil:64x64x16:4096", [16, 64, 64], "bisem-full"),
]


def scotch_graph(pattern, path: Path) -> None:
    """Write the symmetrised pattern as a Scotch source graph with edge weights."""
    src, dst, nbytes = (a.tolist() for a in pattern.arrays())
    n = pattern.num_ranks
    adj: list[dict[int, int]] = [dict() for _ in range(n)]
    for s, d, b in zip(src, dst, nbytes):
        adj[s][d] = adj[s].get(d, 0) + b
        adj[d][s] = adj[d].get(s, 0) + b
    top = max((w for a in adj for w in a.values()), default=1)
    scale = max(1, top // (1 << 20))  # keep weights well inside 32 bits
    arcs = sum(len(a) for a in adj)
    lines = ["0", f"{n} {arcs}", "0 010"]
    for a in adj:
        items = " ".join(f"{max(1, w // scale)} {v}" for v, w in sorted(a.items()))
        lines.append(f"{len(a)} {items}".rstrip())
    path.write_text("\n".join(lines) + "\n")


def run_scotch(gmap: str, pattern, dims, tmp: Path):
    scotch_graph(pattern, tmp / "g.grf")
    (tmp / "t.tgt").write_text("torus3D " + " ".join(str(d) for d in dims) + "\n")
    t0 = time.perf_counter()
    # -b0: no load imbalance, i.e. one rank per host as netweave places them (Scotch's default
    # 5% tolerance may stack two ranks on one terminal).
    subprocess.run([gmap, "-b0", str(tmp / "g.grf"), str(tmp / "t.tgt"), str(tmp / "m.map")], check=True,
                   capture_output=True)
    seconds = time.perf_counter() - t0
    rows = (tmp / "m.map").read_text().split()[1:]
    hor = np.zeros(pattern.num_ranks, dtype=np.uint32)
    for v, dom in zip(rows[0::2], rows[1::2]):
        hor[int(v)] = int(dom)  # torus3D terminal numbers are x + X(y + Yz), our host order
    return hor, seconds, _unstack(hor, int(np.prod(dims)))


def shuffled(pattern, seed: int):
    """`pattern` with its rank numbers permuted by a seeded random permutation."""
    src, dst, nbytes = pattern.arrays()
    perm = np.random.default_rng(seed).permutation(pattern.num_ranks).astype(np.uint32)
    return mapping.Pattern.from_arrays(pattern.num_ranks, perm[src], perm[dst], nbytes, pattern.name + " (shuffled)")


def discovery_table(gmap: str, seed: int) -> None:
    """Structure discovery time against ranks, beside Scotch's whole run on the same graph."""
    print(f"{'shuffled stencil':<22}{'ranks':>8}{'found':>46}{'discovery (s)':>15}{'scotch (s)':>12}{'ratio':>8}")
    for dims, torus in [([8, 8, 8], [8, 8, 8]), ([16, 16, 16], [16, 16, 16]), ([32, 32, 16], [16, 32, 32]),
                        ([32, 32, 32], [32, 32, 32]), ([64, 64, 16], [16, 64, 64])]:
        pattern = shuffled(mapping.load_pattern("stencil:" + "x".join(map(str, dims)) + ":4096"), seed)
        t0 = time.perf_counter()
        found = mapping.structure(pattern)
        d_sec = time.perf_counter() - t0
        with tempfile.TemporaryDirectory() as d:
            _, s_sec, _ = run_scotch(gmap, pattern, torus, Path(d))
        print(f"{'x'.join(map(str, dims)):<22}{pattern.num_ranks:>8}{found['description']:>46}{d_sec:>15.3f}"
              f"{s_sec:>12.2f}{d_sec / s_sec:>8.3f}", flush=True)


def _hop_bytes(net, pattern, hor) -> int:
    """The placement `hor`'s hop-bytes."""
    return mapping.cost(net, pattern, hor)["hop_bytes"]


def _unstack(hor: np.ndarray, hosts: int) -> int:
    """Move ranks stacked on one host to the free hosts (lowest first); returns how many moved."""
    seen = np.zeros(hosts, dtype=bool)
    free = iter(np.flatnonzero(np.bincount(hor, minlength=hosts) == 0).tolist())
    moved = 0
    for r, h in enumerate(hor.tolist()):
        if seen[h]:
            hor[r] = next(free)
            moved += 1
        seen[h] = True
    return moved


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=10.0, help="the longer netweave budget in seconds")
    ap.add_argument("--large", action="store_true", help="add the 65,536-rank stencil on 16x64x64")
    ap.add_argument("--start", default=None, help="netweave's starting placement for every case "
                    "(see `netweave map --start`; default: per case)")
    ap.add_argument("--shuffle", type=int, default=None, metavar="SEED",
                    help="renumber every pattern's ranks by a random permutation with this seed")
    ap.add_argument("--discovery", action="store_true", help="time structure discovery against Scotch instead")
    ap.add_argument("--no-descent", action="store_true", help="anneal straight from the start (no swap descent)")
    args = ap.parse_args()
    gmap = shutil.which("scotch_gmap") or shutil.which("gmap")
    if gmap is None:
        print("scotch_gmap not found (Debian package 'scotch', installed by `make bench-deps`); nothing to compare")
        return
    if args.discovery:
        discovery_table(gmap, args.shuffle or 0)
        return
    print(f"{'case':<30}{'identity':>12}{'scotch':>12}{'t(s)':>7}{'ours':>12}{'t(s)':>7}{'ours/scotch':>12}"
          f"{'start':>12}{'start t(s)':>11}{'ours@budget':>12}")
    for name, spec, dims, case_start in CASES + (LARGE_CASES if args.large else []):
        topo = netweave.topology.torus(dims)
        net = mapping.network(topo, "dor:low-port")
        pattern = mapping.load_pattern(spec)
        if args.shuffle is not None:
            pattern = shuffled(pattern, args.shuffle)
        with tempfile.TemporaryDirectory() as d:
            s_hor, s_sec, stacked = run_scotch(gmap, pattern, dims, Path(d))
        if stacked:
            print(f"  (scotch stacked {stacked} ranks on busy hosts even with -b0; moved to free hosts)")
        t0 = time.perf_counter()
        start = mapping.start_placement(net, pattern, args.start or case_start, 1, "hop-bytes")
        left = s_sec - (time.perf_counter() - t0)
        if not args.no_descent and (args.start or case_start) == "greedy" and left > 0.001:
            # Swap descent inside what is left of Scotch's time (it stops itself at the limit),
            # after the greedy start of an unstructured graph; BISEM's geometric or METIS cuts
            # leave it little to do for the time its set-up takes at 4,096 ranks.
            start = mapping.descend(net, pattern, start, seconds=0.9 * left)["host_of_rank"]
        b_sec = time.perf_counter() - t0
        hb = functools.partial(_hop_bytes, net, pattern)
        ours, ours_sec = start, b_sec
        # Anneal only with time to spare (a round must fit in what is left of Scotch's time).
        left = s_sec - b_sec
        if left > 0.002:
            same = mapping.optimize(net, pattern, start, cost="hop-bytes", seconds=0.9 * left, seed=1, sweep=200,
                                    stall=max(0.5, 0.1 * left))
            ours, ours_sec = same.host_of_rank, b_sec + same.seconds
        longer = mapping.optimize(net, pattern, start, cost="hop-bytes", seconds=args.budget, seed=1)
        ident = hb(mapping.baseline(net, pattern, "identity"))
        s_hb, o_hb = hb(s_hor), hb(ours)
        print(f"{name:<30}{ident:>12.4g}{s_hb:>12.4g}{s_sec:>7.3f}{o_hb:>12.4g}{ours_sec:>7.3f}{o_hb / s_hb:>12.3f}"
              f"{hb(start):>12.4g}{b_sec:>11.2f}{hb(longer.host_of_rank):>12.4g}", flush=True)


if __name__ == "__main__":
    main()
