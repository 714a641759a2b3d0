"""The catalog's entries, one module per family: each holds its reference's prompts, settings and scoring as data.

    gsm8k        lm-eval's gsm8k (5-shot from train) and gsm8k_cot (8 fixed chain-of-thought examples)
    mmlu         lm-eval's mmlu (log-likelihood, 57 subjects) and mmlu_generative
    bbh          lm-eval's bbh_cot_fewshot (27 tasks; bbh_cot_fewshot.json: their examples)
    choice       lm-eval's arc_challenge, hellaswag, truthfulqa_mc1/mc2, gpqa_diamond (log-likelihood)
    ifeval       lm-eval's ifeval (Google's instruction checkers: evaltui/scoring/ifeval)
    minerva      lm-eval's minerva_math500 (math-verify)
    code         lm-eval's humaneval and mbpp, OpenCompass's humaneval_gen
    opencompass  OpenCompass's gsm8k_gen and mmlu_gen
"""
