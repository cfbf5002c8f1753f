"""The plan's result as typed records: what :func:`netweave.plan.plan` returns, what the text
report, the web page and ``netweave plan`` read, and what ``report.json`` holds.

Every record is a dataclass; :meth:`Record.to_dict` gives the JSON form (``report.json``,
``netweave plan --json``) and :meth:`Record.from_dict` reads it back, so a report written by
one run can be loaded as the same typed result. A field whose metadata is :data:`OMITTED_WHEN_NONE` is left
out of the JSON form while it is None (a job's ``root`` outside gathers, a pick's MPI
``label`` and ``algorithm`` outside natives), as the report has always written them.

Figures that belong to an earlier stage stay as that stage returns them: the topology's
figures (:func:`netweave.topology.info`), each phase's loads (:func:`netweave.analysis.analyze`)
and the mapper's cost figures and structure (:mod:`netweave.mapping`).
"""

from __future__ import annotations

import dataclasses
import sys
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Self

#: The kinds of candidate a plan ranks: a phased schedule, a paper-004 task DAG, an MPI's own.
CandidateKind = Literal["phased", "dag", "native"]

#: Metadata of a field defaulting to None that the JSON form leaves out while it is None.
OMITTED_WHEN_NONE = {"omitted_when_none": True}


@dataclass
class Record:
    """A dataclass with a JSON form: :meth:`to_dict` and its inverse :meth:`from_dict`."""

    def to_dict(self) -> dict[str, Any]:
        """The record as plain JSON values, nested records included, field by field."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None and f.metadata.get("omitted_when_none"):
                continue
            out[f.name] = _plain(value)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """The record `data` is the JSON form of (from :meth:`to_dict`, or ``report.json``)."""
        hints = typing.get_type_hints(cls)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"{cls.__name__} has no field {', '.join(sorted(unknown))}")
        return cls(**{name: _typed(hints[name], value) for name, value in data.items()})


def _plain(value: Any) -> Any:
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _typed(hint: Any, value: Any) -> Any:
    """`value` (JSON) as the type `hint` names: records rebuilt, lists and optionals looked into;
    anything else (numbers, strings, the earlier stages' dicts) as it is."""
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        return _typed(inner[0], value) if len(inner) == 1 else value
    if origin is list:
        (item,) = typing.get_args(hint)
        return [_typed(item, v) for v in value]
    if isinstance(hint, type) and issubclass(hint, Record):
        return hint.from_dict(value)
    return value


@dataclass(kw_only=True)
class Job(Record):
    """The job planned: which collective, over how many ranks on which hosts, how many bytes."""

    collective: str
    ranks: int
    #: The ``--hosts`` list as given, ``all`` for every host.
    hosts: str
    #: Bytes each rank sends each other rank (all-to-all), or each rank's block.
    bytes_per_pair: int
    #: The root rank of a gather; None (and not written) for the other collectives.
    root: int | None = field(default=None, metadata=OMITTED_WHEN_NONE)

    @property
    def root_rank(self) -> int:
        """The gather's root, 0 where the collective has none (what the builders take)."""
        return self.root or 0


@dataclass(kw_only=True)
class RoutingChoice(Record):
    """The routing the plan used and why."""

    engine: str
    #: Virtual lanes the tables use.
    vcs: int
    deadlock_free: bool
    why: str


@dataclass(kw_only=True)
class Bound(Record):
    """The job's bottleneck lower bound (:func:`netweave.analysis.bottleneck_bound`)."""

    seconds: float
    #: Bytes on the binding resource.
    bytes: int
    #: One line naming the binding resource.
    describe: str


@dataclass(kw_only=True)
class Prediction(Record):
    """How the flow model predicted the candidates."""

    model: str
    #: The executors each phased candidate is predicted with (``sync`` only where every phase is
    #: a permutation, :func:`netweave.plan.phased_executors`); each row's ``executor`` says
    #: which one its time is from.
    executors: list[str]
    #: The calibration file's path, None without one (written as null).
    calibration: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        data = dict(data)
        if "executor" in data:  # an earlier report.json: one executor for every phased candidate
            data["executors"] = [data.pop("executor")]
        return super().from_dict(data)


@dataclass(kw_only=True)
class CandidateRow(Record):
    """One candidate the plan ranked, with the figures every kind has."""

    kind: ClassVar[CandidateKind]

    name: str
    #: Its claims hold (every block delivered once); a DAG or an MPI's own is complete by construction.
    complete: bool
    #: No link carries two of its flows at once.
    contention_free: bool
    #: The flow model's prediction.
    predicted_time_s: float
    #: What ran it in the flow model for that time: a phased candidate's chosen executor
    #: (``plan.predict_phased``: local-sync unless another is predicted 5 % faster; the one its
    #: deployed ``.nws`` asks for), ``dag`` for a task DAG, a native algorithm's own.
    executor: str
    throughput_per_server_mib_s: float
    #: Its own traffic's bottleneck bound.
    bound_s: float
    #: The predicted time over the job's bound (set once every candidate is measured).
    bound_ratio: float | None = None

    @property
    def pickable(self) -> bool:
        """Whether the plan may advise it (not a baseline kept only for comparison)."""
        return True

    @property
    def phase_count(self) -> int:
        """Synchronisations it needs: its phases, 0 for a DAG (the tie-break in :func:`choose`)."""
        return 0

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **super().to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        data = dict(data)
        _drop_earlier_names(data)
        kind = data.pop("kind", cls.kind)
        if kind != cls.kind:
            raise ValueError(f"{cls.__name__} holds {cls.kind} rows, not {kind}")
        return super().from_dict(data)


#: Keys earlier report.json files wrote that name no figure of today's vocabulary (the
#: switch-to-switch maximum, now folded into ``max_channel_bytes``): read and left out.
_EARLIER_KEYS = ("max_link_bytes",)


_warned_earlier: set[str] = set()


def _drop_earlier_names(data: dict[str, Any]) -> None:
    """Remove the earlier keys from `data`, with one deprecation line on stderr per key."""
    for key in _EARLIER_KEYS:
        if key in data:
            del data[key]
            if key not in _warned_earlier:
                _warned_earlier.add(key)
                print(f"netweave: report.json key {key} is an earlier name and is ignored "
                      "(max_channel_bytes holds the busiest channel)", file=sys.stderr)


@dataclass(kw_only=True)
class PhasedRow(CandidateRow):
    """A phased schedule: proven and measured by the exact analysis, then predicted."""

    kind: ClassVar[CandidateKind] = "phased"

    #: The schedule's own name (algorithm and parameters).
    schedule: str
    phases: int
    messages: int
    #: Why it is not complete, None when it is.
    problem: str | None
    #: Most flows on one link in one phase.
    max_congestion: int
    #: Paper 000's throughput ratio.
    throughput_ratio: float
    #: Paper 001's lock-step time over switch links, and with host links.
    fluid_time_s: float
    fluid_time_host_links_s: float
    flows: int
    bytes: int
    #: Most bytes on one directed channel, host links included.
    max_channel_bytes: int
    hop_bytes: int
    #: The phase with the most loaded link.
    worst_phase: int
    #: The flow model's time with each executor tried, keyed by executor (``predicted_time_s``
    #: is the least of them, with ``executor``).
    predicted_times_s: dict[str, float]
    #: Each phase's loads, as :func:`netweave.analysis.analyze` gives them.
    phase_loads: list[dict[str, Any]]

    @property
    def phase_count(self) -> int:
        return self.phases


@dataclass(kw_only=True)
class DagRow(CandidateRow):
    """One of paper 004's task DAGs, predicted by the flow model's DAG executor."""

    kind: ClassVar[CandidateKind] = "dag"

    #: False for Concurrent: what an unscheduled MPI collective already does, a baseline.
    deployable: bool
    tasks: int
    #: Paper 004's cost model's time, None for Concurrent.
    cost_model_s: float | None
    #: The contention-free schedule's groups, None for Concurrent.
    groups: int | None

    @property
    def pickable(self) -> bool:
        return self.deployable


@dataclass(kw_only=True)
class NativeRow(CandidateRow):
    """What an MPI library runs today for the job (``traffic::native_mpi``)."""

    kind: ClassVar[CandidateKind] = "native"

    library: str
    #: The library's name and version as a reader knows it (``Open MPI 4.1.4``).
    label: str
    #: Its default algorithm for the job.
    algorithm: str
    schedule: str
    phases: int
    concurrent_sends: int

    @property
    def phase_count(self) -> int:
        return self.phases


@dataclass(kw_only=True)
class Skipped(Record):
    """A candidate that does not fit the job, and why."""

    name: str
    reason: str


@dataclass(kw_only=True)
class Pick(Record):
    """A candidate the plan picked (the best of all, or netweave's own best), against the baseline."""

    name: str
    kind: CandidateKind
    #: One line saying why it was picked.
    reason: str
    #: Lock-step time, throughput ratio and lock-step speed-up: phased picks only.
    fluid_time_host_links_s: float | None
    throughput_ratio: float | None
    speedup_vs_shift: float | None
    predicted_time_s: float
    #: The executor of that prediction (the candidate row's ``executor``).
    executor: str
    #: The baseline's predicted time over this one's (None when it takes no time).
    predicted_speedup_vs_shift: float | None
    #: The collective's baseline algorithm (shift, ring or linear).
    baseline: str
    bound_ratio: float | None
    contention_free: bool
    #: A native pick's library label and algorithm; None (not written) otherwise.
    label: str | None = field(default=None, metadata=OMITTED_WHEN_NONE)
    algorithm: str | None = field(default=None, metadata=OMITTED_WHEN_NONE)

    @property
    def is_native(self) -> bool:
        """Whether the pick is what the user's MPI already runs."""
        return self.kind == "native"


@dataclass(kw_only=True)
class TodayLibrary(Record):
    """One MPI library's default against netweave's pick."""

    library: str
    label: str
    algorithm: str
    predicted_time_s: float
    #: The library's predicted time over netweave's pick's (None when the pick takes no time).
    ours_speedup: float | None


@dataclass(kw_only=True)
class Today(Record):
    """"Your MPI today: X, ours: Y": each library's default against netweave's pick."""

    ours: str
    ours_s: float
    libraries: list[TodayLibrary]


@dataclass(kw_only=True)
class VerifyRow(Record):
    """One candidate measured on the emulated fabric (``--verify``) beside its prediction."""

    name: str
    kind: CandidateKind
    predicted_s: float
    measured_s: float | None
    #: measured ÷ predicted.
    ratio: float | None
    #: What ran it (netweave's TCP executor, nwbench).
    measured_by: str | None
    #: Why it has no time, or what went wrong (retransmissions, timeouts, a run this machine
    #: could not forward at its predicted pace).
    problem: str | None
    #: TCP retransmission timeouts the hosts counted per call (the warm-up included), and the
    #: flow model's for one call: where a ratio is far from 1, whether the model saw the losses
    #: (its steady-sharing charge counts expected timeouts, far more than TCP takes).
    timeouts_per_call: float | None = None
    predicted_timeouts: int | None = None


@dataclass(kw_only=True)
class VerifySummary(Record):
    """The verdict of ``--verify``: is the plan's pick the measured best?"""

    pick_at_scale: str | None
    pick_at_scale_over_best: float | None
    #: The emulated links' bandwidth over the real ones'.
    scale: float
    buffer: int | None
    pick: str | None
    measured_best: str | None
    pick_over_best: float | None
    pick_is_best: bool | None
    worst_ratio: float | None
    latency: str
    #: The measured best that replaced the model's pick (``best``), and netweave's own measured
    #: best that replaced its own pick (``ours``, the deployed schedule), where the model's
    #: measured more than the margin slower (:func:`netweave.plan.verification.adopt_measured`);
    #: None (not written) where the model's pick stood.
    adopted: str | None = field(default=None, metadata=OMITTED_WHEN_NONE)
    adopted_ours: str | None = field(default=None, metadata=OMITTED_WHEN_NONE)


@dataclass(kw_only=True)
class PlacementSummary(Record):
    """The ranks placed for ``--pattern``, against the identity (rank r on host r)."""

    pattern: str
    source: str
    ranks: int
    engine: str
    cost: str
    seed: int
    seconds: float
    evaluations: int
    #: The pattern's structure as the mapper discovers it (its coordinates left out).
    structure: dict[str, Any]
    #: The mapper's cost figures of the identity and of the placement.
    identity: dict[str, int]
    placed: dict[str, int]
    #: identity ÷ placed for hop_bytes, max_channel_bytes and hops_x_max_channel (None where
    #: placed is 0).
    identity_over_placed: dict[str, float | None]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        data = dict(data)
        for key in ("identity", "placed", "identity_over_placed"):
            if isinstance(data.get(key), dict):
                data[key] = _today_figure_names(data[key])
        return super().from_dict(data)


#: The mapper's earlier figure names, as an old ``report.json`` holds them, and today's.
_EARLIER_FIGURE_NAMES = {"hops": "sum_hops", "max_link": "max_channel_bytes", "rmatt": "hops_x_max_channel",
                         "step_max_link": "step_max_channel_bytes"}


def _today_figure_names(figures: dict[str, Any]) -> dict[str, Any]:
    """`figures` with the earlier names renamed (one deprecation line on stderr per name)."""
    out = {}
    for name, value in figures.items():
        today = _EARLIER_FIGURE_NAMES.get(name)
        if today is not None and name not in _warned_earlier:
            _warned_earlier.add(name)
            print(f"netweave: report.json figure {name} is an earlier name; read as {today}", file=sys.stderr)
        out[today or name] = value
    return out


@dataclass(kw_only=True)
class PlanResult(Record):
    """Everything :func:`netweave.plan.plan` found for one job."""

    #: The fabric's figures (:func:`netweave.topology.info`).
    topology: dict[str, Any]
    routing: RoutingChoice
    job: Job
    bound: Bound
    schedules: list[PhasedRow]
    dag_schedules: list[DagRow]
    native: list[NativeRow]
    skipped: list[Skipped]
    #: Every candidate's name, fastest predicted first.
    ranking: list[str]
    #: The best of everything, the user's MPI included; None when nothing is proven.
    best: Pick | None
    #: netweave's own best (no native); None when nothing is proven.
    ours: Pick | None
    today: Today | None
    prediction: Prediction
    #: ``--verify``'s measurements (not written without it).
    verify: list[VerifyRow] | None = field(default=None, metadata=OMITTED_WHEN_NONE)
    verify_summary: VerifySummary | None = field(default=None, metadata=OMITTED_WHEN_NONE)
    #: ``--pattern``'s placement (not written without it).
    placement: PlacementSummary | None = field(default=None, metadata=OMITTED_WHEN_NONE)

    @property
    def candidates(self) -> list[CandidateRow]:
        """Every ranked candidate: the user's MPI first, then the phased ones, then the DAGs."""
        return [*self.native, *self.schedules, *self.dag_schedules]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        return super().from_dict(_with_row_executors(data))


def _with_row_executors(data: dict[str, Any]) -> dict[str, Any]:
    """`data` with each row's and pick's ``executor``: an earlier report.json named one executor
    for every phased candidate (``prediction.executor``) and none per row (one deprecation line
    on stderr)."""
    earlier = (data.get("prediction") or {}).get("executor")
    if earlier is None:
        return data
    if "prediction.executor" not in _warned_earlier:
        _warned_earlier.add("prediction.executor")
        print("netweave: report.json key prediction.executor is an earlier form; read as each phased row's "
              "executor", file=sys.stderr)
    natives = {row["name"]: row.get("executor") for row in data.get("native") or []}

    def own(kind: str, name: str) -> str | None:
        return {"phased": earlier, "dag": "dag"}.get(kind) or natives.get(name)

    data = dict(data)
    data["schedules"] = [{"executor": earlier, "predicted_times_s": {earlier: row["predicted_time_s"]}, **row}
                         for row in data.get("schedules") or []]
    data["dag_schedules"] = [{"executor": "dag", **row} for row in data.get("dag_schedules") or []]
    for key in ("best", "ours"):
        pick = data.get(key)
        if pick is not None:
            data[key] = {"executor": own(pick["kind"], pick["name"]), **pick}
    return data
