"""Policy replay: what another context policy would have kept of a recorded run, and what it would
have cost, cache included; and fact probes, followed through the replayed windows. No Django."""

from ctxcore.replay.policies import (
    DEFAULT_POLICIES,
    POLICIES,
    BadPolicy,
    Moment,
    Policy,
    Slot,
    parse,
    parse_list,
)
from ctxcore.replay.probes import PROBE_KINDS, Place, Probe, locate, standing_probes, text_hits
from ctxcore.replay.simulate import (
    Pool,
    TooMuchWork,
    cheapest_keeping_all,
    keeps_every_probe,
    replay,
    replay_cost,
)

__all__ = [
    "DEFAULT_POLICIES",
    "POLICIES",
    "PROBE_KINDS",
    "BadPolicy",
    "Moment",
    "Place",
    "Policy",
    "Pool",
    "Probe",
    "Slot",
    "TooMuchWork",
    "cheapest_keeping_all",
    "keeps_every_probe",
    "locate",
    "parse",
    "parse_list",
    "replay",
    "replay_cost",
    "standing_probes",
    "text_hits",
]
