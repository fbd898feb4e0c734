"""Local refinement in a real tuning run: the tiny conv net, MetaTune + BO, three rounds."""

from __future__ import annotations

import json
import os

import pytest

import tuner.app.factories as factories
from tuner.app.config import load_tune_config
from tuner.app.run import run_tune
from tuner.engine.database import RECORD_FILE
from tuner.search.refine import with_refine
from tuner.search.refine_neighbours import RefineTally


@pytest.mark.slow
def test_refinement_tunes_with_neighbours_and_no_repeats(tmp_path, monkeypatch):
    tally = RefineTally()
    monkeypatch.setattr(factories, "with_refine",
                        lambda search, params, seed=0: with_refine(search, params, seed=seed,
                                                                   tally=tally))
    overrides = [
        "network=null", "model=tests.models:tiny_convnet", "input_shape=[8,16,16]",
        "layout=NCHW",  # one conv task
        f"work_dir={tmp_path}", "trials=24", "trials_per_round=8",
        "search_params.population_size=32", "search_params.init_min_unmeasured=8",
        "search_params.bo.population=32", "search_params.bo.pool_size=32",
        "search_params.bo.mc_samples=32", "search_params.refine.enabled=true",
        "search_params.refine.candidates=2", "search_params.refine.max_share=0.25",
        "search_params.refine.pool=16",
        "runner.min_repeat_ms=10", "evaluate.enabled=false", "progress=false",
        "tensorboard=false", "log_level=WARNING", "cost_model=metatune", "search=bo",
        "metatune.from_scratch=true",
    ]
    report = run_tune(load_tune_config(overrides=overrides))
    assert report["trials_run"] == 24 and report["failures"] < 24
    # rounds 2 and 3 each held 2 neighbours of the best measured so far
    assert (tally.rounds, tally.served, tally.candidates) == (2, 2, 4)
    assert tally.replay.applied > 0
    with open(os.path.join(tmp_path, RECORD_FILE)) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    keys = [json.dumps([row[0], row[1][0]]) for row in rows]  # workload and trace
    assert len(keys) == 24 and len(set(keys)) == 24, "a candidate was measured twice"
