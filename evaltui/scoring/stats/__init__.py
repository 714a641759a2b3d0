"""The uncertainty of every metric (its standard error and 95 % interval) and the tests that say
whether two runs differ (McNemar's exact test, a paired bootstrap)."""

from .interval import Interval, MeanSpread, t_quantile
from .significance import Significance, mcnemar_exact, paired_bootstrap

__all__ = ["Interval", "MeanSpread", "Significance", "mcnemar_exact", "paired_bootstrap", "t_quantile"]
