"""Generate the demo's small datasets (deterministic; the files in sample_configs/data/ are its output).

    python sample_configs/make_demo_data.py            # rewrite sample_configs/data/
    python sample_configs/make_demo_data.py --check    # exit 1 if the committed files differ

Four tasks, one per evaluator family the demo shows: free-form arithmetic word problems
(`gsm8k`), multiple choice (`choice`), completion by perplexity (`ppl`) and small Python
functions with unit tests (`code_exec`, HumanEval's format).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
SIZE = 200
CODE_SIZE = 24

NAMES = ["Ada", "Ben", "Chen", "Dara", "Eli", "Fatima", "Goro", "Hana", "Ivan", "Jia", "Kofi", "Lena"]
THINGS = ["apples", "marbles", "stickers", "books", "shells", "coins", "pencils", "cards"]


def word_problems(rng: random.Random) -> list[dict]:
    out = []
    for i in range(SIZE):
        name, thing = rng.choice(NAMES), rng.choice(THINGS)
        a, b, c = rng.randint(2, 90), rng.randint(2, 40), rng.randint(2, 9)
        kind = i % 3
        if kind == 0:
            q = f"{name} has {a} {thing} and gets {b} more. How many {thing} does {name} have now?"
            steps, ans = f"{a} + {b} = {a + b}", a + b
        elif kind == 1:
            a = max(a, b + 1)
            q = f"{name} has {a} {thing} and gives away {b}. How many {thing} are left?"
            steps, ans = f"{a} - {b} = {a - b}", a - b
        else:
            q = f"{name} buys {c} bags with {b} {thing} in each bag. How many {thing} is that in total?"
            steps, ans = f"{c} * {b} = {c * b}", c * b
        out.append({"question": q, "answer": f"{name} ends up with {steps} {thing}.\n#### {ans}"})
    return out


def multiple_choice(rng: random.Random) -> list[dict]:
    out = []
    for _ in range(SIZE):
        a, b = rng.randint(2, 12), rng.randint(2, 12)
        right = a * b
        wrong = set()
        while len(wrong) < 3:
            w = right + rng.choice([-1, 1]) * rng.randint(1, 12)
            if w > 0 and w != right:
                wrong.add(w)
        options = [right, *sorted(wrong)]
        rng.shuffle(options)
        letter = "ABCD"[options.index(right)]
        out.append({"question": f"What is {a} × {b}?", "A": str(options[0]), "B": str(options[1]),
                    "C": str(options[2]), "D": str(options[3]), "answer": letter})
    return out


def completions(rng: random.Random) -> list[dict]:
    out = []
    for _ in range(SIZE):
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        right = a + b
        options = [right, right + 1, right - 1]
        rng.shuffle(options)
        out.append({"text": f"{a} plus {b} equals", "A": str(options[0]), "B": str(options[1]),
                    "C": str(options[2]), "answer": str(right)})
    return out


# (name, docstring, body, [(args, expected), ...]) — tiny functions with known answers.
def _code_specs(rng: random.Random) -> list[tuple[str, str, str, list[tuple[str, str]]]]:
    specs = []
    for i in range(CODE_SIZE):
        k = rng.randint(2, 9)
        kind = i % 6
        if kind == 0:
            specs.append((f"add_{k}", f"Return x plus {k}.", f"    return x + {k}\n",
                          [(str(x), str(x + k)) for x in (0, 5, -3)]))
        elif kind == 1:
            specs.append((f"times_{k}", f"Return x multiplied by {k}.", f"    return x * {k}\n",
                          [(str(x), str(x * k)) for x in (0, 4, -2)]))
        elif kind == 2:
            specs.append((f"count_multiples_of_{k}", f"Return how many numbers in the list are multiples of {k}.",
                          f"    return sum(1 for n in numbers if n % {k} == 0)\n",
                          [(repr(lst), str(sum(1 for n in lst if n % k == 0))) for lst in ([k, 1, 2 * k], [], [1, 3, 5 * k])]))
        elif kind == 3:
            specs.append((f"repeat_{k}", f"Return the string s repeated {k} times.", f"    return s * {k}\n",
                          [(repr(s), repr(s * k)) for s in ("ab", "", "x")]))
        elif kind == 4:
            specs.append((f"largest_below_{k * 10}", f"Return the largest number in the list below {k * 10}, or None.",
                          f"    below = [n for n in numbers if n < {k * 10}]\n    return max(below) if below else None\n",
                          [(repr(lst), repr(max([n for n in lst if n < k * 10], default=None))) for lst in ([1, k * 10, 3], [k * 20], [5, 7])]))
        else:
            specs.append((f"shift_{k}", f"Return the list with {k} added to every element.",
                          f"    return [n + {k} for n in numbers]\n",
                          [(repr(lst), repr([n + k for n in lst])) for lst in ([1, 2], [], [-k])]))
    return specs


def code_tasks(rng: random.Random) -> list[dict]:
    out = []
    for i, (name, doc, body, cases) in enumerate(_code_specs(rng)):
        param = "x" if name.startswith(("add_", "times_")) else ("s" if name.startswith("repeat_") else "numbers")
        prompt = f'def {name}({param}):\n    """{doc}"""\n'
        asserts = "".join(f"    assert candidate({args}) == {want}\n" for args, want in cases)
        out.append({"task_id": f"Demo/{i}", "prompt": prompt, "canonical_solution": body,
                    "test": f"def check(candidate):\n{asserts}", "entry_point": name})
    return out


def render() -> dict[str, str]:
    files = {
        "word_problems.jsonl": word_problems(random.Random(1)),
        "multiple_choice.jsonl": multiple_choice(random.Random(2)),
        "completions.jsonl": completions(random.Random(3)),
        "code.jsonl": code_tasks(random.Random(4)),
    }
    return {name: "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows) for name, rows in files.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only compare with the files on disk")
    args = ap.parse_args()
    stale = []
    for name, text in render().items():
        path = DATA / name
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            DATA.mkdir(exist_ok=True)
            path.write_text(text, encoding="utf-8")
    if stale:
        print(f"stale demo data: {', '.join(stale)} (run python sample_configs/make_demo_data.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
