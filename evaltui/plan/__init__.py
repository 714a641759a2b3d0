"""The TOML plan (SPEC §3): its schema, the loader, and the checks that make a typo one line.

    schema   pydantic models of the plan, strict and frozen, defaults filled in
    load     load_plan (read, validate, check, report every problem), select (--models/--datasets),
             read_snapshot (a work dir's plan.toml, its schema only)
    errors   PlanError, and TOML and pydantic errors as `field.path: message` lines
    checks   what fields must agree on: abbrs, URLs, headers, CA files, templates, modes

The plan sits above the backends (a model's `type` is a backend's name) and the datasets (their
files are checked against the templates), so neither imports it but for type checking.
"""

from evaltui.plan.errors import PlanError
from evaltui.plan.evaluator import Epochs, EvaluatorConfig
from evaltui.plan.load import load_plan, parse_samples, read_snapshot, samples_spec, select
from evaltui.plan.price import Price
from evaltui.plan.schema import ABBR_RE, DatasetConfig, ModelConfig, Plan, RunConfig

__all__ = [
    "ABBR_RE",
    "DatasetConfig",
    "Epochs",
    "EvaluatorConfig",
    "ModelConfig",
    "Plan",
    "PlanError",
    "Price",
    "RunConfig",
    "load_plan",
    "read_snapshot",
    "parse_samples",
    "samples_spec",
    "select",
]
