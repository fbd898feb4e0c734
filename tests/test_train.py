"""train.py on a tiny real dataset: splits, fast_dev_run, checkpoint round trip, config errors."""

from __future__ import annotations

import pytest
import torch

from datamodules.graphs import EpisodeDataset, split_workloads, support_relative
from lightning_modules.app import run_train
from lightning_modules.config import load_train_config
from lightning_modules.meta import MetaModule
from metatune.dataset import load_split
from metatune.errors import ConfigError
from metatune.graph import NODE_FEATURES


def _overrides(root, **extra) -> list[str]:
    base = {"data_dir": root / "ds", "cache_dir": root / "cache", "log_dir": root / "runs",
            "out": root / "model.ckpt", "pretrain.epochs": 2, "meta.steps": 3,
            "meta.val_every": 3, "meta.ways": 2, "meta.shots": 2, "meta.queries": 2,
            "meta.tasks_per_batch": 2, "meta.val_tasks": 2, "model.hidden": 8,
            "model.head_hidden": 8, "data.batch_size": 4, "accelerator": "cpu",
            "overwrite": "true"}  # the tests write one checkpoint again and again
    base.update(extra)
    return [f"{k}={v}" for k, v in base.items()]


@pytest.mark.parametrize("mode", ["super", "plain"])
def test_dataset_targets_are_relative_throughput(tiny_data, mode):
    workloads = load_split(str(tiny_data / "ds" / "train"), mode, str(tiny_data / "cache"))
    assert [w.kind for w in workloads] == ["conv1d", "conv1d_transpose"]
    for w in workloads:
        ys = torch.cat([g.y for g in w.graphs])
        assert float(ys.max()) == 1.0 and float(ys.min()) > 0.0
        best = min(float(g.seconds) for g in w.graphs)
        assert all(abs(float(g.y) - best / float(g.seconds)) < 1e-6 for g in w.graphs)


def test_splits_are_disjoint_by_workload(tiny_data):
    workloads = load_split(str(tiny_data / "ds" / "train"), "super", str(tiny_data / "cache"))
    doubled = workloads + [type(w)(w.name + "-copy", w.kind, w.graphs) for w in workloads]
    train, val = split_workloads(doubled, 0.5, seed=0)
    assert {w.name for w in train}.isdisjoint({w.name for w in val})
    assert {w.kind for w in train} == {w.kind for w in doubled}  # every kind trains
    assert len(train) + len(val) == len(doubled)
    support, query = next(iter(EpisodeDataset(workloads, ways=2, shots=2, queries=3)))
    assert support.num_graphs == 4 and query.num_graphs == 6


def test_support_relative_targets_scale_each_workload_by_its_support_best():
    s, q = support_relative(torch.tensor([0.5, 0.25, 1.0, 0.8]),
                            torch.tensor([1.0, 0.1, 0.4, 0.9]), ways=2)
    assert torch.allclose(s, torch.tensor([1.0, 0.5, 1.0, 0.8]))
    assert torch.allclose(q, torch.tensor([2.0, 0.2, 0.4, 0.9]))  # may exceed 1, as online


def test_support_targets_episodes_leave_the_dataset_as_it_was():
    from torch_geometric.data import Data

    from metatune.dataset import WorkloadSamples

    def graph(y: float) -> Data:
        return Data(x=torch.zeros(2, 3), edge_index=torch.tensor([[0], [1]]),
                    y=torch.tensor([y]))

    workloads = [WorkloadSamples(f"w{i}", "conv2d", [graph(v) for v in (1.0, 0.5, 0.25, 0.2)])
                 for i in range(2)]
    support, query = next(iter(EpisodeDataset(workloads, ways=2, shots=2, queries=2,
                                              targets="support")))
    assert torch.allclose(support.y.view(2, 2).max(dim=1).values, torch.ones(2))
    assert float(query.y.max()) <= 1.0 / 0.2 and float(query.y.max()) > 0
    assert torch.allclose(torch.cat([g.y for g in workloads[0].graphs]),
                          torch.tensor([1.0, 0.5, 0.25, 0.2]))


