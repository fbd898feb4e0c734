"""The comparison's markdown page, written from its document."""

from __future__ import annotations

import os

from bench.common import median
from bench.frameworks.stats import BASELINES, EARLY_ROUNDS, paired_ratio


def _fmt(v, spec=".3f") -> str:
    return "-" if v is None else format(v, spec)


def _rounds_note(rows: list[dict]) -> str:
    """A sentence for the end-to-end table when its budget allows two rounds per measured
    task or fewer: then the rows mostly compare the frameworks' first rounds."""
    rounds = median([r["trials"] / r["tasks_measured"] / r["trials_per_round"] for r in rows
                     if r.get("tasks_measured") and r.get("trials_per_round")])
    if rounds is None or rounds > 2:
        return ""
    return (f" At about {rounds:.1f} rounds per measured task (median), these rows compare "
            "mostly the frameworks' first rounds (no measurement of the task yet), not "
            "their search.")


def losses(doc: dict) -> list[str]:
    """Where MetaTune's presets lose, one markdown bullet each: every task whose final best,
    or best at equal tuning time, is slower than a baseline's (xgb, xgb-Xfer), as the median
    over seeds of its ratio to the baseline's run of the same seed; and every network whose
    tuned latency is.

    Args:
        doc: The page's document (``presets``, ``summary``, optional ``networks`` rows).

    Returns:
        The bullets (markdown lines); one saying so when MetaTune never loses, or when there
        was nothing to compare.
    """
    ours = [p for p in doc["presets"] if p not in BASELINES]
    theirs = [p for p in doc["presets"] if p in BASELINES]
    out, compared = [], 0

    def compare(where: str, values: dict, spec: str, unit: str = " ms") -> None:
        nonlocal compared
        for mine in ours:
            pairs = [b for b in theirs if values.get(b) and values.get(mine)]
            compared += len(pairs)
            behind = [f"{b} {values[b]:{spec}}{unit} ({values[mine] / values[b]:.3f}x)"
                      for b in pairs if values[mine] > values[b]]
            if behind:
                out.append(f"- {where}: {mine} {values[mine]:{spec}}{unit} is behind "
                           + ", ".join(behind))

    for task, per in doc["summary"].items():
        for key, what in (("final_over_xgb_per_seed", "final best"),
                          ("equal_time_over_xgb_per_seed", "best at equal tuning time")):
            for mine in (p for p in ours if p in per):
                behind = []
                for b in (b for b in theirs if b in per):
                    ratio = paired_ratio(per[mine], per[b], key)
                    compared += ratio is not None
                    if ratio is not None and ratio > 1.0:
                        behind.append(f"{b} ({ratio:.3f}x its latency)")
                if behind:
                    out.append(f"- {task}, {what}: {mine} is behind " + ", ".join(behind))
    rows = doc.get("networks") or []
    for net in dict.fromkeys(r["network"] for r in rows):
        compare(f"{net} end to end",
                {r["preset"]: r["tuned_ms"] for r in rows if r["network"] == net}, ".2f")
        compare(f"{net} end to end, over PyTorch eager timed beside each build",
                {r["preset"]: r.get("over_eager") for r in rows if r["network"] == net},
                ".3f", "x eager")
    if not compared:
        return ["- nothing to compare yet"]
    if not out:
        out.append("- nowhere: on every task and network measured, each MetaTune preset is at "
                   f"least as fast as {' and '.join(theirs)}")
    return out


def versus_pytorch(rows: list[dict]) -> list[str]:
    """One markdown bullet per network: its fastest TVM build against PyTorch eager and
    ``torch.compile``. With timing windows (rows' ``over_eager``), the fastest is the build
    with the lowest latency over the eager latency timed beside it, and ``torch.compile``
    is compared through its own ratio to the eager run beside it, so that the machine's
    drift between runs cancels; else by latency, against the median eager latency.

    Args:
        rows: :func:`network_rows`' rows.
    """
    out = []
    for net in dict.fromkeys(r["network"] for r in rows):
        mine = [r for r in rows if r["network"] == net]
        paired = [r for r in mine if r.get("over_eager")]
        if paired:
            best = min(paired, key=lambda r: r["over_eager"])
            text = (f"- {net}: the fastest TVM build relative to eager ({best['preset']}, "
                    f"{best['tuned_ms']:.2f} ms in its run) takes {best['over_eager']:.2f}x "
                    "the latency of PyTorch eager timed beside it")
            compiled = best.get("torch_compile_over_eager")
            if compiled:
                text += (f"; torch.compile took {compiled:.2f}x eager's beside it, so the build "
                         f"takes {best['over_eager'] / compiled:.2f}x torch.compile's")
            out.append(text)
            continue
        built = [r for r in mine if r["tuned_ms"]]
        if not built:
            continue
        best = min(built, key=lambda r: r["tuned_ms"])
        eager = median([r["torch_ms"] for r in mine])
        vs = [f"{best['tuned_ms'] / eager:.2f}x PyTorch eager's ({eager:.2f} ms)"] if eager else []
        if best.get("torch_compile_ms"):
            vs.append(f"{best['tuned_ms'] / best['torch_compile_ms']:.2f}x torch.compile's "
                      f"({best['torch_compile_ms']:.2f} ms)")
        if vs:
            out.append(f"- {net}: the fastest TVM build ({best['preset']}, "
                       f"{best['tuned_ms']:.2f} ms) takes " + " and ".join(vs))
    return out


