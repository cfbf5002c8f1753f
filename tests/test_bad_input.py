"""Hostile input to every command: each case must end with exit code 2 and one line on stderr
that names what is wrong (the option, the file or the value), with no traceback, no output file
written or changed, and no process or namespace left behind.

The cases run the CLI in this process (``netweave.cli.main``) for speed; those whose failure
comes from another program (mpirun) run the installed command. ``F/`` in a case is the shared
fixture directory, ``O/`` an empty directory of the case's own.
"""

from __future__ import annotations

import contextlib
import io
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BIN
from netweave import cli, mapping, routing, topology, traffic

#: A fabric name of this run (1-12 lowercase letters and digits), so the namespace check cannot
#: confuse another run's fabric with one of ours.
FABRIC = f"bad{os.getpid() % 10**9}"


def C(command: str, culprit: str, subprocess: bool = False):
    """A case: the command line after ``netweave`` and a text its error line must contain."""
    return pytest.param(command, culprit, subprocess, id=command[:90])


CASES = [
    # --- topo: generators ------------------------------------------------------------------
    C("topo torus --dims 0x4", "0x4"),
    C("topo torus --dims 4xx4", "4xx4"),
    C("topo torus --dims -4x4", "-4x4"),
    C("topo torus --dims 99999999999x2", "99999999999x2"),
    C("topo torus --dims 4x4 --hosts-per-router 100000000", "1600000016 nodes"),
    C("topo torus --dims 4x4 --bandwidth nan", "--bandwidth"),
    C("topo torus --dims 4x4 --bandwidth -1", "--bandwidth"),
    C("topo torus --dims 4x4 --bandwidth inf", "--bandwidth"),
    C("topo torus --dims 4x4 --latency -5", "--latency"),
    C("topo torus --dims 4x4 --latency nan", "--latency"),
    C("topo torus --dims 4x4 -o F/adir", "F/adir"),
    C("topo torus --dims 4x4 -o O/missing/dir/t.json", "O/missing/dir"),
    C("topo torus --dims 4x4 -o F/t.json/x.json", "F/t.json"),
    C("topo torus --dims 4x4 -o O/t.xyz", "O/t.xyz"),
    C("topo torus --dims 4x4 -o O/noext", "O/noext"),
    C("topo mesh --dims 4x4x", "4x4x"),
    C("topo mesh --dims ''", "dimensions"),
    C("topo lsft --order 6", "order 6"),
    C("topo lsft --order 0", "order"),
    C("topo lsft --order 1", "order"),
    C("topo lsft --order 1000", "1000"),
    C("topo lsft --order 99999999999", "--order 99999999999"),
    C("topo fattree --degree 0", "degree"),
    C("topo fattree --degree 4 --levels 7", "levels"),
    C("topo fattree --degree 100000 --levels 3", "fat-tree"),
    C("topo kary-ntree --k 0 --n 3", "arity k"),
    C("topo kary-ntree --k 64 --n 64", "k-ary n-tree"),
    C("topo pgft garbage", "garbage"),
    C("topo pgft '2; 4,4; 1,4; 1,2,3'", "in p"),
    C("topo pgft ''", "PGFT"),
    C("topo hypercube --dim 64", "dimension 64"),
    C("topo hypercube --dim 40", "dimension 40"),
    C("topo hypercube --dim 0", "dimension"),
    C("topo hyperx --dims 4x4 --trunking 0", "trunking"),
    C("topo dragonfly --a 0 --p 1 --h 1", "dragonfly a"),
    C("topo dragonfly --a 4 --p 2 --h 2 --arrangement weird", "weird"),
    C("topo dragonfly --a 4 --p 2 --h 2 --g 1000", "g = 1000"),
    C("topo random-regular --switches 5 --degree 3", "5 × 3"),
    C("topo random-regular --switches 10 --degree 20", "degree 20"),
    C("topo random-regular --switches 18446744073709551617 --degree 3", "--switches"),
    C("topo irregular --switches 2 --diameter 9", "diameter 9"),
    C("topo irregular --seed -1", "--seed"),
    C("topo tree --fanouts 0", "fanout"),
    C("topo tree --fanouts x,y", "--fanouts"),
    C("topo tree --fanouts 2 --host-bandwidth nan", "bandwidth"),
    C("topo tree --fanouts 2 --host-bandwidth 0", "bandwidth"),
    C("topo tree --fanouts 2 --switch-bandwidth 1,2,3", "--switch-bandwidth"),
    C("topo tree --fanouts 2 --switch-latency -1", "latency"),
    C("topo tree --clusters a:0", "cluster a"),
    C("topo tree --clusters ::", "cluster name"),
    C("topo tree --clusters intrigger-6.2:999", "intrigger-6.2:999"),
    C("topo tree --clusters a:2,b:2 --wan-latency nan", "latency"),
    C("topo tree --clusters a:2,a:2", "'a'"),
    C("topo tree --fanouts 2 --clusters a:2", "--clusters"),
    C("topo tree --fanouts 2 -o O/tree.net", "O/tree.net"),
    # --- topo: files -----------------------------------------------------------------------
    C("topo info F/nonexistent.json", "F/nonexistent.json"),
    C("topo info F/bad.json", "F/bad.json"),
    C("topo info F/empty.json", "F/empty.json"),
    C("topo info /dev/zero", "/dev/zero"),
    C("topo info F/adir", "F/adir"),
    C("topo info F/trunc.json", "F/trunc.json"),
    C("topo info F/t.json --format nope", "nope"),
    C("topo info F/s.json", "F/s.json"),
    C("topo info F/r.json", "F/r.json"),
    C("topo info F/t.xyz", "F/t.xyz"),
    C("topo info F/badutf8.json", "F/badutf8.json"),
    C("topo info F/unknownrate.net", "4xXYZ"),
    C("topo info F/bad.net", "F/bad.net"),
    C("topo convert F/tree.json O/tree.net", "O/tree.net"),
    C("topo convert F/t.json F/adir", "F/adir"),
    C("topo convert F/t.json O/missing/x.net", "O/missing"),
    C("topo convert F/bad.json O/x.net", "F/bad.json"),
    C("topo convert F/t.json O/x.net --to weird", "weird"),
    C("topo convert /dev/zero O/x.net", "/dev/zero"),
    C("topo convert F/nonexistent.json O/x.json", "F/nonexistent.json"),
    C("topo cost --degree 0", "--degree"),
    C("topo cost --degree 99999999999", "--degree"),
    C("topo plane --order 6", "order 6"),
    C("topo plane --order 0", "order"),
    C("topo plane --order 10000", "10000"),
    C("topo nosuch", "nosuch"),
    C("topo torus --dims 4x4 --bogus", "--bogus"),
    # --- route -----------------------------------------------------------------------------
    C("route dor F/tree.json", "dor"),
    C("route dmodk F/t.json", "dmodk"),
    C("route lsft F/t.json", "lsft"),
    C("route dfsssp F/t.json --vcs 0", "--vcs"),
    C("route dfsssp F/t.json --vcs 17", "--vcs"),
    C("route updown F/t.json --root 999", "999"),
    C("route shortest F/t.json --select weird", "weird"),
    C("route shortest F/emptytopo.json", "no hosts"),
    C("route nue F/emptytopo.json", "no hosts"),
    C("route shortest F/bad.json", "F/bad.json"),
    C("route shortest /dev/zero", "/dev/zero"),
    C("route shortest F/t.json -o F/adir", "F/adir"),
    C("route shortest F/t.json -o O/missing/r.json", "O/missing"),
    C("route shortest F/t.json --lft F/adir", "F/adir"),
    C("route dfsssp F/t.json --seed 99999999999999999999", "--seed"),
    C("route updown F/t.json --spread-vcs 9 --vcs 8", "9"),
    C("route dor F/t.json --spread-vcs 2", "--spread-vcs"),
    C("route check F/t.json F/bad.json", "F/bad.json"),
    C("route check F/t.json /dev/zero", "/dev/zero"),
    C("route check F/m.json F/r.json", "torus(4x4"),
    C("route check F/t.json F/empty.json", "F/empty.json"),
    C("route check F/t.json F/trunc.json", "F/trunc.json"),
    C("route check F/t.json F/s.json", "F/s.json"),
    C("route check F/t.json F/badutf8.json", "F/badutf8.json"),
    C("route import-lft F/t.json F/bad.lft -o O/x.json", "F/bad.lft"),
    C("route import-lft F/t.json /dev/zero -o O/x.json", "/dev/zero"),
    C("route import-lft F/t.json F/empty.json -o O/x.json", "F/empty.json"),
    C("route import-lft F/t.json F/r.lft -o F/adir", "F/adir"),
    C("route import-lft F/t.json F/r.lft", "--output"),
    C("route export-lft F/t.json F/r.json -o O/missing/x.lft", "O/missing"),
    C("route export-lft F/m.json F/r.json -o O/x.lft", "torus(4x4"),
    C("route torus F/t.json", "torus"),
    # --- schedule --------------------------------------------------------------------------
    C("schedule alltoall F/t.json --algo shift --bytes 18446744073709551615", "--bytes"),
    C("schedule alltoall F/t.json --algo shift --bytes 18446744073709551616", "--bytes"),
    C("schedule alltoall F/t.json --algo shift --bytes -1", "--bytes"),
    C("schedule alltoall F/t.json --algo nope", "nope"),
    C("schedule alltoall F/t.json --algo a2at --nct 0", "--nct"),
    C("schedule alltoall F/t.json --algo a2at --nct 99", "99"),
    C("schedule alltoall F/t.json --algo shift --hosts 0-99", "0-99"),
    C("schedule alltoall F/t.json --algo shift --hosts 5-2", "5-2"),
    C("schedule alltoall F/t.json --algo shift --hosts ''", "host list"),
    C("schedule alltoall F/t.json --algo shift --hosts 0,0,1", "host 0"),
    C("schedule alltoall F/t.json --algo shift --order weird", "weird"),
    C("schedule gather F/t.json --algo linear --root 16", "0..=15"),
    C("schedule gather F/t.json --algo linear --root 99999999999", "--root"),
    C("schedule alltoall F/t.json --algo a2at --shape 3x3", "3x3"),
    C("schedule alltoall F/t.json --algo a2at --shape axb", "axb"),
    C("schedule alltoall F/t.json --algo lsft", "lsft"),
    C("schedule alltoall F/t.json --algo shift -o F/adir", "F/adir"),
    C("schedule alltoall F/t.json --algo shift -o O/x.txt", "O/x.txt"),
    C("schedule alltoall F/t.json --algo shift -o O/missing/s.json", "O/missing"),
    C("schedule alltoall F/t.json --algo shift -o F/adir/sub/s.json", "F/adir/sub"),
    C("schedule alltoall F/t.json --algo shift --executor weird -o O/s.nws", "weird"),
    C("schedule tasks F/tree.json --algo contention-free --tasks F/bad.json", "F/bad.json"),
    C("schedule tasks F/tree.json --algo contention-free --tasks /dev/zero", "/dev/zero"),
    C("schedule tasks F/tree.json --algo contention-free --tasks F/pneg.csv", "F/pneg.csv"),
    C("schedule tasks F/tree.json --algo contention-free --tasks F/ptext.csv", "F/ptext.csv"),
    C("schedule tasks F/tree.json --algo contention-free --tasks F/pbig.csv", "1000000000"),
    C("schedule tasks F/tree.json --algo contention-free --tasks F/phuge.csv", "F/phuge.csv"),
    C("schedule tasks F/tree.json --algo contention-free --tasks F/empty.json", "F/empty.json"),
    C("schedule alltoall F/tree.json --algo contention-free --perturb nan", "perturbation rate NaN"),
    C("schedule alltoall F/tree.json --algo contention-free --perturb 5", "perturbation rate 5"),
    C("schedule alltoall F/tree.json --algo contention-free --cache F/t.json", "F/t.json"),
    C("schedule alltoall F/tree.json --algo contention-free --policy weird", "weird"),
    C("schedule alltoall F/t.json --algo shift --policy min-sync", "--policy"),
    C("schedule barrier F/t.json --algo nope", "nope"),
    C("schedule whatever F/t.json --algo shift", "whatever"),
    C("schedule alltoall /dev/zero --algo shift", "/dev/zero"),
    C("schedule alltoall F/bad.json --algo shift", "F/bad.json"),
    # --- analyze ---------------------------------------------------------------------------
    C("analyze F/t.json F/r.json F/bad.json", "F/bad.json"),
    C("analyze F/t.json F/r.json /dev/zero", "/dev/zero"),
    C("analyze F/t.json F/bad.json F/s.json", "F/bad.json"),
    C("analyze F/m.json F/r.json F/s.json", "torus(4x4"),
    C("analyze F/t.json F/r.json F/s.json --hop-latency nan", "--hop-latency"),
    C("analyze F/t.json F/r.json F/s.json --hop-latency inf", "inf"),
    C("analyze F/t.json F/r.json F/s.json --links -1", "--links"),
    C("analyze F/t.json F/r.json F/nonexistent.json", "F/nonexistent.json"),
    C("analyze F/t.json F/r.json F/badutf8.json", "F/badutf8.json"),
    # --- simulate flow ---------------------------------------------------------------------
    C("simulate flow F/t.json F/r.json F/s.json --executor weird", "weird"),
    C("simulate flow F/t.json F/r.json F/s.json --nct 0", "--nct"),
    C("simulate flow F/t.json F/r.json F/s.json --barrier nan", "--barrier"),
    C("simulate flow F/t.json F/r.json F/s.json --mtu 0", "--mtu"),
    C("simulate flow F/t.json F/r.json F/s.json --injection-gbps 0", "--injection-gbps"),
    C("simulate flow F/t.json F/r.json F/s.json --injection-gbps -1", "--injection-gbps"),
    C("simulate flow F/t.json F/r.json F/s.json --injection-gbps nan", "--injection-gbps"),
    C("simulate flow F/t.json F/r.json F/s.json --out F/t.json", "F/t.json"),
    C("simulate flow F/t.json F/r.json F/s.json --out O/missing/deep", "O/missing"),
    C("simulate flow F/t.json F/r.json F/s.json --out F/blocked", "F/blocked/flow.json"),
    C("simulate flow F/t.json F/r.json F/bad.json", "F/bad.json"),
    C("simulate flow F/t.json F/r.json /dev/zero", "/dev/zero"),
    C("simulate flow F/t.json F/r.json F/badutf8.json", "F/badutf8.json"),
    C("simulate flow F/m.json F/r.json F/s.json", "torus(4x4"),
    C("simulate flow F/t.json F/r.json F/g.json", "--executor dag"),
    C("simulate flow F/tree.json F/r.json F/g.json --executor dag", "switch_tree"),
    C("simulate flow F/t.json F/r.json F/dag0.json --executor dag", "F/dag0.json"),
    # --- simulate flit ---------------------------------------------------------------------
    C("simulate flit F/bad_utf8.toml", "F/bad_utf8.toml"),
    C("simulate flit /dev/zero", "/dev/zero"),
    C("simulate flit F/nonexistent.toml", "F/nonexistent.toml"),
    C("simulate flit F/adir", "F/adir"),
    C("simulate flit F/file_only.toml", "topology_file"),
    C("simulate flit F/routes_only.toml", "routes_file"),
    C("simulate flit F/unk.toml", "bogus_key"),
    C("simulate flit F/kstr.toml", "four"),
    C("simulate flit F/nan.toml", "injection_rate"),
    C("simulate flit F/broken.toml", "F/broken.toml"),
    C("simulate flit F/torus16.toml --set k=64 --set n=3", "--max-memory"),
    C("simulate flit F/torus16.toml --set bogus=1", "bogus"),
    C("simulate flit F/torus16.toml --set k", "--set"),
    C("simulate flit F/torus16.toml --set injection_rate=-1", "injection_rate"),
    C("simulate flit F/torus16.toml --set injection_rate=2", "injection_rate 2"),
    C("simulate flit F/torus16.toml --set k=0", "k"),
    C("simulate flit F/torus16.toml --sweep injection_rate=a,b", "a,b"),
    C("simulate flit F/torus16.toml --sweep foo=1,2", "foo=1,2"),
    C("simulate flit F/torus16.toml --threads 999999", "--threads"),
    C("simulate nosuch F/t.json", "nosuch"),
    # --- map -------------------------------------------------------------------------------
    C("map F/t.json dor bruck:16:2048 --time inf", "--time inf"),
    C("map F/t.json dor bruck:16:2048 --time nan", "--time"),
    C("map F/t.json dor bruck:16:2048 --target nan --evals 100", "--target nan"),
    C("map F/t.json dor bruck:16:2048 --target inf --evals 100", "--target inf"),
    C("map F/t.json dor bruck:16:2048 --stall nan --evals 10", "--stall"),
    C("map F/t.json dor bruck:16:2048 --stall inf --evals 10", "--stall inf"),
    C("map F/t.json dor bruck:16:2048 --evals 0", "--evals"),
    C("map F/t.json dor bruck:99:2048 --evals 10", "99 ranks"),
    C("map F/t.json dor bruck:1000000000:1 --evals 10", "1000000000"),
    C("map F/t.json dor F/pneg.csv --evals 10", "0,1,-5"),
    C("map F/t.json dor F/ptext.csv --evals 10", "a,b,c"),
    C("map F/t.json dor F/bad.json --evals 10", "bad.json"),
    C("map F/t.json nope bruck:16:2048 --evals 10", "nope"),
    C("map F/t.json F/bad.json bruck:16:2048 --evals 10", "F/bad.json"),
    C("map F/t.json dor bruck:16:2048 --evals 10 --format weird", "weird"),
    C("map F/t.json dor bruck:16:2048 --evals 10 --cost weird", "weird"),
    C("map F/t.json dor bruck:16:2048 --evals 10 --cost 1e999*hop-bytes", "1e999"),
    C("map F/t.json dor bruck:16:2048 --evals 10 -o F/adir", "F/adir"),
    C("map F/t.json dor bruck:16:2048 --evals 10 -o O/missing/m.rankfile", "O/missing"),
    C("map F/t.json dor bruck:16:2048 --evals 10 --plots F/t.json", "F/t.json"),
    C("map F/t.json dor bruck:16:2048 --evals 10 --hostnames /dev/zero", "/dev/zero"),
    C("map F/t.json dor bruck:16:2048 --evals 10 --hostnames F/bad.json", "F/bad.json"),
    C("map F/t.json dor bruck:16:2048 --evals 10 --shape 8x8", "8x8"),
    C("map F/t.json dor bruck:16:2048 --evals 10 --start weird", "weird"),
    C("map F/t.json dor bruck:16:2048 --evals 10 --ranks 4", "4"),
    C("map F/t.json dor bruck:16:2048 --evals 10 --swaps 1", "--swaps"),
    C("map F/t.json dor bruck:16:2048 --evals 10 --replicas 0", "--replicas"),
    C("map F/t.json dor stencil:0x4 --evals 10", "stencil"),
    C("map F/tree.json dor bruck:4:8 --evals 10", "dor"),
    # --- plan ------------------------------------------------------------------------------
    C("plan F/t.json --out F/t.json", "F/t.json"),
    C("plan F/t.json --out O/missing/deep", "O/missing"),
    C("plan F/t.json --out F/blocked", "F/blocked/index.html"),
    C("plan F/t.json --bytes 0", "--bytes"),
    C("plan F/t.json --hosts 0-99", "0-99"),
    C("plan F/t.json --engine nope", "nope"),
    C("plan F/t.json --pattern nope:1", "nope:1"),
    C("plan F/t.json --map-time nan --pattern bruck:16:8", "--map-time"),
    C("plan F/bad.json", "F/bad.json"),
    C("plan /dev/zero", "/dev/zero"),
    C("plan F/emptytopo.json", "no hosts"),
    C("plan F/t.json --ranks-per-host 2", "--ranks-per-host"),
    C("plan F/t.json --pattern bruck:99:8", "99 ranks"),
    C("plan F/t.json --collective weird", "weird"),
    C("plan F/t.json --root 3", "--root"),
    # --- reproduce -------------------------------------------------------------------------
    C("reproduce a2at --out F/t.json", "F/t.json"),
    C("reproduce a2at --out O/x --sides 4", "--sides"),
    C("reproduce a2at --out O/x --sides 1001", "--max-memory"),
    C("reproduce a2at --out O/x --sides a", "--sides"),
    C("reproduce a2at --out O/x --model weird", "weird"),
    C("reproduce a2at --out O/missing/deep --sides 5", "O/missing"),
    C("reproduce lsft --out F/t.json", "F/t.json"),
    C("reproduce rmatt --out F/t.json", "F/t.json"),
    C("reproduce rmatt --out O/x --time nan", "--time"),
    C("reproduce rmatt --out O/x --size 99", "--size"),
    C("reproduce routing --out F/t.json", "F/t.json"),
    C("reproduce ethernet --out F/t.json", "F/t.json"),
    C("reproduce ethernet --out F/blocked", "F/blocked/index.html"),
    # --- run -------------------------------------------------------------------------------
    C("run F/dag0.json", "F/dag0.json"),
    C("run F/dagempty.json", "F/dagempty.json"),
    C("run F/g.json --timeout nan", "--timeout"),
    C("run F/g.json --timeout inf", "--timeout"),
    C("run F/g.json --timeout -1", "--timeout"),
    C("run F/g.json --fault crash:1:999999", "crash:1:999999"),
    C("run F/g.json --fault crash:99", "crash:99"),
    C("run F/g.json --fault weird", "weird"),
    C("run F/g.json --fault hang:0:0", "hang:0:0"),
    C("run F/g.json --fragment 0", "--fragment"),
    C("run F/g.json --fragment -1", "--fragment"),
    C("run F/g.json --fragment 4097", "--fragment"),
    C("run F/bad.json", "F/bad.json"),
    C("run /dev/zero", "/dev/zero"),
    C("run F/nonexistent.json", "F/nonexistent.json"),
    C("run F/g.json --out F/t.json", "F/t.json"),
    C("run F/g.json --out O/missing/deep", "O/missing"),
    C("run F/g.json --topology F/bad.json", "F/bad.json"),
    C("run F/g.json --seed -1", "--seed"),
    # --- mpi (mpirun's own output would go around this process: run the command) -----------
    C("mpi bench F/s.nws -np 0", "rank", subprocess=True),
    C("mpi bench F/s.nws -np 16 --sizes 0", "--sizes", subprocess=True),
    C("mpi bench F/s.nws -np 16 --sizes a,b", "--sizes", subprocess=True),
    C("mpi bench F/s.nws -np 16 --sizes 99999999999", "--sizes", subprocess=True),
    C("mpi bench F/s.nws -np 16 --collective weird", "weird", subprocess=True),
    C("mpi bench F/s.nws -np 16 --mpi weird", "weird", subprocess=True),
    C("mpi bench F/s.nws -np 16 --out F/t.json", "F/t.json", subprocess=True),
    C("mpi bench F/bad.json -np 16", "F/bad.json", subprocess=True),
    C("mpi bench /dev/zero -np 16", "/dev/zero", subprocess=True),
    C("mpi bench F/nonexistent.nws -np 16", "F/nonexistent.nws", subprocess=True),
    C("mpi run -np 0 --schedule F/s.nws -- true", "rank", subprocess=True),
    C("mpi run -np 2 --schedule F/bad.json -- true", "F/bad.json", subprocess=True),
    C("mpi run -np 2 --schedule F/nonexistent.nws -- true", "F/nonexistent.nws", subprocess=True),
    C("mpi run -np 2 --schedule F/s.nws", "--", subprocess=True),
    # --- emulate ---------------------------------------------------------------------------
    C(f"emulate up F/t32.json F/r32.json --name {FABRIC}", "2,049 namespaces"),
    C("emulate up F/t.json F/r.json --name 'BAD NAME'", "BAD NAME"),
    C(f"emulate up F/t.json F/r.json --name {FABRIC} --scale nan", "--scale"),
    C(f"emulate up F/t.json F/r.json --name {FABRIC} --scale 0", "--scale"),
    C(f"emulate up F/t.json F/r.json --name {FABRIC} --buffer -1", "--buffer"),
    C(f"emulate up F/m.json F/r.json --name {FABRIC}", "torus(4x4"),
    C(f"emulate up F/t.json F/bad.json --name {FABRIC}", "F/bad.json"),
    C(f"emulate measure F/t.json F/r.json F/s.json --name {FABRIC} --out F/t.json", "F/t.json"),
    C("emulate exec 99 --name nonexist -- true", "nonexist"),
    # --- the command line itself -----------------------------------------------------------
    C("nosuch", "nosuch"),
    C("topo torus", "--dims"),
    C("schedule alltoall F/t.json", "--algo"),
    C("analyze F/t.json", "routes_file"),
]


