"""Topology generation: netweave against networkx, measured in the same run.

    .venv/bin/python benches/topology_vs_networkx.py

networkx is the peer users would otherwise script against; both build the same 32×32×32 torus
(32,768 routers, one host each) and the same LSFT incidence graph of order 17. Prints seconds
and the speed ratio.
"""

import time

import networkx as nx

from netweave import topology


def best_of(fn, repeat=3):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def nx_torus():
    g = nx.grid_graph(dim=[32, 32, 32], periodic=True)
    for i, n in enumerate(list(g.nodes)):
        g.add_edge(n, ("host", i))
    return g


def nx_lsft(q=17):
    # Incidence graph of PG(2, q) for prime q, plus q+1 servers per leaf.
    g = nx.Graph()
    pts = ["P"] + [("c", c) for c in range(q)] + [(c, r) for c in range(q) for r in range(q)]
    lines = {"L": ["P"] + [("c", c) for c in range(q)]}
    for c in range(q):
        lines[("Lc", c)] = ["P"] + [(c, i) for i in range(q)]
        for r in range(q):
            lines[("Lcr", c, r)] = [("c", c)] + [(i, (r + c * i) % q) for i in range(q)]
    for name, members in lines.items():
        for p in members:
            g.add_edge(("spine", name), ("leaf", p))
    for p in pts:
        for u in range(q + 1):
            g.add_edge(("leaf", p), ("server", p, u))
    return g


def main():
    rows = [
        ("torus 32x32x32", lambda: topology.torus([32, 32, 32], 1), nx_torus),
        ("lsft q=17", lambda: topology.latin_square_fat_tree(17), nx_lsft),
    ]
    print(f"{'case':<18}{'netweave s':>12}{'networkx s':>12}{'ratio':>8}")
    for name, ours, peer in rows:
        a, b = best_of(ours), best_of(peer)
        print(f"{name:<18}{a:>12.4f}{b:>12.4f}{b / a:>7.1f}x")


if __name__ == "__main__":
    main()
