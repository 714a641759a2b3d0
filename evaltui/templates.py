"""A dataset's templates (`str.format` over a record): the fields they read, a sample rendered from
them, and the bounds that keep one record from building a gigabyte prompt.

`{question:>999999999}` was accepted and built 1 GB prompts: a format spec's width and precision
are bounded (MAX_FORMAT_WIDTH) — checked when the plan loads for a spec written in the template,
and as it is filled for one that takes a width from the record (`{q:>{w}}`) — and so is the
rendered prompt (MAX_PROMPT_CHARS): a longer one is more than any model's context, so it fails its
record, said with the record's index, instead of being sent.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import TYPE_CHECKING, Any

from evaltui.conversation import CRITIQUE, Message, Script, user
from evaltui.conversation.solvers import chain_of_thought, multiple_choice_prompt, shuffled_order

if TYPE_CHECKING:  # only read here: the plan is above the datasets (it checks them)
    from evaltui.plan import DatasetConfig

#: The width or precision a format spec may ask for: padding a prompt to align it needs a few
#: dozen characters, a float's digits a few more.
MAX_FORMAT_WIDTH = 10_000
#: The longest prompt (and system message, target, choice) a record may render to: 16 Mi
#: characters, some 4 million tokens, beyond every model's context.
MAX_PROMPT_CHARS = 16 << 20


class TemplateError(ValueError):
    """A template that cannot be filled within the bounds; the message says which bound."""


@dataclass(frozen=True, slots=True)
class Sample:
    index: int
    prompt: str  # a conversation's: its first request's question, as sent
    system: str
    target: str
    choices: tuple[str, ...]
    script: Script | None = None  # a conversation's requests (conversations.py); None: one prompt


def templates_of(ds: DatasetConfig) -> dict[str, str]:
    """The dataset's templates by the plan field that holds each (`choices[1]` for the second choice)."""
    t = {"prompt": ds.prompt, "target": ds.target, "system": ds.system}
    t.update({f"choices[{j}]": c for j, c in enumerate(ds.choices)})
    t.update({f"messages[{k}].content": m.content for k, m in enumerate(ds.messages or ())})
    return t


def template_fields(template: str) -> set[str]:
    """The record fields a str.format template reads; ValueError for a malformed template, or
    one whose format spec asks for a width or precision above MAX_FORMAT_WIDTH. (Parsed once a
    template: 10,000 datasets share a few; an error is not kept, so it is raised each time.)"""
    return set(_template_fields(template))


@lru_cache(maxsize=4096)
def _template_fields(template: str) -> frozenset[str]:
    fields: set[str] = set()
    for _, name, spec, _ in string.Formatter().parse(template):
        if name is None:
            continue
        root = re.split(r"[.\[]", name, maxsplit=1)[0]
        if root == "" or root.isdigit():
            raise ValueError(f"'{{{name}}}' must name a record field, e.g. '{{question}}' (write '{{{{' for a literal brace)")
        fields.add(root)
        if spec:
            if "{" not in spec:
                check_spec(spec, f"'{{{name}:{spec}}}'" if len(spec) < 40 else f"'{{{name}:{spec[:40]}…'")
            fields |= _template_fields(spec)
    return frozenset(fields)


# [[fill]align][sign][z][#][0][width][grouping][.precision][type]: the numbers that size the output.
_SPEC = re.compile(r"^(?:.?[<>=^])?[+\- ]?z?#?0?(?P<width>\d*)[,_]?(?:\.(?P<precision>\d*))?")


def check_spec(spec: str, shown: str) -> None:
    """TemplateError when `spec` (a format spec as filled in) would pad or print past
    MAX_FORMAT_WIDTH; `shown` names it in the message."""
    m = _SPEC.match(spec)
    if m is None:
        return
    for part in ("width", "precision"):
        digits = m.group(part)
        if digits and (len(digits) > 9 or int(digits) > MAX_FORMAT_WIDTH):
            size = f"{int(digits):,}" if len(digits) <= 9 else f"{len(digits)}-digit"  # int() refuses 4,300 digits
            raise TemplateError(f"{shown} asks for a {part} of {size} characters; a format spec may ask for at most {MAX_FORMAT_WIDTH:,}")


class _BoundedFormatter(string.Formatter):
    """str.format for a template whose spec takes a value from the record (`{q:>{w}}`): each
    spec is checked as it is filled, before any padding is built."""

    def format_field(self, value: Any, format_spec: str) -> Any:
        check_spec(format_spec, f"the format spec {format_spec!r} (filled from the record)")
        return super().format_field(value, format_spec)


