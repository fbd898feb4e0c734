"""The comparison's statistics: best-so-far curves against trials and tuning seconds,
trials and seconds to xgb's best, bests at equal tuning time, per-task and overall
summaries, early-round accuracy and the end-to-end rows."""

from __future__ import annotations

import math
from collections.abc import Callable

from bench.common import geomean, median

BASELINE = "xgb"
BASELINES = ("xgb", "xgb-Xfer")  # TVM's own tuners; every other preset is MetaTune
EARLY_ROUNDS = 8  # rounds shown in the early-iteration accuracy curves (paper Figure 9)
#: The paper's headline claims (section 6, Figure 5: the four networks' inference time):
#: (framework, against, its speed-up in %).
PAPER_HEADLINES = (("meta-BO-T", "xgb", 8.0), ("meta-BO-T", "RL", 13.0), ("meta-RL", "RL", 7.0))


def trials_to_reach(curve: list[list[float]], target_ms: float) -> float | None:
    """The first x (trials, or seconds for a :func:`time_curve`) whose best-so-far is at
    most ``target_ms`` (``None``: never)."""
    for x, best in curve:
        if best is not None and best <= target_ms * (1 + 1e-9):
            return x
    return None


def round_seconds(run: dict) -> list[tuple[int | None, float]]:
    """``[(trial, seconds)]`` per round: trials measured by its end, and the run's cumulative
    search + measurement + model-update seconds by then (the run's tuning time)."""
    out, seconds = [], 0.0
    for r in run["rounds"]:
        seconds += sum(r.get(key) or 0.0 for key in ("search_s", "measure_s", "update_s"))
        out.append((r.get("trial"), seconds))
    return out


def time_curve(run: dict) -> list[list[float]]:
    """``[[seconds, best_ms]]`` per round: the run's best against :func:`round_seconds`."""
    best = {int(t): b for t, b in run["curve"]}
    return [[seconds, best[trial]] for trial, seconds in round_seconds(run) if trial in best]


def best_at(curve: list[list[float]], x: float) -> float | None:
    """Best-so-far latency at ``x`` trials (or seconds, for a :func:`time_curve`): that of
    the last round not past it; ``None`` before the first."""
    best = None
    for t, b in curve:
        if t > x:
            break
        best = b
    return best


def equal_time_budgets(runs: list[dict]) -> dict[int, float]:
    """Per seed, the shortest tuning time (search + measurement + model update, as
    :func:`time_curve` counts it) of the runs given, all of one task: the wall-time budget
    at which every framework is compared with equal time.

    Only seeds that every preset among ``runs`` has finished get a budget (in a partial
    run, the seed under way has none), and only runs with round timings count.
    """
    presets = {r["preset"] for r in runs}
    ends: dict[int, dict[str, float]] = {}
    for r in runs:
        curve = time_curve(r)
        if curve and curve[-1][0] > 0:
            ends.setdefault(r["seed"], {})[r["preset"]] = curve[-1][0]
    return {seed: min(v.values()) for seed, v in ends.items() if set(v) == presets}


def task_group(run: dict) -> tuple[str, int]:
    """A task run's group: its task and seed."""
    return run["task"], run["seed"]


def network_group(report: dict) -> tuple[str, int]:
    """A network run's group: its network and seed (a ``tune.py`` report keeps the seed in
    its config; seed 0 when it does not say)."""
    return report["network"], report.get("config", {}).get("seed") or 0


