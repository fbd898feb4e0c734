"""The collector measures for real, resumes without duplicates, and summarizes; bad lines
are skipped."""

from __future__ import annotations

import gzip
import json
import os

import collect
from metatune.records import RECORD_FILE, ReadStats, iter_records


def test_corrupt_record_is_skipped_and_counted(tmp_path, caplog):
    good = json.dumps([0, [[["a"], []], [0.001, 0.002], {}, []]])
    failed = json.dumps([0, [[["b"], []], None, {}, []]])
    (tmp_path / RECORD_FILE).write_text("\n".join([good, "[0, [[", failed, "{}"]) + "\n")
    stats = ReadStats()
    records = list(iter_records(str(tmp_path), stats))
    assert [r.valid for r in records] == [True, False]
    assert records[0].mean_seconds == 0.0015
    assert stats.corrupt == 2 and stats.corrupt_lines == [2, 4] and stats.records == 2
    assert "corrupt record skipped" in caplog.text


def _traces(path: str) -> list[str]:
    with gzip.open(path, "rt") as f:
        return [json.dumps(json.loads(line)[1][0]) for line in f if line.strip()]


def test_collect_resumes_without_duplicates(tmp_path, capsys):
    base = [f"out={tmp_path / 'data'}", f"work_dir={tmp_path / 'work'}", "splits=[train]",
            "per_kind=1", "limit=1", "trials_per_round=4", "progress=false",
            "runner.min_repeat_ms=10"]
    assert collect.main(["run", *base, "train_samples=4"]) == 0
    packed = tmp_path / "data" / "train" / (RECORD_FILE + ".gz")
    first = _traces(str(packed))
    assert 4 <= len(first) <= 8  # failed samples are replaced, up to 2x attempts
    meta = json.loads((tmp_path / "data" / "train" / "meta.json").read_text())
    assert meta["workloads"][0]["kind"] == "conv1d" and meta["machine"]["cpu"]
    assert meta["settings"]["tvm_threads"] == meta["settings"]["cores"] >= 1
    assert meta["settings"]["pack_weights"] and meta["settings"]["cpu_flags"] is not None
    # samples measured under other settings never mix into it
    assert collect.main(["run", *base, "train_samples=4", "runner.min_repeat_ms=20"]) == 2
    err = capsys.readouterr().err
    assert "measured with other settings" in err and "min_repeat_ms" in err
    # the working copy is gone (as on a fresh clone): the rerun unpacks and continues
    os.remove(tmp_path / "work" / "train" / RECORD_FILE)
    assert collect.main(["run", *base, "train_samples=6"]) == 0
    second = _traces(str(packed))
    assert second[: len(first)] == first and len(second) >= 6
    assert len(set(second)) == len(second), "a schedule was measured twice"
    capsys.readouterr()
    assert collect.main(["summary", "--json", *base]) == 0
    summary = json.loads(capsys.readouterr().out)["train"]
    assert summary["workloads"] == 1
    assert summary["valid_samples"] + summary["failed_samples"] == len(second)
    assert summary["valid_samples"] == 6 or len(second) == 12
    assert summary["per_kind"]["conv1d"]["workloads"] == 1
    # a run keeps the summary beside the splits (the dataset's README cites it)
    kept = json.loads((tmp_path / "data" / "summary.json").read_text())["train"]
    assert kept["valid_samples"] == summary["valid_samples"]


def test_heldout_split_collects_network_convolutions(tmp_path, capsys):
    args = [f"out={tmp_path / 'data'}", f"work_dir={tmp_path / 'work'}", "splits=[heldout]",
            "networks=[alexnet]", "limit=1", "heldout_samples=2", "trials_per_round=2",
            "progress=false", "runner.min_repeat_ms=10"]
    assert collect.main(["run", *args]) == 0
    meta = json.loads((tmp_path / "data" / "heldout" / "meta.json").read_text())
    assert meta["workloads"][0]["name"].startswith("alexnet/fused_conv2d")
    assert meta["workloads"][0]["kind"] == "network-conv"
    assert meta["networks"] == ["alexnet"]  # what the split is made of, recorded
    capsys.readouterr()
    assert collect.main(["summary", "--json", *args]) == 0
    summary = json.loads(capsys.readouterr().out)["heldout"]
    assert summary["workloads"] == 1 and summary["valid_samples"] >= 2


def test_train_networks_split_takes_other_networks_convs_and_never_a_heldout_one():
    from tuner.app.collect import network_entries, network_hashes
    from tuner.app.collect_config import load_collect_config
    from tuner.engine.targets import resolve_target

    cfg = load_collect_config(["splits=[train-networks]"])
    assert cfg.train_networks_samples == 48 and "alexnet" not in cfg.train_networks
    target = resolve_target("llvm").target
    entries = network_entries(("torchvision.models:alexnet",), target, 2, "train-networks")
    assert len(entries) == 5 and entries[0].name.startswith("alexnet/fused_conv2d")
    assert {e.kind for e in entries} == {"network-conv"}
    assert {e.split for e in entries} == {"train-networks"}
    held = network_hashes(("alexnet",), target, "NCHW")  # the same convs, held out
    assert network_entries(("torchvision.models:alexnet",), target, 2, "train-networks",
                           exclude=held) == []


