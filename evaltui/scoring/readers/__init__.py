"""The evaluators that read an answer out of a free-text reply: `gsm8k` (a number), `math` (an
expression, judged by math-verify in a worker process), `choice` (an option letter), and what
they agree on about a reply (`reply`: where the model stopped answering). README, "How each
evaluator reads a reply", says how, with examples; tests/test_agreement.py holds them to it.
"""