def complete_groups(runs: list[dict], presets: list[str],
                    group: Callable[[dict], tuple[str, int]] = task_group,
                    ) -> tuple[list[dict], list[str]]:
    """Split the runs into those of complete groups (one task or network and seed with a
    run of every preset) and a label per incomplete one.

    A ratio is only fair within a group, and a group is only comparable with the others
    once every preset has run: an incomplete group (the one under way, or one begun on a
    machine that went away) would pair xgb with itself alone, so it is left out of every
    statistic and listed instead.

    Args:
        runs: Run records with a ``preset``: task runs, or network runs' reports.
        presets: The presets a group needs.
        group: A run's group, ``(name, seed)``: :func:`task_group` (the default) or
            :func:`network_group`.

    Returns:
        ``(complete, partial)``: the runs of complete groups, in their order, and one
        ``"name seed N (k of n presets)"`` label per incomplete group.
    """
    done: dict[tuple[str, int], set[str]] = {}
    for r in runs:
        done.setdefault(group(r), set()).add(r["preset"])
    need = set(presets)
    complete = [r for r in runs if need <= done[group(r)]]
    partial = [f"{name} seed {seed} ({len(have & need)} of {len(need)} presets)"
               for (name, seed), have in done.items() if not need <= have]
    return complete, partial


def summarize(runs: list[dict], presets: list[str], trials: int, batch: int) -> dict:
    """Per task and preset: final bests, curves, trials to xgb's best, bests at equal
    tuning time, accuracy.

    Every comparison with xgb is paired by seed: a run is set against xgb's run of the same
    task and seed (one group, measured on one machine: :func:`frameworks.plan.run_tasks`),
    and the medians are over those per-seed ratios, so groups measured on different
    machines can be pooled. The latencies themselves (``final_ms``, the curves) are listed
    as measured.
    """
    out: dict = {}
    grid = list(range(batch, trials + 1, batch))
    for task in dict.fromkeys(r["task"] for r in runs):
        per_task = {}
        base = {r["seed"]: r for r in runs if r["task"] == task and r["preset"] == BASELINE}
        budgets = equal_time_budgets([r for r in runs if r["task"] == task])
        base_at_time = {seed: best_at(time_curve(r), budgets[seed])
                        for seed, r in base.items() if seed in budgets}
        for preset in presets:
            mine = sorted((r for r in runs if r["task"] == task and r["preset"] == preset),
                          key=lambda r: r["seed"])
            if not mine:
                continue
            curves = [[best_at(r["curve"], t) for t in grid] for r in mine]
            rounds = [x for r in mine for x in r["rounds"]]
            paired = [(r, base[r["seed"]]["best_ms"]) for r in mine if r["seed"] in base]
            reach = [trials_to_reach(r["curve"], b) for r, b in paired]
            times = [time_curve(r) for r in mine]
            reach_s = [trials_to_reach(time_curve(r), b) for r, b in paired]
            timed = [(r, best_at(t, budgets[r["seed"]])) for t, r in zip(times, mine, strict=False)
                     if r["seed"] in budgets]
            at_time = [v for _, v in timed]
            # a run with no result by then counts as infinitely slow (None)
            at_time_ratio = {r["seed"]: None if v is None else v / base_at_time[r["seed"]]
                             for r, v in timed if base_at_time.get(r["seed"])}
            first = [(c[0], best_at(base[r["seed"]]["curve"], grid[0]))
                     for c, r in zip(curves, mine, strict=False) if r["seed"] in base]
            per_task[preset] = {
                "seeds": [r["seed"] for r in mine],
                "platforms": [r.get("platform") for r in mine],
                "final_ms": [r["best_ms"] for r in mine],
                "median_final_ms": median([r["best_ms"] for r in mine]),
                "final_over_xgb": median([r["best_ms"] / b for r, b in paired
                                          if r["best_ms"] and b]),
                "final_over_xgb_per_seed": {r["seed"]: r["best_ms"] / b for r, b in paired
                                            if r["best_ms"] and b},
                "first_round_over_xgb": median([m / b for m, b in first if m and b]),
                "trials_to_xgb_best": reach,
                "seconds_to_xgb_best": reach_s,
                "time_curves": times,
                "equal_time_s": [budgets[r["seed"]] for r in mine if r["seed"] in budgets],
                "equal_time_ms": at_time,
                "median_equal_time_ms": _median_or_inf(at_time),
                "equal_time_over_xgb": _median_or_inf(list(at_time_ratio.values())),
                "equal_time_over_xgb_per_seed": at_time_ratio,
                "curve_trials": grid,
                "curve_median_ms": [median(list(col)) for col in zip(*curves, strict=False)],
                "curve_min_ms": [min((v for v in col if v), default=None)
                                 for col in zip(*curves, strict=False)],
                "curve_max_ms": [max((v for v in col if v), default=None)
                                 for col in zip(*curves, strict=False)],
                "median_mse": median([x.get("mse") for x in rounds]),
                "median_mse_d": median([x.get("mse_d") for x in rounds]),
                "median_pairwise": median([x.get("pairwise") for x in rounds]),
                **{f"early_{key}": [median([r["rounds"][i].get(key) for r in mine
                                            if i < len(r["rounds"])])
                                    for i in range(EARLY_ROUNDS)]
                   for key in ("mse", "mse_d", "pairwise")},
                "tuning_seconds": median([r["tuning_seconds"] for r in mine]),
                "tuning_over_xgb": median([r["tuning_seconds"] / base[r["seed"]]["tuning_seconds"]
                                           for r in mine if r["seed"] in base
                                           and base[r["seed"]]["tuning_seconds"]]),
            }
        out[task] = per_task
    return out