@pytest.fixture(scope="module")
def fx(tmp_path_factory) -> Path:
    """Every fixture file the cases name, built through the Python API."""
    d = tmp_path_factory.mktemp("fx")
    torus = topology.torus([4, 4])
    topology.save(torus, d / "t.json")
    topology.save(topology.mesh([4, 4]), d / "m.json")
    routes = routing.route(torus, "dor")
    routing.save(routes, d / "r.json")
    routing.save_lft(routes, d / "r.lft")
    traffic.save(traffic.alltoall(16, 1024), d / "s.json")
    traffic.save(traffic.alltoall(16, 1024), d / "s.nws")
    tree = topology.switch_tree([2], 2, [10.0], [5000.0], 1.0, 5000.0)
    topology.save(tree, d / "tree.json")
    graph, _ = traffic.contention_free(tree, "gather", 1000, root=0)
    graph.save(d / "g.json")
    big = topology.torus([32, 32])
    topology.save(big, d / "t32.json")
    routing.save(routing.route(big, "dor"), d / "r32.json")
    (d / "torus16.toml").write_text('topology = "torus"\nk = 16\nn = 2\nrouting_function = "dim_order"\n'
                                    'num_vcs = 2\ninjection_rate = 0.007\nsample_period = 1000\n')
    (d / "bad_utf8.toml").write_bytes(b'topology = "torus"\nk = 4\n\xff\xfe = 1\n')
    (d / "file_only.toml").write_text('topology_file = "t.json"\n')
    (d / "routes_only.toml").write_text('routes_file = "r.json"\n')
    (d / "unk.toml").write_text("k = 4\nn = 2\nbogus_key = 3\n")
    (d / "kstr.toml").write_text('k = "four"\n')
    (d / "nan.toml").write_text("k = 4\nn = 2\ninjection_rate = nan\n")
    (d / "broken.toml").write_text("k = = 4\n")
    (d / "bad.json").write_bytes(b"\xff\xfe\x00garbage")
    (d / "bad.lft").write_bytes(b"\xff\xfe\x00garbage")
    (d / "bad.net").write_text("Switch 4 \"s0\"\n[1] \"nowhere\"[1]\n")
    (d / "badutf8.json").write_bytes(b'{"format": "netweave-topology", "name": "\xc3\x28"}')
    net = topology.torus([2, 2]).to_text("ibnet").replace("4xEDR", "4xXYZ")
    (d / "unknownrate.net").write_text(net)
    (d / "empty.json").write_text("")
    (d / "trunc.json").write_text((d / "r.json").read_text()[:200])
    (d / "t.xyz").write_text("whatever\n")
    dag = '{"format":"netweave-schedule","version":1,"form":"dag","name":"x","num_ranks":%d,"tasks":[]}'
    (d / "dag0.json").write_text(dag % 0)
    (d / "dagempty.json").write_text(dag % 4)
    (d / "emptytopo.json").write_text('{"format":"netweave-topology","version":1,"name":"e","family":"generic",'
                                      '"params":{},"nodes":[],"links":[]}')
    (d / "pneg.csv").write_text("0,1,-5\n")
    (d / "ptext.csv").write_text("a,b,c\n")
    (d / "pbig.csv").write_text("0,1,100\n1000000000,0,100\n")
    (d / "phuge.csv").write_text("0,1,100\n0,99999999999,1\n")
    (d / "adir").mkdir()
    # An output directory with a directory where one of its files goes.
    for name in ("flow.json", "report.json", "index.html"):
        (d / "blocked" / name).mkdir(parents=True)
    return d