def side_by_side_lines(records: list[dict]) -> list[str]:
    """The section of the networks' builds timed side by side (``bench.retime_networks``): per
    network and seed, each preset's latency in one process, over xgb's, beside the latency
    its own run measured at its end.

    Args:
        records: The ``retime-*.json`` records.
    """
    lines = ["## End to end, every build timed side by side", "",
             "Each group's builds compiled again from their runs' databases and timed in one "
             "process, in alternating rounds with PyTorch eager (`python "
             "-m bench.retime_networks --network NET`), so the machine's drift between the "
             "runs does not enter the ratios. vs xgb: the build's latency over xgb's build "
             "of the same group, both timed here.", "",
             "| network | seed | framework | ms side by side | vs xgb | ms in its own run |",
             "|---|---|---|---|---|---|"]
    for rec in records:
        lat = rec["latency_ms"]
        base = lat.get("xgb")
        for preset, ms in lat.items():
            run = rec.get("runs", {}).get(preset, {})
            lines.append(
                f"| {rec['network']} | {rec['seed']} | "
                f"{'PyTorch eager' if preset == 'torch' else preset} | {ms:.2f} | "
                f"{_fmt(ms / base if base else None)} | "
                f"{_fmt(run.get('tuned_ms_in_run'), '.2f')} |")
    lines.append("")
    lines += [f"- {rec['network']} seed {rec['seed']}: timed {rec['date'][:16]} UTC on "
              f"`{rec['target']}`, TVM {rec['runtime']['tvm_threads']} / PyTorch "
              f"{rec['runtime']['torch_threads']} threads, {rec['timing']['windows']} windows "
              f"of at least {rec['timing']['min_window_ms']:.0f} ms per build"
              for rec in records]
    return [*lines, ""]


#: Runs measured before this moment ran TVM on half the cores (tuner/engine/runtime.py).
THREADS_FIXED = "2026-11-30T16:00:00+00:00"