def _median_or_inf(values: list[float | None]) -> float | None:
    """Median of ``values``, counting ``None`` (no result by then) as infinitely slow;
    ``None`` for no values or an infinite median."""
    m = median([math.inf if v is None else v for v in values])
    return None if m is None or math.isinf(m) else m


def _median_reach(per: list[dict], key: str) -> float | None:
    """Median over all runs of ``key`` (trials or seconds to xgb's best), counting runs that
    never reached it as infinite; ``None`` when that median is infinite."""
    return _median_or_inf([v for s in per for v in s[key]])


def overall(summary: dict, presets: list[str]) -> dict:
    """Per preset, across tasks: the geometric mean of final best over xgb's, of best at
    equal tuning time over xgb's and of best after the first round over xgb's (each the
    median over seeds of the per-seed ratio), on how many tasks it beat xgb, the median over runs of
    the trials and of the tuning seconds to xgb's best (``None`` when most runs never
    reached it), and the median over tasks of its tuning time over xgb's.

    Args:
        summary: ``summarize``'s output.
        presets: The presets, in table order.

    Returns:
        ``{preset: {"geomean_over_xgb", "equal_time_geomean_over_xgb",
        "first_round_geomean_over_xgb", "tasks_better",
        "tasks", "median_trials_to_xgb_best", "median_seconds_to_xgb_best",
        "runs_reaching_xgb_best", "runs", "tuning_time_over_xgb"}}``.
    """
    out = {}
    for preset in presets:
        pairs = [(t[preset], t[BASELINE]) for t in summary.values()
                 if preset in t and BASELINE in t]
        per = [mine for mine, _ in pairs]
        ratios = [s["final_over_xgb"] for s in per if s["final_over_xgb"]]
        if not ratios:
            continue
        times = [mine["tuning_over_xgb"] for mine, _ in pairs if mine.get("tuning_over_xgb")]
        out[preset] = {
            "geomean_over_xgb": geomean(ratios),
            "equal_time_geomean_over_xgb": geomean([s.get("equal_time_over_xgb")
                                                    for s in per]),
            "first_round_geomean_over_xgb": geomean([s.get("first_round_over_xgb")
                                                     for s in per]),
            "tasks_better": sum(r < 1.0 for r in ratios), "tasks": len(ratios),
            "median_trials_to_xgb_best": _median_reach(per, "trials_to_xgb_best"),
            "median_seconds_to_xgb_best": _median_reach(per, "seconds_to_xgb_best"),
            "runs_reaching_xgb_best": sum(v is not None for s in per
                                          for v in s["trials_to_xgb_best"]),
            "runs": sum(len(s["trials_to_xgb_best"]) for s in per),
            "tuning_time_over_xgb": median(times),
        }
    return out


