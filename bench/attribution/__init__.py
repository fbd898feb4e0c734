"""What each part of MetaTune earns (issue 61): ``python -m bench.attribution``.

Each part (the pool sampler, the cost model, the search, online fine-tuning) switched on
alone in MetaSchedule's default (``xgb``) and switched off in ours, all on the same
held-out network tasks and seeds, each run in a fresh process: the variants
(:mod:`~bench.attribution.variants`), the runs and their records
(:mod:`~bench.attribution.runs`), the statistics (:mod:`~bench.attribution.stats`) and
the page (:mod:`~bench.attribution.page`); the command line is ``__main__``.
"""