def markdown(doc: dict) -> str:
    lines = ["# Tuning frameworks side by side " + ("on held-out convolutions"
                                                   if doc.get("tasks", True) else
                                                   "on whole networks"), "",
             f"- command: `{doc['command']}`", f"- date: {doc['date']}",
             *(["- measured on (each group, one task or network and seed with every "
                "preset, on one machine; every ratio is taken within a group):",
                *doc["machines"]] if doc.get("machines") else [f"- machine: {doc['machine']}"]),
             *(["- what the transferring cost models were trained on (a CPU other than the "
                "run's is a transfer across CPUs):", *doc["trained_on"]]
               if doc.get("trained_on") else []),
             *(["- code (git commit) of the runs:", *doc["code"]]
               if doc.get("code") else []),
             *([f"- task runs measured {doc['measured'][0]} to {doc['measured'][1]}"]
               if doc.get("measured") else []),
             (f"- {doc['trials']} trials per run, {doc['batch']} per round, seeds {doc['seeds']}; "
              "each run a fresh process; same tasks, budgets and seeds for every framework"
              if doc.get("tasks", True) else
              "- no single-task runs (`--no-tasks`): the networks end to end only, "
              f"{doc.get('network_budget')} per network run, seeds {doc.get('network_seeds')}; "
              "each run a fresh process; same networks, budgets and seeds for every framework"),
             "- presets: xgb = MetaSchedule XGBoost + evolutionary; xgb-Xfer = XGBoost with "
             "transfer from the training split; RL = XGBoost + the RL search (after "
             "Chameleon); meta-BO / meta-BO-T = MetaTune (plain / super-graph) + batch BO; "
             "meta-RL / meta-RL-T = MetaTune (plain / super-graph) + the RL search"]
    if doc.get("measured") and doc["measured"][1] < THREADS_FIXED:
        lines.append("- **stale: measured with one TVM thread.** Before "
                     f"{THREADS_FIXED[:10]} TVM's pool ran half the cores on x86 (1 of 2 here) "
                     "in every measurement and evaluation, while PyTorch ran on 2; weights "
                     "were not packed. Rerun the command on the corrected runtime.")
    if doc.get("runs_done", 0) < doc.get("runs_planned", 0):
        lines.append(f"- **partial**: {doc['runs_done']} of the {doc['runs_planned']} planned "
                     "task runs are done (rerun the command to resume); medians are over the "
                     "seeds done so far")
    if doc.get("partial_groups"):
        lines.append("- incomplete groups, left out of every figure until each preset has "
                     f"run: {'; '.join(doc['partial_groups'])}")
    if doc.get("network_runs_done", 0) < doc.get("networks_planned", 0):
        lines.append(f"- **partial**: {doc['network_runs_done']} of the "
                     f"{doc['networks_planned']} planned network runs are done (rerun the "
                     "command to resume)")
    lines.append("")
    if doc.get("overall"):
        lines += ["## All tasks", "",
                  "| framework | final best vs xgb (geomean) | at equal time vs xgb (geomean) "
                  "| first round vs xgb (geomean) | tasks better than xgb | "
                  "runs reaching xgb's best | median trials to xgb's best | "
                  "median seconds to xgb's best | tuning time vs xgb |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for preset, o in doc["overall"].items():
            lines.append(
                f"| {preset} | {_fmt(o['geomean_over_xgb'])} | "
                f"{_fmt(o.get('equal_time_geomean_over_xgb'))} | "
                f"{_fmt(o.get('first_round_geomean_over_xgb'))} | {o['tasks_better']} of "
                f"{o['tasks']} | {o['runs_reaching_xgb_best']} of {o['runs']} | "
                f"{_fmt(o['median_trials_to_xgb_best'], '.0f')} | "
                f"{_fmt(o.get('median_seconds_to_xgb_best'), '.0f')} | "
                f"{_fmt(o['tuning_time_over_xgb'], '.2f')} |")
        lines.append("")
    if doc.get("headlines"):
        lines += ["## The paper's headline figures beside ours", "",
                  "Speed-up of the first framework over the second after the same budget, in "
                  "% of throughput (geometric mean of latency ratios; in brackets, on how "
                  "many it was faster). The paper's figures are end to end, the four "
                  "networks' inference time on GPUs (section 6, Figure 5); ours end to end "
                  "(the networks tuned), from the tuned latencies and from each build's "
                  "latency over PyTorch eager's timed beside it (a group's runs follow one "
                  "another for an hour or more, and a shared machine's speed drifts in that "
                  "time: the second largely cancels the drift, if TVM and PyTorch slow down "
                  "alike), from the builds timed side by side in one process where a group "
                  "was (no drift at all: the figure to trust where there is one), and over "
                  "the held-out kernels.",
                  "", "| framework | against | paper (networks) | ours, networks | "
                  "ours, networks (over eager beside it) | ours, networks (side by side) | "
                  "ours, kernels |",
                  "|---|---|---|---|---|---|---|"]
        for h in doc["headlines"]:
            ours = ["-" if h.get(f"{k}_pct") is None else
                    f"{h[f'{k}_pct']:+.1f} % ({h[f'{k}_faster']} of {h[k]})"
                    for k in ("networks", "networks_eager", "networks_side", "kernels")]
            lines.append(f"| {h['preset']} | {h['against']} | +{h['paper_pct']:.0f} % | "
                         + " | ".join(ours) + " |")
        lines.append("")
    if doc.get("presets"):
        lines += ["## Where MetaTune loses", "", *losses(doc), ""]
        if doc.get("networks"):
            lines += ["## Against PyTorch on the same CPU", "",
                      *versus_pytorch(doc["networks"]), ""]
    for task, per in doc["summary"].items():
        lines += [f"## {task}", "",
                  "| framework | final best ms (median) | per seed | vs xgb | at equal time vs xgb "
                  "| trials to xgb's best "
                  "| seconds to xgb's best | MSE | MSE(D) | pairwise | tuning s |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for preset, s in per.items():
            platforms = s.get("platforms") or []
            tags = ([f" ({(p or '?').removeprefix('llvm-')})" for p in platforms]
                    if len(set(platforms)) > 1 else [""] * len(s["final_ms"]))
            seeds = ", ".join(_fmt(v) + t for v, t in zip(s["final_ms"], tags, strict=False))
            reach = ", ".join(_fmt(v, ".0f") for v in s["trials_to_xgb_best"])
            reach_s = ", ".join(_fmt(v, ".0f") for v in s.get("seconds_to_xgb_best", []))
            lines.append(
                f"| {preset} | {_fmt(s['median_final_ms'])} | {seeds} | "
                f"{_fmt(s['final_over_xgb'])} | {_fmt(s.get('equal_time_over_xgb'))} | "
                f"{reach or '-'} | {reach_s or '-'} | "
                f"{_fmt(s['median_mse'])} | "
                f"{_fmt(s['median_mse_d'])} | {_fmt(s['median_pairwise'])} | "
                f"{_fmt(s['tuning_seconds'], '.0f')} |")
        lines += ["", f"![curves]({os.path.basename(doc['png'][task])})", ""]
    if doc.get("early_accuracy"):
        lines += ["## Cost-model accuracy in the first rounds (paper Figure 9)", "",
                  "Median over tasks and seeds of each round's batch, predicted before it was "
                  "measured (round 1 = no measurement of the task yet).", "",
                  "| framework | metric | " + " | ".join(f"r{i + 1}" for i in range(EARLY_ROUNDS))
                  + " |", "|---|---|" + "---|" * EARLY_ROUNDS]
        for preset, e in doc["early_accuracy"].items():
            for key, name in (("mse", "MSE"), ("mse_d", "MSE(D)"), ("pairwise", "pairwise")):
                lines.append(f"| {preset} | {name} | "
                             + " | ".join(_fmt(v) for v in e[key]) + " |")
        lines += ["", f"![accuracy]({os.path.basename(doc['png_accuracy'])})", ""]
    if doc.get("networks"):
        lines += ["## End to end (paper Table 3)", "",
                  "| network | framework | trials | tasks measured | tuned ms (median) | "
                  "per seed | untuned ms | speedup | PyTorch eager ms | tuned / eager | "
                  "torch.compile ms | tuning min |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in doc["networks"]:
            targets = r.get("targets") or []
            tags = ([f" ({t})" for t in targets] if len(set(targets)) > 1
                    else [""] * len(r.get("tuned_ms_per_seed", [])))
            per_seed = ", ".join(_fmt(v, ".2f") + t
                                 for v, t in zip(r.get("tuned_ms_per_seed", []), tags,
                                                  strict=False))
            lines.append(
                f"| {r['network']} | {r['preset']} | {_fmt(r['trials'], '.0f')} | "
                f"{_fmt(r.get('tasks_measured'), '.0f')} of {_fmt(r.get('tasks'), 'd')} | "
                f"{_fmt(r['tuned_ms'], '.2f')} | {per_seed or '-'} "
                f"| {_fmt(r['untuned_ms'], '.1f')} | {_fmt(r['speedup_over_untuned'], '.1f')} | "
                f"{_fmt(r['torch_ms'], '.2f')} | {_fmt(r.get('over_eager'))} | "
                f"{_fmt(r['torch_compile_ms'], '.2f')} | "
                f"{_fmt(r['tuning_minutes'], '.1f')} |")
        seeds = doc.get("network_seeds") or [0]
        lines += ["", f"Seeds per network: {', '.join(map(str, seeds))} (medians over the "
                  "seeds done); tuned and untuned are TVM builds of the same model, PyTorch "
                  "eager and torch.compile run it on the same CPU (torch.compile once per "
                  "network). Tuned / eager: the median ratio of the tuned build's timing "
                  "windows to PyTorch eager's, timed alternately in the same process (median "
                  "over seeds; from the two medians for a run without windows), so that "
                  "builds whose runs were timed an hour apart on a machine whose speed drifts "
                  "can be compared. Tasks measured: the tasks the budget reached "
                  "(the others keep TVM's default schedule)." + _rounds_note(doc["networks"]), ""]
        if doc.get("png_networks"):
            lines += [f"![end to end]({os.path.basename(doc['png_networks'])})", ""]
    if doc.get("side_by_side"):
        lines += side_by_side_lines(doc["side_by_side"])
    lines += ["vs xgb: per seed, the final best over xgb's run of the same task and seed "
              "(one machine), median over seeds (below 1 is better); every ratio on this page "
              "is paired so, which lets seeds measured on different machines be pooled (the "
              "per-seed latencies then name their CPU). Trials to xgb's best: "
              "per seed, the measured trials after which the framework's best was at least "
              "as fast as xgb's final best of that seed ('-': not within the budget); seconds to "
              "xgb's best: the same in tuning seconds (search + measurement + model update "
              "of every round; set-up before the first round, such as loading a checkpoint "
              "or fitting xgb-Xfer's transfer model, is not counted). "
              "At equal time vs xgb: per seed, every framework's best after the tuning time "
              "of that seed's fastest run (the rounds it finished by then), over xgb's, median "
              "over the seeds every framework has finished. First round: the best of the "
              "first batch, before any measurement of the task, over xgb's (median over "
              "seeds). MSE, MSE(D), "
              "pairwise: the cost model on each new batch before it was measured, median over "
              "rounds (paper Table 4)."]
    return "\n".join(lines) + "\n"
