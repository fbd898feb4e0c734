"""One-off experiments, run from the repository root as ``python -m experiments.<name>``.

Each was run to answer one question, and its page under ``docs/lab/`` records the answer.
The first line of each names the commit it last ran on: later changes to the product may
have broken it (options retired since, such as the compiled-code correction or the XGBoost
blend, are not replaced here). Nothing imports them (not ``bench``, not the product, not
the tests), and CI does not run them; they may use :mod:`bench.common` and the maintained
benchmarks' helpers.
"""
