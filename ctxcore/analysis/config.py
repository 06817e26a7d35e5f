"""Thresholds and tables the analyses use; the defaults are what ctxview ships with."""

from collections.abc import Mapping
from dataclasses import dataclass, field

from ctxcore.analysis.prices import PRICES, Price


@dataclass(frozen=True)
class AnalysisConfig:
    prices: Mapping[str, Price] = field(default_factory=lambda: PRICES)
    recent_calls: int = 8  # chains kept per agent for cache reuse: with agents_kept, the state's size bound
    agents_kept: int = 8  # agents whose chains and lanes the state keeps (least recently used leave first)
    lost_in_middle_tokens: int = 20_000  # a pinned item in the middle matters in windows above this
    duplicate_tokens: int = 50  # smaller duplicates ("ok", "yes") are not worth a finding
    quadratic_ratio: float = 10.0  # billed input / final window from which history is "quadratic"


DEFAULT_CONFIG = AnalysisConfig()