def headlines(summary: dict, networks: list[dict] | None = None,
              side_by_side: list[dict] | None = None) -> list[dict]:
    """The paper's headline claims beside ours (section 6, Figure 5: the four networks'
    inference time after tuning, normalized to xgb): per pair of :data:`PAPER_HEADLINES`,
    the first framework's speed-up over the second, in % of throughput: the geometric mean
    of the second's latency over the first's, minus one, end to end (the networks both
    tuned: :func:`network_rows`) and over the held-out kernels (the tasks both ran), each
    network's or task's ratio the median over seeds of the two runs' ratio; with how many
    it was faster on.

    ``networks_eager`` is the same end to end, from each build's latency over PyTorch
    eager's timed alternately beside it (:func:`network_rows`' ``over_eager_by_seed``): a
    group's runs follow one another over an hour or two, and a shared machine's speed
    drifts in that time (resnet-18's eager latency rose from 18.5 to 23.4 ms within its
    group on 2026-12-03); the ratio to eager divides that drift out.

    ``networks_side`` is the same from the groups whose builds were timed side by side in
    one process (``side_by_side``: ``bench.retime_networks``' records), where the drift does
    not enter at all: the measurement to trust where there is one.

    Returns:
        ``[{"preset", "against", "paper_pct", "networks_pct", "networks_faster",
        "networks", "networks_eager_pct", "networks_eager_faster", "networks_eager",
        "networks_side_pct", "networks_side_faster", "networks_side", "kernels_pct",
        "kernels_faster", "kernels"}]`` (a ``_pct`` is ``None`` when nothing was run by
        both).
    """
    out = []
    for preset, against, paper in PAPER_HEADLINES:
        kernels = [r for t in summary.values() if preset in t and against in t
                   if (r := paired_ratio(t[against], t[preset])) is not None]
        row = {"preset": preset, "against": against, "paper_pct": paper}
        for key, ratios in (
                ("networks", _network_ratios(networks, preset, against, "tuned_ms_by_seed")),
                ("networks_eager",
                 _network_ratios(networks, preset, against, "over_eager_by_seed")),
                ("networks_side", _side_by_side_ratios(side_by_side, preset, against)),
                ("kernels", kernels)):
            row[f"{key}_pct"] = 100.0 * (geomean(ratios) - 1.0) if ratios else None
            row[f"{key}_faster"] = sum(r > 1.0 for r in ratios)
            row[key] = len(ratios)
        out.append(row)
    return out


def _network_ratios(networks: list[dict] | None, preset: str, against: str,
                    key: str) -> list[float]:
    """Per network both presets tuned, the median over their common seeds of ``against``'s
    value over ``preset``'s (``key``: a :func:`network_rows` per-seed mapping)."""
    values = {(r["network"], r["preset"]): r.get(key) or {} for r in networks or []}
    return [ratio for (n, p), mine in values.items() if p == preset
            if (ratio := median([values[(n, against)][s] / v for s, v in mine.items()
                                 if v and values.get((n, against), {}).get(s)]))]


def _side_by_side_ratios(records: list[dict] | None, preset: str,
                         against: str) -> list[float]:
    """:func:`_network_ratios` of the builds timed side by side (``records``:
    ``bench.retime_networks``', one per network and seed)."""
    rows: dict[tuple[str, str], dict] = {}
    for rec in records or []:
        for name, ms in (rec.get("latency_ms") or {}).items():
            row = rows.setdefault((rec["network"], name), {
                "network": rec["network"], "preset": name, "side_ms_by_seed": {}})
            row["side_ms_by_seed"][rec.get("seed") or 0] = ms
    return _network_ratios(list(rows.values()), preset, against, "side_ms_by_seed")


def over_eager(report: dict) -> float | None:
    """A network run's tuned latency over PyTorch eager's, timed beside it: the median of
    the ratios of each tuned timing window to the eager window next to it (the report's
    ``latency_windows_ms``, timed alternately), else of the two medians."""
    windows = report.get("latency_windows_ms") or {}
    pairs = [t / e for t, e in zip(windows.get("tuned") or [], windows.get("torch") or [],
                                   strict=False)
             if t and e]
    if pairs:
        return median(pairs)
    lat = report.get("latency_ms") or {}
    return lat["tuned"] / lat["torch"] if lat.get("tuned") and lat.get("torch") else None