_BOUNDED = _BoundedFormatter()


@lru_cache(maxsize=1024)
def _filler(template: str) -> Callable[[Mapping[str, Any]], str]:
    """How `template` is filled: the C `format_map` when every spec in it is written out (those
    were checked with the plan), the bounded formatter when a spec names a field."""
    nested = any(spec and "{" in spec for _, name, spec, _ in string.Formatter().parse(template) if name is not None)
    if nested:
        return lambda record: _BOUNDED.vformat(template, (), record)
    return template.format_map


def fill(template: str, record: Mapping[str, Any], index: int) -> str:
    """`template` filled from `record` (the `index`-th), at most MAX_PROMPT_CHARS long."""
    text = _filler(template)(record)
    if len(text) > MAX_PROMPT_CHARS:
        raise TemplateError(f"record {index} renders to {len(text):,} characters, more than the {MAX_PROMPT_CHARS:,} a prompt may be")
    return text


#: `{field[*]}` in a choice template: one choice per item of the record's list `field`.
_EACH = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\[\*\]\}")


def fill_each(template: str, record: Mapping[str, Any], index: int) -> list[str]:
    """A choice template filled: one text, or one per item of the list a `{field[*]}` names
    (a benchmark's own choices, as many as each record has: ARC's, TruthfulQA's)."""
    m = _EACH.search(template)
    if m is None:
        return [fill(template, record, index)]
    name = m.group(1)
    items = record.get(name)
    if not isinstance(items, (list, tuple)):
        raise TemplateError(f"record {index}: {{{name}[*]}} takes one choice per item of a list, and {name!r} is {type(items).__name__}")
    return [fill(template.replace(m.group(0), f"{{{name}[{i}]}}"), record, index) for i in range(len(items))]


def render_sample(ds: DatasetConfig, index: int, record: dict[str, Any]) -> Sample:
    choices = tuple(text for c in ds.choices for text in fill_each(c, record, index))
    target = fill(ds.target, record, index)
    if is_conversation(ds):
        script = render_script(ds, index, record, choices)
        opening = script.request(0, ()).conversation
        return Sample(index, opening.question, opening.system, target, choices, script)
    system = fill(ds.system, record, index) if ds.system else ""
    return Sample(index, fill(ds.prompt, record, index), system, target, choices)


def is_conversation(ds: DatasetConfig) -> bool:
    """Whether the dataset's samples are conversations (Sample.script) rather than one prompt."""
    return ds.messages is not None or ds.turns is not None or ds.steps is not None or ds.tools is not None


def render_script(ds: DatasetConfig, index: int, record: Mapping[str, Any], choices: tuple[str, ...]) -> Script:
    """A conversation dataset's sample: its opening (messages, or system and prompt, then the first
    turn), its later turns, its steps applied in order (README "Conversations"), its tools."""
    if ds.messages is not None:
        opening = [Message(m.role, fill(m.content, record, index)) for m in ds.messages]
    else:
        opening = [Message("system", fill(ds.system, record, index))] if ds.system else []
        if ds.turns is None:
            opening.append(user(fill(ds.prompt, record, index)))
    follow: tuple[str | None, ...] = ()
    if ds.turns is not None:
        first, *rest = _texts(record, ds.turns, index)
        opening.append(user(first))
        follow = tuple(rest)
    question = opening[-1].content
    order: tuple[int, ...] = ()
    for step in ds.steps or ():
        if step == "multiple_choice":
            order = shuffled_order(index, len(choices)) if ds.shuffle else ()
            shown = [choices[i] for i in order] if order else choices
            opening[-1] = user(multiple_choice_prompt(opening[-1].content, shown))
        elif step == "chain_of_thought":
            opening[-1] = user(chain_of_thought(opening[-1].content))
        elif step == "self_critique":
            follow += (CRITIQUE,)
    tools = tuple(_tools(record, ds.tools, index)) if ds.tools is not None else ()
    return Script(tuple(opening), follow, question, tools, order)


def _texts(record: Mapping[str, Any], field: str, index: int) -> list[str]:
    """A record's `turns` field: a non-empty list of texts (TemplateError naming the record otherwise)."""
    value = record.get(field)
    if not isinstance(value, list) or not value or not all(isinstance(t, str) for t in value):
        raise TemplateError(f"record {index}: {field!r} is not a non-empty list of texts (the user turns); got {_shape(value)}")
    return value


def _tools(record: Mapping[str, Any], field: str, index: int) -> list[dict[str, Any]]:
    """A record's `tools` field: a list of objects (OpenAI's tool definitions), sent as they are."""
    value = record.get(field)
    if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
        raise TemplateError(f"record {index}: {field!r} is not a list of tool definitions (objects); got {_shape(value)}")
    return value