def test_fast_dev_run_and_checkpoint_round_trip(tiny_data):
    result = run_train(load_train_config(overrides=_overrides(tiny_data, fast_dev_run=True)))
    result = run_train(load_train_config(overrides=[*_overrides(tiny_data), "overwrite=true"]))
    assert "meta/val_query_loss_after" in result["metrics"]
    import json

    from metatune.provenance import sidecar_path

    with open(sidecar_path(result["checkpoint"])) as f:
        provenance = json.load(f)  # how, where and when the checkpoint was made
    assert provenance["data"]["train_workloads"] and provenance["machine"]["date"]
    assert provenance["config"]["graph"] == "super"
    # paths as resolved (relative to the repository only when inside it)
    assert provenance["config"]["out"] == result["checkpoint"] == str(tiny_data / "model.ckpt")
    module = MetaModule.load_from_checkpoint(result["checkpoint"], map_location="cpu")
    assert "zero_shot_weight" not in module.hparams  # retired: no longer saved
    net = module.net.eval()
    workloads = load_split(str(tiny_data / "ds" / "train"), "super", str(tiny_data / "cache"))
    from torch_geometric.data import Batch

    batch = Batch.from_data_list(workloads[0].graphs)
    again = MetaModule.load_from_checkpoint(result["checkpoint"], map_location="cpu").net.eval()
    from metatune.checkpoint import load

    plain, inner, hparams = load(result["checkpoint"])  # the tuner's reader, no Lightning
    assert inner.cfg == module.inner.cfg
    with torch.no_grad():
        a = net(batch.x, batch.edge_index, batch.batch)
        b = again(batch.x, batch.edge_index, batch.batch)
        c = plain(batch.x, batch.edge_index, batch.batch)
    assert torch.equal(a, b) and torch.equal(a, c) and a.shape == (len(workloads[0].graphs),)
    assert float(net.x_std.min()) > 0  # normalization statistics travel in the checkpoint
    assert not torch.equal(net.x_mean, torch.zeros_like(net.x_mean))


@pytest.mark.parametrize("override, message", [
    ("meta.nope=1", "nope"), ("graph=fancy", "super or plain"), ("meta.shots=0", "positive"),
    ("pretrain.lr=fast", "lr"), ("meta.targets=best", "workload, support"),
    ("data.splits=[train,heldout]", "evaluation only"), ("data.splits=[]", "training splits"),
    ("meta.zero_shot_weight=1", "meta.zero_shot_weight is retired"),
    ("pretrain.top_weight=4", "pretrain.top_weight is retired"),
])
def test_bad_config(override, message):
    with pytest.raises(ConfigError, match=message):
        load_train_config(overrides=[override])


def test_meta_training_lowers_the_query_loss_after_adaptation(tiny_data):
    """MAML's objective on real measured tasks: the query loss after adapting on the support
    set falls as the initial weights are meta-trained (same tasks before and after)."""
    from itertools import islice

    torch.manual_seed(0)
    workloads = load_split(str(tiny_data / "ds" / "train"), "super", str(tiny_data / "cache"))
    tasks = list(islice(iter(EpisodeDataset(workloads, ways=2, shots=3, queries=3, seed=0)), 4))
    module = MetaModule(NODE_FEATURES, hidden=8, head_hidden=8, beta=1e-2,
                        adapt={"steps": 2, "lr": 0.05, "loss": "mse"}, graph="super")
    x = torch.cat([g.x for w in workloads for g in w.graphs])
    module.net.set_normalization(x.mean(0), x.std(0))
    opt = module.configure_optimizers()

    def query_loss() -> torch.Tensor:
        return torch.stack([module.task_losses(s, q, 2)[1] for s, q in tasks]).mean()

    before = float(query_loss())
    for _ in range(60):
        opt.zero_grad()
        query_loss().backward()
        opt.step()
    assert float(query_loss()) < 0.95 * before


def test_an_older_checkpoints_retired_zero_shot_weight_loads_at_zero_only():
    """Lightning passes a checkpoint's saved settings back: ``zero_shot_weight=0`` (what
    the shipped checkpoints store) is dropped, any other value refused."""
    from metatune.errors import CheckpointError

    module = MetaModule(NODE_FEATURES, hidden=8, head_hidden=8, zero_shot_weight=0.0)
    assert "zero_shot_weight" not in module.hparams
    with pytest.raises(CheckpointError, match="zero_shot_weight=2.0, an option retired"):
        MetaModule(NODE_FEATURES, hidden=8, head_hidden=8, zero_shot_weight=2.0)

def test_two_cpu_processes_train_and_write_the_same_checkpoint_format(tiny_data):
    """DDP (gloo) over two CPU processes: a few steps, one checkpoint the tuner loads."""
    from tuner.models.trained import load_model

    cfg = load_train_config(overrides=_overrides(
        tiny_data, out=tiny_data / "ddp.ckpt", log_dir=tiny_data / "runs-ddp",
        strategy="ddp_spawn", devices=2, **{"pretrain.epochs": 1, "meta.steps": 2,
                                            "meta.val_every": 2}))
    result = run_train(cfg)
    model = load_model(result["checkpoint"], graph="super")
    assert model.graph == "super" and model.inner.cfg.steps >= 1
    blob = torch.load(result["checkpoint"], map_location="cpu", weights_only=True)
    assert {"state_dict", "hyper_parameters"} <= set(blob)


