"""The zero-shot scale: an affine map from the meta-trained network's scores to relative
throughput, fitted on validation workloads and folded into the head's last layer.

MAML trains the initial weights to score a task well *after* adapting to it; before, only
their order is trained for, and their scale drifts (the shipped checkpoints' raw scores
spread about 1.5x as wide as the targets they predict). A least-squares fit ``target ~
slope * score + intercept`` over the validation workloads' samples, which the network was
never trained on, puts the unadapted scores on the targets' scale. With ``slope > 0`` it
keeps every ranking the network makes; folded into the last linear layer it is part of
the weights, so the tuner, the accuracy benchmark and further adaptation all start from
the calibrated scale without code of their own.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import Tensor, nn

from metatune.errors import CalibrationError

#: Fewest validation samples a fit is made from.
MIN_SAMPLES = 32


@dataclass(frozen=True)
class ScaleCalibration:
    """An affine map ``target = slope * score + intercept`` and what it was fitted on.

    Attributes:
        slope: Multiplies the score (positive: rankings are kept).
        intercept: Added after.
        samples: Validation samples fitted on.
        workloads: Validation workloads they came from.
        mse_before: The samples' mean squared error of the raw scores.
        mse_after: Their mean squared error after the map.
    """

    slope: float
    intercept: float
    samples: int
    workloads: int
    mse_before: float
    mse_after: float

    def to_dict(self) -> dict[str, float | int]:
        """The fields, rounded for a checkpoint's settings and its provenance JSON."""
        return {k: round(v, 6) if isinstance(v, float) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, fields: dict[str, Any]) -> ScaleCalibration:
        """The calibration :meth:`to_dict` recorded (a checkpoint's ``calibration``)."""
        return cls(**{f.name: fields[f.name] for f in dataclasses.fields(cls)})


def fit_scale(scores: Tensor, targets: Tensor, workloads: int) -> ScaleCalibration:
    """Least-squares ``targets ~ slope * scores + intercept``.

    Args:
        scores: An ``n`` tensor of unadapted scores.
        targets: An ``n`` tensor of the same samples' relative throughputs.
        workloads: How many workloads the samples come from (recorded).

    Raises:
        CalibrationError: Fewer than :data:`MIN_SAMPLES` samples, scores that do not vary,
            or a slope that is not positive (the scores rank the validation samples
            backwards: the map would reverse every ranking).
    """
    x, y = scores.detach().double().flatten(), targets.detach().double().flatten()
    if x.numel() != y.numel():
        raise ValueError(f"{x.numel()} scores for {y.numel()} targets")
    advice = "train with validation workloads (data.val_fraction > 0) or pass calibrate=false"
    if x.numel() < MIN_SAMPLES:
        raise CalibrationError(f"the zero-shot scale needs at least {MIN_SAMPLES} validation "
                               f"samples, got {x.numel()}: {advice}")
    var = torch.mean((x - x.mean()) ** 2)
    if var <= 1e-12:
        raise CalibrationError(f"the network gives all {x.numel()} validation samples the "
                               f"same score: nothing to calibrate; {advice}")
    slope = torch.mean((x - x.mean()) * (y - y.mean())) / var
    if slope <= 0:
        raise CalibrationError(f"the network's scores fall as the validation samples' "
                               f"throughput rises (slope {float(slope):.3g}); the checkpoint "
                               "ranks them backwards: check its training, or pass "
                               "calibrate=false")
    intercept = y.mean() - slope * x.mean()
    return ScaleCalibration(
        slope=float(slope), intercept=float(intercept), samples=int(x.numel()),
        workloads=int(workloads), mse_before=float(torch.mean((x - y) ** 2)),
        mse_after=float(torch.mean((slope * x + intercept - y) ** 2)))


def _last_linear(head: nn.Sequential) -> nn.Linear:
    """The head's last layer, which the calibration rescales.

    Raises:
        TypeError: The head does not end in a linear layer.
    """
    last = head[-1]
    if not isinstance(last, nn.Linear):
        raise TypeError(f"the head ends in {type(last).__name__}, not nn.Linear")
    return last


def fold_into_head(head: nn.Sequential, calibration: ScaleCalibration) -> None:
    """Make ``head``'s output ``slope * output + intercept`` by rescaling its last layer.

    Args:
        head: The network's regression head, ending in an ``nn.Linear`` with one output.

    Raises:
        TypeError: The head does not end in a linear layer.
    """
    last = _last_linear(head)
    with torch.no_grad():
        last.weight.mul_(calibration.slope)
        last.bias.mul_(calibration.slope).add_(calibration.intercept)


def unfold_from_head(head: nn.Sequential, calibration: ScaleCalibration) -> None:
    """Undo :func:`fold_into_head`: ``head``'s output back to the score before the map.

    Raises:
        TypeError: The head does not end in a linear layer.
    """
    last = _last_linear(head)
    with torch.no_grad():
        last.bias.sub_(calibration.intercept).div_(calibration.slope)
        last.weight.div_(calibration.slope)


def score_graphs(net: nn.Module, graphs: list, batch_size: int = 256) -> Tensor:
    """The network's scores for PyG graphs, unadapted: an ``n`` tensor.

    Args:
        net: A :class:`metatune.model.MetaTuneNet` (put in eval mode and back).
        graphs: PyG ``Data`` graphs.
        batch_size: Graphs per forward pass.
    """
    from torch_geometric.data import Batch

    was_training = net.training
    net.eval()
    out = []
    with torch.no_grad():
        for i in range(0, len(graphs), batch_size):
            b = Batch.from_data_list(graphs[i:i + batch_size])
            out.append(net(b.x, b.edge_index, b.batch).flatten())
    net.train(was_training)
    return torch.cat(out) if out else torch.zeros(0)


def calibrate(net: nn.Module, workloads: list) -> ScaleCalibration:
    """Fit the zero-shot scale on ``workloads`` and fold it into ``net``'s head.

    Args:
        net: The meta-trained network (modified in place).
        workloads: :class:`metatune.dataset.WorkloadSamples` whose graphs carry targets
            ``y`` (relative throughput): the validation workloads.

    Returns:
        The calibration applied.

    Raises:
        CalibrationError: As :func:`fit_scale`.
    """
    graphs = [g for w in workloads for g in w.graphs]
    targets = torch.cat([g.y.view(-1) for g in graphs]) if graphs else torch.zeros(0)
    cal = fit_scale(score_graphs(net, graphs), targets, len(workloads))
    fold_into_head(net.head, cal)
    return cal