def test_more_networks_split_leaves_out_the_train_networks_and_heldout_tasks():
    from tvm_ffi import structural_hash

    from tuner.app.collect import conv_tasks, network_hashes, plan_split
    from tuner.app.collect_config import load_collect_config
    from tuner.engine.targets import resolve_target

    one, two, three = (f"tests.models:{n}" for n in ("one_conv", "two_convs", "three_convs"))
    target = resolve_target("llvm").target
    cfg = load_collect_config(["splits=[train-more-networks]", f"networks=[{one}]",
                               f"train_networks=[{two}]", f"more_networks=[{two},{three}]"])
    entries = plan_split(cfg, "train-more-networks", target)
    assert len(entries) == 1 and entries[0].split == "train-more-networks"
    assert entries[0].name.startswith("three_convs/") and entries[0].samples == 48
    assert entries[0].info["networks"] == ["three_convs"]  # the one task only it has
    known = network_hashes((two,), target, "NCHW")
    assert len(known) == 2 and structural_hash(entries[0].mod) not in known
    assert network_hashes((one,), target, "NCHW") < known
    assert conv_tasks(two, target, "NCHW") is conv_tasks(two, target, "NCHW")  # extracted once


def test_a_network_split_leaves_out_every_earlier_network_splits_tasks():
    from tuner.app.collect import plan_split
    from tuner.app.collect_config import load_collect_config
    from tuner.engine.targets import resolve_target

    one, two, three = (f"tests.models:{n}" for n in ("one_conv", "two_convs", "three_convs"))
    target = resolve_target("llvm").target
    base = ["splits=[train-mobile-networks-nhwc]", f"networks=[{one}]"]
    cfg = load_collect_config([*base, f"train_networks=[{one}]", f"more_networks=[{two}]",
                               f"mobile_networks=[{three}]"])
    entries = plan_split(cfg, "train-mobile-networks-nhwc", target)
    assert [e.name.split("/")[0] for e in entries] == ["three_convs"]  # its own third conv
    assert entries[0].split == "train-mobile-networks-nhwc"
    cfg = load_collect_config([*base, f"train_networks=[{three}]", f"more_networks=[{one}]",
                               f"mobile_networks=[{two},{three}]"])
    assert plan_split(cfg, "train-mobile-networks-nhwc", target) == []  # all seen before


def test_a_resumed_network_split_may_add_networks_but_not_drop_one(tmp_path, caplog):
    import logging

    import pytest

    from metatune.errors import DatasetSettingsError
    from tuner.app.collect import check_networks
    from tuner.app.collect_config import load_collect_config

    split = tmp_path / "train-more-networks-nhwc"
    split.mkdir()
    (split / "meta.json").write_text(json.dumps({"networks": ["a:x", "b:y"]}))
    fewer = load_collect_config([f"out={tmp_path}", f"work_dir={tmp_path / 'w'}",
                                 "more_networks=[a:x]"])
    check_networks(fewer, "train-more-networks-nhwc")  # begun, nothing measured: any networks
    with gzip.open(split / "database_tuning_record.json.gz", "wt") as f:
        f.write('[0, [[], [], [], null], [0.001], null]\n')
    cfg = load_collect_config([f"out={tmp_path}", "more_networks=[a:x,b:y,c:z]"])
    with caplog.at_level(logging.INFO, logger="tuner.app.collect_dataset"):
        check_networks(cfg, "train-more-networks-nhwc")
    assert "adding the conv tasks of c:z" in caplog.text
    with pytest.raises(DatasetSettingsError, match=r"from b:y too, which more_networks= now"):
        check_networks(load_collect_config([f"out={tmp_path}", "more_networks=[a:x]"]),
                       "train-more-networks-nhwc")
    check_networks(cfg, "train-nhwc")  # generated workloads: no networks to check


def test_nhwc_splits_collect_nhwc_workloads_and_record_their_layout(tmp_path, capsys):
    args = [f"out={tmp_path / 'data'}", f"work_dir={tmp_path / 'work'}",
            "splits=[train-nhwc,heldout-nhwc]", "networks=[alexnet]", "per_kind=1", "limit=1",
            "train_samples=2", "heldout_samples=2", "trials_per_round=2", "progress=false",
            "runner.min_repeat_ms=10"]
    assert collect.main(["run", *args]) == 0
    train = json.loads((tmp_path / "data" / "train-nhwc" / "meta.json").read_text())
    assert train["workloads"][0]["name"].endswith("_nhwc")
    assert train["workloads"][0]["layout"] == "NHWC"
    assert train["workloads"][0]["kind"] == "conv2d"  # the first NHWC kind
    held = json.loads((tmp_path / "data" / "heldout-nhwc" / "meta.json").read_text())
    assert held["workloads"][0]["name"].startswith("alexnet/")
    assert train["settings"]["layout"] == held["settings"]["layout"] == "NHWC"
    capsys.readouterr()
    assert collect.main(["summary", "--json", *args]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["train-nhwc"]["valid_samples"] >= 2
    assert summary["heldout-nhwc"]["valid_samples"] >= 2


def test_a_workload_whose_search_fails_is_skipped(tmp_path, monkeypatch, caplog):
    """A TVM error inside the search of one workload (seen on a winograd design space) costs
    that workload only: the collector logs it and measures the next."""
    import tuner.app.collect as collector

    real, calls = collector._measure, []

    def flaky(entry, **kw):
        calls.append(entry.name)
        if len(calls) == 1:
            raise RuntimeError("parallel_for_dynamic error with The block no longer exists")
        return real(entry, **kw)

    monkeypatch.setattr(collector, "_measure", flaky)
    assert collect.main(["run", f"out={tmp_path / 'data'}", f"work_dir={tmp_path / 'work'}",
                         "splits=[train]", "per_kind=1", "limit=2", "train_samples=4",
                         "trials_per_round=4", "progress=false",
                         "runner.min_repeat_ms=10"]) == 0
    assert "TVM's search failed" in caplog.text and len(set(calls)) == 2
