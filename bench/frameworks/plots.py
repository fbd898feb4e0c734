"""The comparison's figures: best latency against trials and seconds per task, the
early-round accuracy and the end-to-end latencies against PyTorch eager."""

from __future__ import annotations

from bench.common import median


def _pyplot():
    """``matplotlib.pyplot`` on the file-only Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot(summary: dict, out_prefix: str) -> dict[str, str]:
    plt = _pyplot()
    paths = {}
    for i, (task, per) in enumerate(summary.items()):
        fig, (ax, ax_t) = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
        for preset, s in per.items():
            x = s["curve_trials"]
            line, = ax.plot(x, s["curve_median_ms"], label=preset)
            lo = [v if v is not None else float("nan") for v in s["curve_min_ms"]]
            hi = [v if v is not None else float("nan") for v in s["curve_max_ms"]]
            ax.fill_between(x, lo, hi, alpha=0.15)
            for j, curve in enumerate(s.get("time_curves", [])):
                ax_t.plot([c[0] for c in curve], [c[1] for c in curve], color=line.get_color(),
                          alpha=0.7, linewidth=1, label=preset if j == 0 else None)
        ax.set_xlabel("measured trials (median, band: min-max over seeds)")
        ax.set_ylabel("best latency (ms)")
        ax.set_title(task)
        ax.legend()
        ax_t.set_xlabel("tuning seconds (one line per seed)")
        ax_t.legend()
        fig.tight_layout()
        path = f"{out_prefix}-{i}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths[task] = path
    return paths


def plot_accuracy(early: dict, out_prefix: str) -> str:
    """MSE and MSE(D) of each framework's cost model over the first rounds (Figure 9)."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for preset, e in early.items():
        for ax, key in zip(axes, ("mse", "mse_d"), strict=False):
            points = [(i + 1, v) for i, v in enumerate(e[key]) if v is not None]
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=preset)
    for ax, name in zip(axes, ("MSE", "MSE(D), top 25 %"), strict=False):
        ax.set_xlabel("round (batch predicted before it is measured)")
        ax.set_ylabel(name)
        ax.legend()
    fig.tight_layout()
    path = f"{out_prefix}-accuracy.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_networks(rows: list[dict], out_prefix: str) -> str:
    """Tuned latency per network and framework, as a multiple of PyTorch eager's timed
    beside it (the row's ``over_eager``; else over the median of the eager latencies
    measured beside that network's runs)."""
    plt = _pyplot()
    networks = list(dict.fromkeys(r["network"] for r in rows))
    presets = list(dict.fromkeys(r["preset"] for r in rows))
    eager = {net: median([r["torch_ms"] for r in rows if r["network"] == net])
             for net in networks}
    width = 0.8 / (len(presets) + 1)
    fig, ax = plt.subplots(figsize=(2 + 1.6 * len(networks), 4))
    for j, preset in enumerate(presets):
        ys = []
        for net in networks:
            r = next((r for r in rows if r["network"] == net and r["preset"] == preset), None)
            if r and r.get("over_eager"):
                ys.append(r["over_eager"])
            else:
                ys.append(r["tuned_ms"] / eager[net] if r and r["tuned_ms"] and eager[net]
                          else float("nan"))
        ax.bar([i + j * width for i in range(len(networks))], ys, width, label=preset)
    compiled = [next((r["torch_compile_ms"] / eager[net] for r in rows if r["network"] == net
                      and r["torch_compile_ms"] and eager[net]), float("nan"))
                for net in networks]
    ax.bar([i + len(presets) * width for i in range(len(networks))], compiled, width,
           label="torch.compile", color="grey")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([i + width * len(presets) / 2 for i in range(len(networks))], networks)
    ax.set_ylabel("latency / PyTorch eager (lower is better)")
    ax.legend(fontsize="small")
    fig.tight_layout()
    path = f"{out_prefix}-networks.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
