"""Search strategies: batch Bayesian optimization (:mod:`tuner.search.bo`), its batch
selection (:mod:`tuner.search.bo_select`) and the schedule knobs it reads
(:mod:`tuner.search.knobs`).

Imports the core and :mod:`tuner.engine`; never the cost models' code or the application.
"""
