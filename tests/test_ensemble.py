"""Several checkpoints as one cost model: the mean, each adapting, one encoding, save/load."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tvm.s_tir import meta_schedule as ms

from metatune.errors import CheckpointError, ConfigError
from metatune.maml import AdaptConfig
from tuner.models.cost_model import MetaTuneCostModel
from tuner.models.ensemble import EnsembleCostModel
from tuner.models.trained import load_model


def _fresh(seed: int, graph: str = "super"):
    torch.manual_seed(seed)
    return load_model(None, graph=graph, from_scratch=True, hidden=16,
                      adapt=AdaptConfig(steps=30, lr=0.05))


def _results(n: int) -> list:
    return [ms.runner.RunnerResult([1e-3 * (1 + (i * 7) % n)], None) for i in range(n)]


def test_the_ensemble_is_the_mean_of_its_members_alone(context_and_candidates):
    ctx, cands = context_and_candidates
    ens = EnsembleCostModel(models=[_fresh(0), _fresh(1)], graph="super")
    alone = [MetaTuneCostModel(model=_fresh(s)) for s in (0, 1)]
    expect = np.mean([m.predict(ctx, cands) for m in alone], axis=0)
    assert np.allclose(ens.predict(ctx, cands), expect, atol=1e-6)
    ens.update(ctx, cands, _results(len(cands)))  # each member adapts as it would alone
    for m in alone:
        m.update(ctx, cands, _results(len(cands)))
    expect = np.mean([m.predict(ctx, cands) for m in alone], axis=0)
    assert np.allclose(ens.predict(ctx, cands), expect, atol=1e-5)


def test_the_ensemble_hashes_each_candidate_once(context_and_candidates, monkeypatch):
    import tvm_ffi

    ctx, cands = context_and_candidates
    ens = EnsembleCostModel(models=[_fresh(0), _fresh(1), _fresh(2)], graph="super")
    hashed = []
    real = tvm_ffi.structural_hash
    monkeypatch.setattr(tvm_ffi, "structural_hash", lambda m, *a: hashed.append(m) or real(m, *a))
    ens.predict(ctx, cands)
    assert len([m for m in hashed if not m.same_as(ctx.mod)]) == len(cands)
    hashed.clear()
    ens.update(ctx, cands, _results(len(cands)))  # fine-tuning: once too, not per member
    assert len([m for m in hashed if not m.same_as(ctx.mod)]) == len(cands)


def test_the_members_encode_each_candidate_once(context_and_candidates, monkeypatch):
    import tuner.models.cost_model as cm

    ctx, cands = context_and_candidates
    calls = []
    encode = cm.encode
    monkeypatch.setattr(cm, "encode", lambda f, g: calls.append(g) or encode(f, g))
    ens = EnsembleCostModel(models=[_fresh(0), _fresh(1), _fresh(2)], graph="super")
    ens.predict(ctx, cands)
    assert len(calls) == len(cands)


def test_save_load_round_trip_and_a_wrong_file(context_and_candidates, tmp_path):
    ctx, cands = context_and_candidates
    ens = EnsembleCostModel(models=[_fresh(0), _fresh(1)], graph="super")
    ens.update(ctx, cands, _results(len(cands)))
    path = str(tmp_path / "ens.pt")
    ens.save(path)
    other = EnsembleCostModel(models=[_fresh(2), _fresh(3)], graph="super")
    other.load(path)
    assert np.allclose(other.predict(ctx, cands), ens.predict(ctx, cands))
    three = EnsembleCostModel(models=[_fresh(0), _fresh(1), _fresh(2)], graph="super")
    with pytest.raises(Exception, match="2 members, this ensemble 3"):
        three.load(path)  # crosses TVM's FFI: the message survives, the type does not
    MetaTuneCostModel(model=_fresh(0)).save(path)
    with pytest.raises(Exception, match="cannot load the MetaTune cost model"):
        other.load(path)


def test_a_failed_load_changes_no_member(context_and_candidates, tmp_path):
    ctx, cands = context_and_candidates
    ens = EnsembleCostModel(models=[_fresh(0), _fresh(1)], graph="super")
    wider = MetaTuneCostModel(model=load_model(None, from_scratch=True, hidden=32))
    path = str(tmp_path / "mixed.pt")
    torch.save({"members": [ens.members[1].state(), wider.state()]}, path)
    before = ens.predict(ctx, cands)
    with pytest.raises(Exception, match="cannot load the MetaTune cost model"):
        ens.load(path)  # the first member loads, the second does not: both stay
    assert np.allclose(ens.predict(ctx, cands), before)


def test_a_saved_model_of_the_other_graph_mode_is_refused(tmp_path):
    path = str(tmp_path / "plain.pt")
    MetaTuneCostModel(model=_fresh(0, graph="plain"), graph="plain").save(path)
    with pytest.raises(Exception, match="saved with plain graphs, this model encodes super"):
        MetaTuneCostModel(model=_fresh(0)).load(path)


def test_an_ensemble_needs_two_members_of_one_graph_mode():
    with pytest.raises(ConfigError, match="at least two"):
        EnsembleCostModel(models=[_fresh(0)], graph="super")
    with pytest.raises(ConfigError, match="mixes graph modes"):
        EnsembleCostModel(models=[_fresh(0), _fresh(1, graph="plain")], graph="super")


def test_the_config_makes_an_ensemble_of_shipped_checkpoints():
    from metatune.config import default_checkpoint
    from tuner.app.factories import make_cost_model
    from tuner.models.params import MetaTuneModelConfig

    ckpt = default_checkpoint(graph="super")
    model = make_cost_model("metatune", num_cores=1,
                            metatune=MetaTuneModelConfig(checkpoint=ckpt, ensemble=[ckpt]))
    assert isinstance(model, EnsembleCostModel) and len(model.members) == 2
    with pytest.raises(ConfigError, match="from_scratch"):
        MetaTuneModelConfig(checkpoint=ckpt, ensemble=[ckpt], from_scratch=True)
    with pytest.raises(CheckpointError, match="trained on super graphs, not plain"):
        make_cost_model("metatune", num_cores=1,
                        metatune=MetaTuneModelConfig(checkpoint=default_checkpoint(graph="plain"),
                                                     graph="plain", ensemble=[ckpt]))
