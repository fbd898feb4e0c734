"""Search strategies: batch Bayesian optimization (:mod:`tuner.search.bo`), its batch
selection (:mod:`tuner.search.bo_select`) and the schedule knobs it reads
(:mod:`tuner.search.knobs`); the RL search after Chameleon (:mod:`tuner.search.rl`), its
decision space (:mod:`tuner.search.rl_space`), PPO policy (:mod:`tuner.search.rl_policy`),
rollouts (:mod:`tuner.search.rl_explore`) and clustered sampling
(:mod:`tuner.search.rl_sampling`).

Imports the core and :mod:`tuner.engine`; never the cost models' code or the application.
"""
