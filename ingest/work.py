"""What one part of a span batch carries through the pipeline's steps (``ingest.pipeline``): every step
reads this one typed record and adds its results to it, so no step needs to import another."""

from dataclasses import dataclass, field

from ingest.agent_sessions import Declared
from ingest.analyse import AnalysisWrites
from ingest.call_rows import Batch
from ingest.models import Call, RawBatch, Run
from ingest.records import CallRecord

# The call built for each record before its run is known, by the record's id (with the record: an id
# is only unique while its object lives).
BuiltCalls = dict[int, tuple[CallRecord, Call]]


@dataclass
class BatchWork:
    """One part of a span batch on its way through the pipeline (``ingest.pipeline``): what the steps
    read and what each adds, in the order they run."""

    raw: RawBatch  # the stored batch this part is of
    batch: Batch
    rows: list[tuple[dict, dict]]  # (resource, span row) of this part
    traces: set[str]  # every trace the batch has spans of (any span may link a call to its agent)
    wait: bool = True  # off: a run locked by another batch is locks.Busy, not waited for
    # interpret
    records: list[CallRecord] = field(default_factory=list)
    operations: list[dict] = field(default_factory=list)
    # save_texts, build_calls: done before the batch waits for the others of its traces
    texts: dict[str, str] = field(default_factory=dict)  # stored now, by hash
    built: BuiltCalls = field(default_factory=dict)
    # keep_new, find_waiting, lock_runs, remove_replaced, rebuild (continued_calls), reset_late_invocations
    new: list[CallRecord] = field(default_factory=list)
    waiting: list[tuple[int, int]] = field(default_factory=list)  # (call, run) waiting for a new response
    replaced: list[Call] = field(default_factory=list)
    runs: dict[str, Run] = field(default_factory=dict)  # locked, by key
    renumber: set[int] = field(default_factory=set)  # runs that lost a replaced call
    untitled: set[int] = field(default_factory=set)  # runs whose first call's root span came now
    relinked: set[int] = field(default_factory=set)  # runs whose stored calls an agent span relinked
    # The runs that spans above calls naming none of their own name (lock_runs): the new calls are keyed
    # by them, and stored ones move there (resolve_agents).
    declared: Declared | None = None
    # resolve_agents
    every_call: list[Call] = field(default_factory=list)
    calls_of: dict[int, list[Call]] = field(default_factory=dict)  # the new calls by run id
    invocations: set[str] = field(default_factory=set)
    # number_and_analyse
    late_runs: list[Run] = field(default_factory=list)  # renumbered after the insert
    analysed: set[int] = field(default_factory=set)
    writes: AnalysisWrites = field(default_factory=AnalysisWrites)

    def in_order(self) -> list[Run]:
        return sorted(self.runs.values(), key=lambda run: run.id)

    def runs_to_analyse(self) -> set[int]:
        """The runs whose calls changed and are not analysed yet."""
        return {run.id for run in self.runs.values() if run.analysed_seq < run.call_count}