def _expand(text: str, fx: Path, out: Path) -> str:
    return text.replace("F/", f"{fx}/").replace("O/", f"{out}/")


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under `root` with its size and modification time."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            found[str(p)] = (st.st_size, st.st_mtime_ns)
    return found


def _children() -> set[int]:
    """Processes whose parent is this one (a command that leaves one behind fails the case)."""
    me, found = os.getpid(), set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == me and fields[0] != "Z":
            found.add(int(entry))
    return found


def _our_namespaces() -> list[str]:
    try:
        listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    except FileNotFoundError:
        return []
    return [line.split()[0] for line in listing.splitlines() if FABRIC in line]


def _run_in_process(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            cli.main(argv)
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return code, out.getvalue(), err.getvalue()


def _run_command(argv: list[str]) -> tuple[int, str, str]:
    proc = subprocess.run([str(BIN / "netweave"), *argv], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200"})
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("command, culprit, own_process", CASES)
def test_hostile_input_is_one_line_and_exit_2(fx, tmp_path, command, culprit, own_process):
    if command.startswith("emulate") and os.geteuid() != 0:
        pytest.skip("emulate needs root")
    out = tmp_path / "out"
    out.mkdir()
    argv = [_expand(word, fx, out) for word in shlex.split(command)]
    before, children = _snapshot(fx), _children()
    code, stdout, stderr = (_run_command if own_process else _run_in_process)(argv)
    lines = stderr.splitlines()
    assert code == 2, f"exit {code}\nstdout: {stdout[-400:]}\nstderr: {stderr[-800:]}"
    assert "Traceback" not in stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert _expand(culprit, fx, out) in lines[0], lines[0]
    assert _snapshot(fx) == before, "a fixture file was written, changed or removed"
    assert list(out.iterdir()) == [], f"left {sorted(p.name for p in out.iterdir())} in the output directory"
    assert _children() <= children, "a process was left behind"
    assert _our_namespaces() == [], "a namespace was left behind"


def test_there_are_at_least_200_cases():
    assert len(CASES) >= 200


# --- atomic outputs ---------------------------------------------------------------------------


def _with_file_size_limit(argv: list[str], blocks: int) -> subprocess.CompletedProcess:
    """The installed command under ``ulimit -f blocks`` (1 KiB blocks in bash)."""
    script = f"ulimit -f {blocks}; exec {shlex.join([str(BIN / 'netweave'), *argv])}"
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("argv", [
    ["topo", "torus", "--dims", "12x12", "-o", "{target}"],
    ["schedule", "alltoall", "{fx}/t.json", "--algo", "shift", "-o", "{target}"],
    ["route", "dor", "{fx}/t32.json", "-o", "{target}"],
], ids=["topology", "schedule", "routes"])
def test_a_failed_write_keeps_the_previous_file(fx, tmp_path, argv):
    suffix = ".json"
    target = tmp_path / f"kept{suffix}"
    target.write_text("the previous good file\n")
    words = [w.replace("{target}", str(target)).replace("{fx}", str(fx)) for w in argv]
    proc = _with_file_size_limit(words, 1)  # 1 KiB: every one of these files is larger
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and str(target) in proc.stderr and "File too large" in proc.stderr
    assert target.read_text() == "the previous good file\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name], "a temporary file was left behind"


def test_mkdir_creates_missing_parents_only_when_asked(tmp_path):
    target = tmp_path / "a" / "b" / "t.json"
    refused = _run_in_process(["topo", "torus", "--dims", "3x3", "-o", str(target)])
    assert refused[0] == 2 and "--mkdir" in refused[2] and not (tmp_path / "a").exists()
    made = _run_in_process(["topo", "torus", "--dims", "3x3", "-o", str(target), "--mkdir"])
    assert made[0] == 0 and topology.load(target).num_hosts == 9


def test_a_lossy_conversion_says_what_was_lost_when_allowed(fx, tmp_path):
    target = tmp_path / "tree.net"
    code, _stdout, stderr = _run_in_process(["topo", "convert", str(fx / "tree.json"), str(target), "--lossy"])
    assert code == 0 and target.exists()
    assert "warning:" in stderr and "bandwidth" in stderr and "latency" in stderr
    back = topology.load(target)
    assert back.num_links == topology.load(fx / "tree.json").num_links


def test_a_map_evaluation_budget_is_kept_to_a_round_per_chain(fx):
    code, stdout, _ = _run_in_process(["map", str(fx / "t.json"), "dor", "bruck:16:2048", "--evals", "1",
                                       "--replicas", "2", "--json"])
    assert code == 0
    import json

    result = json.loads(stdout)
    assert 1 <= result["evaluations"] <= 2, result["evaluations"]


def test_a_changed_schedule_cache_entry_is_not_served(fx, tmp_path):
    from netweave.stages.schedule_cache import ScheduleCache

    tree = topology.load(fx / "tree.json")
    cache = ScheduleCache(tmp_path / "cache")
    first, _, hit = cache.contention_free(tree, "alltoall", 4096)
    assert not hit
    entry = next((tmp_path / "cache").glob("*.nws"))
    data = bytearray(entry.read_bytes())
    data[-1] ^= 0xFF
    entry.write_bytes(bytes(data))
    again, summary, hit = cache.contention_free(tree, "alltoall", 4096)
    assert not hit and "checksum" in summary["cache_rejected"]
    assert again.to_json() == first.to_json()
    assert cache.contention_free(tree, "alltoall", 4096)[2], "the replaced entry is served again"


def test_the_pattern_api_refuses_instead_of_aborting():
    with pytest.raises(Exception) as caught:
        mapping.load_pattern("bruck:1000000000:1")
    assert "1000000000" in str(caught.value)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
