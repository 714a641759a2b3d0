"""The reference harnesses' own scoring, as the standard benchmarks need it (evaltui/benchmarks).

    lmeval         lm-evaluation-harness 0.4.13: its filters and exact_match
    loglikelihood  lm-evaluation-harness 0.4.13's multiple choice: acc, acc_norm, TruthfulQA's mc2
    parts          a grouped benchmark's parts, and the group's score (by size, or the parts' mean)

Each reproduces what the reference computes for one sample, so a benchmark's score is the
number the reference would print for the same replies.
"""

from evaltui.scoring.reference.lmeval import make_exact_match
from evaltui.scoring.reference.loglikelihood import make_loglikelihood

__all__ = ["make_exact_match", "make_loglikelihood"]