def _shape(value: Any) -> str:
    if value is None:
        return "no such field"
    if isinstance(value, list):
        return "an empty list" if not value else "a list of " + ", ".join(sorted({type(v).__name__ for v in value}))
    return f"a {type(value).__name__}"


#: One record's check of a field a conversation reads whole: its problem, or None.
FieldCheck = Callable[[Mapping[str, Any], int], "str | None"]


def field_checks(ds: DatasetConfig) -> dict[str, FieldCheck]:
    """The record fields a conversation dataset reads whole (`turns`, `tools`) by the plan key
    naming each, with what checks a record's (its problem, or None)."""
    checks: dict[str, FieldCheck] = {}
    for key, reader in (("turns", _texts), ("tools", _tools)):
        field = getattr(ds, key)
        if field is not None:
            checks[key] = partial(_problem, reader, field)
    return checks


def _problem(reader: Callable[[Mapping[str, Any], str, int], Any], field: str, record: Mapping[str, Any], index: int) -> str | None:
    try:
        reader(record, field, index)
    except TemplateError as e:
        return str(e)
    return None


def fill_problem(index: int, rec: dict[str, Any], template: str, fields: set[str]) -> str | None:
    """Why the record cannot fill the template (which reads `fields`), or None when it can."""
    if not fields <= rec.keys():
        missing = sorted(fields - rec.keys())
        have = ", ".join(sorted(rec)) or "none"
        return f"record {index} has no field {', '.join(repr(m) for m in missing)} (its fields: {have})"
    try:
        fill_each(template, rec, index)
    except TemplateError as e:
        return str(e)
    except (KeyError, IndexError, AttributeError, ValueError, TypeError) as e:
        return f"record {index} cannot fill this template: {type(e).__name__}: {e}"
    return None


def quick_fields(checks: dict[str, str], needs: dict[str, set[str]]) -> dict[str, int] | None:
    """The fields whose presence as strings proves a record fills every template — when each
    template's fields are bare names (`{question}`: a string cannot fail to render there) —
    with the most times one template names each; None when some template needs rendering to be
    sure. (Made once for a set of templates; the caller may not change it.)"""
    return _quick_fields(tuple(checks.values()))


@lru_cache(maxsize=1024)
def _quick_fields(templates: tuple[str, ...]) -> dict[str, int] | None:
    checks = dict(enumerate(templates))
    if not all(_plain_fields(tpl) for tpl in checks.values()):
        return None
    counts: dict[str, int] = {}
    for tpl in checks.values():
        named: dict[str, int] = {}
        for _, name, _, _ in string.Formatter().parse(tpl):
            if name is not None:
                named[name] = named.get(name, 0) + 1
        for name, n in named.items():
            counts[name] = max(counts.get(name, 0), n)
    return dict(sorted(counts.items()))


def _plain_fields(template: str) -> bool:
    """Whether every replacement field is a bare name: no attribute, index, conversion or spec."""
    return all(
        spec == "" and conversion is None and name.isidentifier()
        for _, name, spec, conversion in string.Formatter().parse(template)
        if name is not None
    )


def check_records(
    records: Iterator[dict[str, Any] | None], limit: int, checks: dict[str, str], needs: dict[str, set[str]], fields: dict[str, FieldCheck]
) -> tuple[int, list[str]]:
    """(how many records, up to `limit` if set; the first problem of each template, and of each
    field a conversation reads whole): one that failed once is not tried again. `checks` and
    `fields` are consumed."""
    quick = quick_fields(checks, needs)
    room = MAX_PROMPT_CHARS - max(map(len, checks.values()), default=0)
    problems: list[str] = []
    count = 0
    for index, rec in enumerate(records):
        if limit and index >= limit:
            break
        assert rec is not None  # nothing skipped
        count += 1
        for key, check in list(fields.items()):
            if (problem := check(rec, index)) is not None:
                problems.append(f"{key}: {problem}")
                del fields[key]
        if quick is not None:  # the usual record: every field there, every value a string, none too long
            size = 0
            for f, n in quick.items():
                value = rec.get(f)
                if type(value) is not str:
                    break
                size += n * len(value)
            else:
                if size <= room:
                    continue
        failed = [(name, p) for name, tpl in checks.items() if (p := fill_problem(index, rec, tpl, needs[name]))]
        for name, problem in failed:
            problems.append(f"{name}: {problem}")
            del checks[name]  # one report per template is enough
        if failed:
            quick = quick_fields(checks, needs)
    return count, problems
