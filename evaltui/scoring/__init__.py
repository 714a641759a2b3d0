"""Scoring: judge a model's predictions for one dataset, and summarise many as a leaderboard.

Below the engine and above the plan (whose evaluator types, reducers and Epochs it reads): the
scorer runs it beside the UI and it never pulls in the UI's dependencies. Model-written code
runs only in subprocesses (code/).
"""

from .leaderboard import DatasetRow, RankedModel, build_leaderboard, rank_models
from .normalize import normalize
from .reducers import MetricSums, Reduction, pass_at_k
from .score import iter_details, main_metric, score
from .summary import dataset_version, render_csv, render_md, render_txt, result_intervals, write_summary

__all__ = [
    "DatasetRow",
    "MetricSums",
    "RankedModel",
    "Reduction",
    "build_leaderboard",
    "dataset_version",
    "iter_details",
    "main_metric",
    "normalize",
    "pass_at_k",
    "rank_models",
    "render_csv",
    "render_md",
    "render_txt",
    "result_intervals",
    "score",
    "write_summary",
]