def paired_ratio(num: dict, den: dict, key: str = "final_over_xgb_per_seed") -> float | None:
    """Median over the seeds both ran of ``num``'s latency over ``den``'s (one task's
    :func:`summarize` entries of two presets; each seed is one group, one machine), from
    their ratios to xgb's run of the same seed.

    Args:
        num, den: The two presets' entries.
        key: ``final_over_xgb_per_seed`` (final bests) or ``equal_time_over_xgb_per_seed``
            (bests at equal tuning time; a ``None`` there, no result by then, counts as
            infinitely slow).
    """
    a, b = num.get(key) or {}, den.get(key) or {}
    seeds = [s for s in a if s in b]
    return _median_or_inf([None if a[s] is None or not b[s] else a[s] / b[s] for s in seeds
                           if not (a[s] is None and b[s] is None)])


def early_accuracy(summary: dict, presets: list[str]) -> dict:
    """Per preset, the median over tasks of each early round's MSE, MSE(D) and pairwise
    accuracy (round ``i`` = the ``i``-th batch, predicted before it was measured)."""
    out = {}
    for preset in presets:
        per = [t[preset] for t in summary.values() if preset in t]
        if per:
            out[preset] = {key: [median([s[f"early_{key}"][i] for s in per])
                                 for i in range(EARLY_ROUNDS)]
                           for key in ("mse", "mse_d", "pairwise")}
    return out


def network_rows(reports: list[dict]) -> list[dict]:
    """One row per (network, preset) for the end-to-end table: medians over its seeds'
    runs (each run's own value listed per seed for the tuned latency)."""
    rows = []
    compiled = {r["network"]: r["latency_ms"].get("torch_compile") for r in reports
                if r["latency_ms"].get("torch_compile")}
    compiled_over_eager = {r["network"]: r["latency_ms"]["torch_compile"] / r["latency_ms"]["torch"]
                           for r in reports if r["latency_ms"].get("torch_compile")
                           and r["latency_ms"].get("torch")}
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in reports:
        groups.setdefault((r["network"], r["preset"]), []).append(r)
    for (network, preset), runs in groups.items():
        runs = sorted(runs, key=lambda r: r.get("config", {}).get("seed") or 0)
        lat = [r["latency_ms"] for r in runs]
        tasks = [r["tasks"] for r in runs if "tasks" in r]
        rows.append({
            "network": network, "preset": preset,
            "seeds": [r.get("config", {}).get("seed") for r in runs],
            "trials": median([r["trials_total"] for r in runs]),
            "tuned_ms": median([x["tuned"] for x in lat]),
            "tuned_ms_per_seed": [x["tuned"] for x in lat],
            "tuned_ms_by_seed": {r.get("config", {}).get("seed") or 0: r["latency_ms"]["tuned"]
                                 for r in runs if r["latency_ms"].get("tuned")},
            "over_eager": median([v for r in runs if (v := over_eager(r)) is not None]),
            "over_eager_by_seed": {r.get("config", {}).get("seed") or 0: v for r in runs
                                   if (v := over_eager(r)) is not None},
            "targets": [r.get("target") for r in runs],
            "untuned_ms": median([x["untuned"] for x in lat]),
            "torch_ms": median([x["torch"] for x in lat]),
            "torch_compile_ms": compiled.get(network),
            "torch_compile_over_eager": compiled_over_eager.get(network),
            "speedup_over_untuned": median([x["untuned"] / x["tuned"] for x in lat
                                            if x["tuned"] and x["untuned"]]),
            "tuning_minutes": median([r["tuning_seconds"] / 60.0 for r in runs]),
            "tasks": len(tasks[0]) if tasks else None,
            "tasks_measured": (median([sum(1 for t in ts if t.get("best_ms")) for ts in tasks])
                               if tasks else None),
            "trials_per_round": runs[0].get("config", {}).get("trials_per_round"),
        })
    return rows