def test_training_splits_are_read_together(tiny_data, tmp_path):
    """``data.splits=[train,train-nhwc]``: both folders' workloads train one model."""
    import shutil

    from datamodules.graphs import GraphDataModule

    ds = tmp_path / "ds"
    shutil.copytree(tiny_data / "ds" / "train", ds / "train")
    shutil.copytree(tiny_data / "ds" / "train", ds / "train-nhwc")
    one = GraphDataModule(str(ds / "train"), "plain", str(tmp_path / "cache"), val_fraction=0)
    two = GraphDataModule([str(ds / "train"), str(ds / "train-nhwc")], "plain",
                          str(tmp_path / "cache"), val_fraction=0)
    one.setup(), two.setup()
    assert len(two.train_workloads) == 2 * len(one.train_workloads)


def test_nhwc_twins_fall_on_the_same_side_of_the_validation_split(tiny_data):
    workloads = load_split(str(tiny_data / "ds" / "train"), "plain", str(tiny_data / "cache"))
    many = [type(w)(f"{w.kind}_{i}", w.kind, w.graphs) for i in range(6) for w in workloads]
    twins = many + [type(w)(w.name + "_nhwc", w.kind, w.graphs) for w in many]
    train, val = split_workloads(twins, 0.5, seed=0)
    assert val and {w.name.removesuffix("_nhwc") for w in train}.isdisjoint(
        {w.name.removesuffix("_nhwc") for w in val})
    # the twins do not change which workloads go to validation
    plain_train, plain_val = split_workloads(many, 0.5, seed=0)
    assert [w.name for w in plain_val] == [w.name for w in val if not w.name.endswith("_nhwc")]


def test_workload_batches_hold_chunks_of_one_workload_each():
    from datamodules.graphs import WorkloadBatchSampler

    sizes = [5, 3, 8]
    starts = [0, 5, 8]
    sampler = WorkloadBatchSampler(sizes, per_workload=2, batch_size=4, seed=0)
    first, second = list(sampler), list(sampler)
    assert len(first) == len(sampler) == 5  # 3 + 2 + 4 chunks, 2 chunks a batch
    flat = [i for b in first for i in b]
    assert sorted(flat) == list(range(16))  # every graph once an epoch
    assert first != second  # reshuffled each epoch

    def wid(i):
        return max(k for k, s in enumerate(starts) if s <= i)

    for batch in first:  # two chunks a batch: graphs of at most two workloads
        assert len({wid(i) for i in batch}) <= 2
    val = WorkloadBatchSampler(sizes, 2, 4, shuffle=False)
    assert list(val) == list(val) and list(val)[0] == [0, 1, 2, 3]


def test_pretraining_with_a_ranking_loss(tiny_data):
    result = run_train(load_train_config(overrides=_overrides(
        tiny_data, **{"pretrain.loss": "mse+rank", "pretrain.per_workload": 2,
                      "meta.steps": 0, "out": tiny_data / "rank.ckpt"})))
    assert result["metrics"]["pretrain/train_loss"] > 0
    with pytest.raises(ConfigError, match="per_workload"):
        load_train_config(overrides=["pretrain.loss=mse+rank"])
    with pytest.raises(ConfigError, match="not supported yet"):
        load_train_config(overrides=["pretrain.loss=mse+rank", "pretrain.per_workload=4",
                                     "devices=2"])


def test_train_never_replaces_a_file_it_was_not_asked_to(tiny_data, tmp_path):
    """The default checkpoint is the user's (runs/train), never a shipped one; a file at
    ``out`` (or its .json) is replaced only with overwrite=true, refused before anything
    slow (issue 63)."""
    from metatune.config import repo_path

    cfg = load_train_config()
    assert cfg.out == repo_path("runs", "train", f"{cfg.data_dir.rsplit('/', 1)[-1]}-super.ckpt")
    assert not cfg.overwrite
    out = tmp_path / "mine.ckpt"
    for existing in (out, tmp_path / "mine.json"):  # the checkpoint and its provenance
        existing.write_text("keep me")
        with pytest.raises(ConfigError, match="overwrite=true"):
            run_train(load_train_config(overrides=_overrides(tiny_data, out=out,
                                                             overwrite="false")))
        assert existing.read_text() == "keep me"
        existing.unlink()
