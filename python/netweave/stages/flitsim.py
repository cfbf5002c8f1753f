"""Flit-level simulation: cycle-accurate input-queued VC routers with credits.

A run is described by a flat config whose keys match BookSim's where they mean the same
(``topology``, ``k``, ``n``, ``routing_function``, ``num_vcs``, ``vc_buf_size``,
``packet_size``, ``injection_rate``, ``traffic``, ``sim_type``, ``warmup_periods``,
``sample_period``, ``max_samples``, ``seed`` …) plus netweave's own (``topology_file``,
``routes_file``, ``injection_ports``, ``deadlock_cycles``, ``schedule``, ``batch_sync``,
``request_reply`` …); :data:`KEYS` lists them all with their meaning. ``threads`` (0: every
core, the default) sets how many threads step the routers of one run; the results are the same
for every count.

>>> import netweave.stages.flitsim as fs
>>> r = fs.simulate({"k": 4, "packet_size": 4, "injection_rate": 0.02, "sample_period": 300})
>>> r["mode"], r["saturated"]
('open_loop', False)
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from netweave import _core
from netweave.support import parallel

#: ``{key: meaning}`` of every config key the simulator understands.
KEYS: dict[str, str] = dict(_core.flitsim_keys())

#: Keys whose value is a file path, resolved against the config file's directory.
PATH_KEYS = ("topology_file", "routes_file")

Config = Mapping[str, Any] | str | Path


class ConfigError(_core.NetweaveError):
    """A config file that cannot be read (one-line message)."""


def _text(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_text(key, v) for v in value) + "]"
    if isinstance(value, Mapping):
        raise ConfigError(f"{key}: tables are not supported; write every key at the top level")
    return str(value)


def load_config(path: str | Path) -> dict[str, Any]:
    """Read a TOML config file into a flat dict, file paths made absolute."""
    path = Path(path)
    try:
        data = tomllib.loads(_core.read_text_file(str(path)))  # size-limited; bad bytes named by offset
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: {e}") from None
    for key in PATH_KEYS:
        if key in data and isinstance(data[key], str) and not Path(data[key]).is_absolute():
            data[key] = str((path.parent / data[key]).resolve())
    return data


def parse_overrides(pairs: Iterable[str]) -> dict[str, str]:
    """``["k=8", "traffic=transpose"]`` → ``{"k": "8", "traffic": "transpose"}``."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects key=value, got '{pair}'")
        out[key.strip()] = value.strip()
    return out


def settings(config: Config, overrides: Mapping[str, Any] | None = None) -> list[tuple[str, str]]:
    """The ``(key, value)`` text pairs the engine takes, from a dict or a TOML path."""
    data = dict(load_config(config) if isinstance(config, (str, Path)) else config)
    data.update(overrides or {})
    return [(k, _text(k, v)) for k, v in data.items()]


def simulate(
    config: Config,
    overrides: Mapping[str, Any] | None = None,
    routes: _core.RoutingTable | None = None,
    schedule: _core.Schedule | _core.TaskGraph | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict:
    """Run one simulation; returns the open-loop statistics or the batch completion as a dict.

    `routes` (with its topology) replaces the config's network; `schedule` replaces the
    batch workload (``sim_type = "batch"``; its bytes count flits). A ``TaskGraph`` runs
    dependency-driven: a task starts once its sender has sent or received its predecessors,
    and the result adds ``task_start`` / ``task_finish`` per task. `progress(cycle)` is
    called every sample period (open loop) or every 10,000 cycles (batch).
    """
    if isinstance(schedule, _core.TaskGraph):
        return _core.flitsim_simulate_dag(settings(config, overrides), schedule, routes, progress)
    return _core.flitsim_simulate(settings(config, overrides), routes, schedule, progress)


def simulate_mpi(
    config: Config,
    overrides: Mapping[str, Any] | None = None,
    comm: Any = None,
    routes: _core.RoutingTable | None = None,
    schedule: _core.Schedule | _core.TaskGraph | None = None,
    progress: Callable[[int], None] | None = None,
) -> tuple[dict, dict]:
    """One run split over the processes of an MPI job (every process calls this alike, e.g.
    under ``mpirun -n 4``): each steps its share of the routers — METIS's partition of the
    router graph — and they swap flits, credits and tails every `lookahead` cycles through
    `comm` (default ``MPI.COMM_WORLD``). Returns ``(result, partition)`` on every process; the
    result is :func:`simulate`'s, bit for bit, and `partition` gives ranks, routers per rank,
    cut channels, lookahead, exchanges and the bytes this process sent. Each process steps its
    routers on one thread unless ``threads`` says otherwise."""
    if comm is None:
        try:
            from mpi4py import MPI
        except ImportError:
            raise ConfigError("an MPI run needs mpi4py (pip install -r requirements-dev.txt)") from None
        comm = MPI.COMM_WORLD
    pairs = settings(config, overrides)
    if not any(k == "threads" for k, _ in pairs):
        pairs.append(("threads", "1"))  # the processes already share the cores
    graph = schedule if isinstance(schedule, _core.TaskGraph) else None
    plain = schedule if isinstance(schedule, _core.Schedule) else None
    return _core.flitsim_simulate_partitioned(pairs, comm.Get_rank(), comm.Get_size(), comm.alltoall, routes, plain,
                                              graph, progress)


def sweep(
    config: Config,
    rates: Iterable[float],
    overrides: Mapping[str, Any] | None = None,
    routes: _core.RoutingTable | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict:
    """Open-loop runs at every injection rate, in parallel; marks saturated loads. Under
    ``mpirun`` (and without `routes`) the points are spread over the MPI job's processes as
    independent tasks (:mod:`netweave.support.parallel`), with the same results. `progress(i)` hears of
    each finished point."""
    rates = list(rates)
    if routes is not None or not parallel.using_mpi():
        return _core.flitsim_sweep(settings(config, overrides), rates, routes, progress)
    if not rates:
        raise ConfigError("a sweep needs at least one injection rate")
    base = dict(settings(config, overrides))
    # Points run side by side, one thread each unless told otherwise (as the local sweep does).
    base.setdefault("threads", "1")
    points = parallel.run_all(_open_loop_point, [(list({**base, "injection_rate": _text("injection_rate", r)}.items()),)
                                              for r in rates], on_done=progress)
    saturated = [p["injection_rate"] for p in points if p["saturated"]]
    return {"points": points, "saturation_rate": min(saturated) if saturated else None,
            "max_accepted_flits": max(p["accepted_flits"] for p in points)}


def _open_loop_point(pairs: list[tuple[str, str]]) -> dict:
    """One open-loop run as a sweep point (a task of :func:`sweep` under MPI)."""
    result = _core.flitsim_simulate(pairs, None, None, None)
    result.pop("mode")
    return result


def network(config: Config, overrides: Mapping[str, Any] | None = None) -> dict:
    """Name, host and router counts, routing engine and VCs of a config's network."""
    name, hosts, routers, engine, vcs = _core.flitsim_network(settings(config, overrides))
    return {"topology": name, "hosts": hosts, "routers": routers, "routing": engine, "routing_vcs": vcs}
