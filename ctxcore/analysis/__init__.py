"""Context analyses: pure Python over plain data (no Django, no Celery, no I/O).

Buckets, prefix chains and cache breaks, conflicting versions, item lifecycle, findings and run
accounting. Celery tasks load a call and the stored state, call ``analyse_call`` and store both results.
"""

from ctxcore.analysis.config import DEFAULT_CONFIG, AnalysisConfig
from ctxcore.analysis.findings import Finding
from ctxcore.analysis.inputs import CallInput
from ctxcore.analysis.lifecycle import item_lifecycle
from ctxcore.analysis.prices import PRICES, Price, price_for, table_from_rows
from ctxcore.analysis.run import (
    STATE_SCHEMA,
    CallAnalysis,
    OutdatedState,
    OutOfOrder,
    analyse_call,
    finalise_run,
    new_state,
)

__all__ = [
    "DEFAULT_CONFIG",
    "PRICES",
    "STATE_SCHEMA",
    "AnalysisConfig",
    "CallAnalysis",
    "CallInput",
    "Finding",
    "OutOfOrder",
    "OutdatedState",
    "Price",
    "analyse_call",
    "finalise_run",
    "item_lifecycle",
    "new_state",
    "price_for",
    "table_from_rows",
]
