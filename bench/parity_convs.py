"""The PyTorch-parity benchmark's convs (``bench.pytorch_parity``): every conv of a network
timed alone in PyTorch (oneDNN), and each paired with the tuned conv task of the same
shapes."""

from __future__ import annotations


def onednn_convs(network: str, num_threads: int, repeat: int = 20) -> list[dict]:
    """Every conv of a built-in network timed alone in PyTorch (oneDNN), batch-norm folded,
    on the network's default input.

    Returns:
        One row per conv layer: ``layer``, ``shape`` (in, out, kernel, stride, groups,
        input size), ``out_size``, ``flops`` and ``torch_ms`` (median of ``repeat`` runs,
        as ``tune.py`` times PyTorch); none for a network without convs (``bert-tiny``).
    """
    import torch

    from tuner.engine.evaluate import time_torch
    from tuner.engine.networks import builtin_input_shape, builtin_module, fold_batch_norm

    model, _ = fold_batch_norm(builtin_module(network))
    example = torch.zeros(1, *builtin_input_shape(network, None))
    shapes: dict[str, tuple[int, ...]] = {}

    def remember(name: str):
        def hook(module, args, out) -> None:  # returns None: the output stays as it is
            shapes.setdefault(name, tuple(args[0].shape))
        return hook

    hooks = [m.register_forward_hook(remember(name)) for name, m in model.named_modules()
             if isinstance(m, torch.nn.Conv2d)]
    with torch.inference_mode():
        model(example)
    for h in hooks:
        h.remove()
    rows = []
    modules = dict(model.named_modules())
    with torch.inference_mode():
        for name, shape in shapes.items():
            conv = modules[name]
            x = torch.randn(shape)
            y = conv(x)
            kh, kw = conv.kernel_size
            flops = 2 * y.numel() * (conv.in_channels // conv.groups) * kh * kw
            torch_ms = time_torch(conv, x.numpy(), repeat, num_threads).median_ms
            rows.append({"layer": name, "flops": flops, "torch_ms": torch_ms,
                         "shape": [conv.in_channels, conv.out_channels, kh,
                                   conv.stride[0], conv.groups, x.shape[-1]],
                         "out_size": int(y.shape[-1])})
    return rows


#: The measured fields of a conv row (the rest is its pairing with a task).
CONV_FIELDS = ("layer", "flops", "torch_ms", "shape", "out_size")


def _same_conv(conv: dict, task: dict) -> bool:
    """Whether a task's first two arguments are the conv's input and weight (NCHW and OIHW,
    or NHWC and OHWI), and its output (the last argument) has the conv's output size (when
    recorded)."""
    args = task.get("args") or []
    if len(conv["shape"]) != 6 or len(args) < 3:
        return False
    cin, cout, k, _stride, groups, size = conv["shape"]
    out = conv.get("out_size")
    nchw = (args[0] == [1, cin, size, size] and args[1] == [cout, cin // groups, k, k]
            and (out is None or args[-1][-2:] == [out, out]))
    nhwc = (args[0] == [1, size, size, cin] and args[1] == [cout, k, k, cin // groups]
            and (out is None or args[-1][1:3] == [out, out]))
    return nchw or nhwc


def match_tasks(convs: list[dict], tasks: list[dict]) -> list[dict]:
    """Pair each PyTorch conv with the tuned conv task of the same shapes.

    A task whose input, weight and output shapes are the conv's (``args`` in the report)
    is the same convolution; when several are (the same conv fused with and without a
    residual add), the one with the fewest arguments (the plain epilogue) stands for it.
    Reports without the shapes (older ones) fall back to the FLOP count: a fused TVM task
    adds bias and activation FLOPs to its conv's, so a conv task within 10 % is taken as the
    same convolution, only when it is the only one (convs of different shapes with equal
    FLOPs are left unpaired rather than guessed).
    """
    import math

    conv_tasks = [t for t in tasks if "conv" in t["name"] and t["flops"] > 0]
    rows = []
    for c in convs:
        near = sorted((t for t in conv_tasks if _same_conv(c, t)), key=lambda t: len(t["args"]))
        if near:
            near = near[:1]
        else:
            near = [t for t in conv_tasks
                    if abs(math.log(t["flops"] / c["flops"])) <= math.log(1.1)]
        best = near[0] if len(near) == 1 else None
        tvm_ms = best["best_ms"] if best else None
        rows.append({**c, "task": best["name"] if best else None, "tvm_ms": tvm_ms,
                     "candidates": len(near),
                     "schedule": best.get("schedule") if best else None,
                     "tvm_gflops": c["flops"] / tvm_ms / 1e6 if tvm_ms else None,
                     "torch_gflops": c["flops"] / c["torch_ms"] / 1e6})
    return rows
