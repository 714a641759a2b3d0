"""Scoring: judge a model's predictions for one dataset, and summarise many as a leaderboard.

Standard library only (plus evaltui's own helpers): the watch-scorer runs it beside the UI and
it must never pull in the UI's dependencies.  Model-written code runs only in subprocesses.
"""

from .code.sandbox import run_program
from .judgement import Judgement
from .leaderboard import DatasetRow, Leaderboard, RankedModel, build_leaderboard, rank_models
from .normalize import normalize
from .readers.choice import extract_choice
from .readers.gsm8k import extract_gold_number, extract_prediction_number
from .reducers import MetricSums, Reduction, pass_at_k
from .score import iter_details, main_metric, percent, score
from .summary import dataset_version, render_csv, render_md, render_txt, write_summary

__all__ = [
    "DatasetRow",
    "Judgement",
    "Leaderboard",
    "MetricSums",
    "RankedModel",
    "Reduction",
    "build_leaderboard",
    "dataset_version",
    "extract_choice",
    "extract_gold_number",
    "extract_prediction_number",
    "iter_details",
    "main_metric",
    "normalize",
    "pass_at_k",
    "percent",
    "rank_models",
    "render_csv",
    "render_md",
    "render_txt",
    "run_program",
    "score",
    "write_summary",
]
