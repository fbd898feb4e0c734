"""Batch selection by Bayesian optimization (botorch / gpytorch), independent of TVM.

A Gaussian process over knob vectors models the measured throughput of a task; its prior
mean is an affine function of the cost model's prediction (learned with the kernel
hyper-parameters), so the meta-trained model says where to look before any measurement
and the GP corrects it where measurements exist. Each round's batch is chosen from a
discrete candidate pool by a Monte-Carlo batch acquisition (noisy EI or UCB), sequential
greedy with no candidate twice: on joint posterior samples drawn once per round
(:func:`greedy_batch`, the default), or with botorch's ``optimize_acqf_discrete`` over
qLogNEI / qUCB (``engine="botorch"``, the reference; slower, as it recomputes a GP
posterior for every pool member at every greedy step).
"""

from __future__ import annotations

import logging
import warnings

import numpy as np
import torch

from metatune.threads import torch_threads
from tuner.search.params import BOConfig

logger = logging.getLogger(__name__)

#: Smallest kernel lengthscale (botorch's default GP uses the same floor). Knob vectors lie
#: in about [0, 1]; without a floor, a lengthscale of a fit on a few dozen measurements
#: could shrink to zero and the covariance turn non-finite (``NotPSDError`` in 5 rounds
#: of 3 of 24 tuning runs, ``docs/lab/tuning/t128-nhwc-shipped.md``).
MIN_LENGTHSCALE = 0.025


def default_device() -> torch.device:
    """CUDA or ROCm (both appear as ``cuda`` in torch) when torch sees one, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _prior_mean():
    import gpytorch

    class PriorMean(gpytorch.means.Mean):
        """``a * x[..., -1] + b``: the GP mean follows the cost model's prediction."""

        def __init__(self) -> None:
            super().__init__()
            self.register_parameter("weight", torch.nn.Parameter(torch.ones(1)))
            self.register_parameter("bias", torch.nn.Parameter(torch.zeros(1)))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.weight * x[..., -1] + self.bias

    return PriorMean()


def fit_gp(x: torch.Tensor, y: torch.Tensor, max_iter: int = 50):
    """A GP with the cost-model prior mean, fitted by marginal likelihood: its kernel
    compares the knob vectors, the prediction only sets the prior mean.

    Args:
        x: An ``n x (d + 1)`` tensor: knob vectors with the cost model's (standardized)
            prediction as the last column.
        y: An ``n x 1`` tensor of measured throughputs (standardized).
        max_iter: L-BFGS iterations of the marginal-likelihood fit.

    Returns:
        The fitted ``botorch.models.SingleTaskGP``.

    Raises:
        botorch.exceptions.errors.ModelFittingError: No attempt fitted, or the fit kept
            (:func:`_fit_warning_resolved`) has non-finite hyper-parameters.
    """
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from gpytorch.constraints import GreaterThan
    from gpytorch.kernels import MaternKernel, ScaleKernel
    from gpytorch.mlls import ExactMarginalLogLikelihood

    d = x.shape[-1] - 1  # the knobs; the last column is the prediction
    covar = ScaleKernel(MaternKernel(nu=2.5, ard_num_dims=d, active_dims=tuple(range(d)),
                                     lengthscale_constraint=GreaterThan(MIN_LENGTHSCALE)))
    gp = SingleTaskGP(x, y, covar_module=covar, mean_module=_prior_mean().to(x))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # botorch warns about input scaling and fit retries
        # A capped L-BFGS: the selection needs a sensible GP each round, not the optimum
        # to the last digit, and uncapped fits on noisy data ran for seconds.
        fit_gpytorch_mll(ExactMarginalLogLikelihood(gp.likelihood, gp),
                         optimizer_kwargs={"options": {"maxiter": max_iter}},
                         warning_handler=_fit_warning_resolved)
    if not all(bool(torch.isfinite(p).all()) for p in gp.parameters()):
        from botorch.exceptions.errors import ModelFittingError

        raise ModelFittingError("the fit left non-finite hyper-parameters")
    return gp


def _fit_warning_resolved(w: warnings.WarningMessage) -> bool:
    """botorch's rule for the warnings of a fit attempt (``True``: resolved, keep the
    fit), except that L-BFGS-B stopping in its line search (``ABNORMAL``) keeps the fit too.

    That stop leaves the last accepted iterate, a finite and improved marginal likelihood.
    botorch's default retries it from hyper-parameters drawn from their priors, and this
    kernel has none, so the retries restart near where the first attempt did: in tuning
    runs (alexnet's conv, 48 measurements) half the torch seeds failed all five attempts
    and the round fell back to the cost model's ranking, and the attempts that succeeded
    had a lower likelihood (-0.92 to -0.95) than the first one kept (-0.90).
    """
    from botorch.exceptions.warnings import OptimizationWarning
    from botorch.fit import DEFAULT_WARNING_HANDLER

    if issubclass(w.category, OptimizationWarning) and "ABNORMAL" in str(w.message):
        return True
    return DEFAULT_WARNING_HANDLER(w)


def _standardize(v: np.ndarray) -> np.ndarray:
    std = v.std()
    return (v - v.mean()) / (std if std > 1e-12 else 1.0)


def greedy_batch(samples: torch.Tensor, n_hist: int, q: int, acquisition: str,
                 beta: float = 0.2) -> list[int]:
    """Sequential greedy batch selection on joint posterior samples.

    The same greedy rule as botorch's ``optimize_acqf_discrete`` with fixed base samples
    (each step adds the pool member that most raises the batch's MC acquisition), but on
    samples of the joint posterior over history and pool drawn once, so a step costs
    ``O(S * m)`` instead of a GP posterior of every pool member with the batch so far.

    Args:
        samples: An ``S x (n_hist + m)`` tensor of joint posterior samples, history first.
        n_hist: Number of history (measured) points.
        q: Batch size.
        acquisition: ``qlognei`` (noisy expected improvement over the best history sample;
            its log does not change the greedy choice) or ``qucb``.
        beta: ``qucb`` exploration weight.

    Returns:
        ``min(q, m)`` distinct pool indices in the order chosen.
    """
    pool = samples[:, n_hist:]
    if acquisition == "qucb":
        mean = pool.mean(0, keepdim=True)
        values = mean + (beta * torch.pi / 2) ** 0.5 * (pool - mean).abs()
        baseline = torch.full_like(pool[:, 0], float(values.min()) - 1.0)  # below every value
    else:
        values = pool
        baseline = (samples[:, :n_hist].max(1).values if n_hist
                    else torch.full_like(pool[:, 0], float(pool.min()) - 1.0))
    current = baseline.clone()
    chosen: list[int] = []
    taken = torch.zeros(pool.shape[1], dtype=torch.bool, device=pool.device)
    tie_break = pool.mean(0)
    for _ in range(min(q, pool.shape[1])):
        gain = (torch.maximum(current[:, None], values) - baseline[:, None]).clamp_min(0).mean(0)
        score = gain + 1e-9 * tie_break  # all-zero gains: the best posterior mean
        score[taken] = -torch.inf
        j = int(score.argmax())
        chosen.append(j)
        taken[j] = True
        current = torch.maximum(current, values[:, j])
    return chosen


@torch_threads()  # a GP of a few hundred points: one thread (metatune.threads)
def select_batch(pool_x: np.ndarray, pool_prior: np.ndarray, hist_x: np.ndarray,
                 hist_prior: np.ndarray, hist_y: np.ndarray, q: int,
                 params: BOConfig | None = None, *, seed: int = 0,
                 device: torch.device | None = None) -> list[int]:
    """Choose ``q`` pool members to measure next.

    With fewer than three distinct measurements there is nothing to fit: the pool's top
    ``q`` by the cost model's prediction are chosen, as always with
    ``acquisition=model`` (no GP: what BO's exploration adds is measured against it).

    Args:
        pool_x: ``m x d`` knob vectors of the unmeasured candidates.
        pool_prior: ``m`` cost-model predictions for them (higher is better).
        hist_x: ``n x d`` knob vectors of the measured candidates.
        hist_prior: ``n`` cost-model predictions for them (the current model).
        hist_y: ``n`` measured throughputs (higher is better; failures as 0).
        q: Batch size.
        params: The BO settings read here (valid since they were made; ``None``: the
            defaults): ``acquisition`` (``qlognei``, ``qucb`` or ``model``), ``mc_samples`` (its
            quasi-Monte-Carlo samples), ``beta`` (``qucb`` exploration weight) and
            ``engine``: ``joint`` (:func:`greedy_batch` on joint samples, fast) or
            ``botorch`` (``optimize_acqf_discrete`` with botorch's qLogNEI / qUCB; slower,
            the reference).
        seed: Sampler seed.
        device: Where the GP runs (:func:`default_device` by default).

    Returns:
        ``q`` (or ``m`` if smaller) distinct indices into the pool, in the order chosen.
    """
    params = params or BOConfig()
    m = len(pool_x)
    q = min(q, m)
    by_prior = [int(i) for i in np.argsort(-pool_prior, kind="stable")]
    if q == m or len(np.unique(hist_y)) < 3 or params.acquisition == "model":
        return by_prior[:q]
    from botorch.sampling import SobolQMCNormalSampler

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gp, hx, px = _task_gp(pool_x, pool_prior, hist_x, hist_prior, hist_y,
                                  device or default_device())
            sampler = SobolQMCNormalSampler(torch.Size([params.mc_samples]), seed=seed)
            if params.engine == "joint":
                with torch.no_grad():
                    posterior = gp.posterior(torch.cat([hx, px]))
                    samples = sampler(posterior)[..., 0]  # S x (n + m)
                return greedy_batch(samples, len(hx), q, params.acquisition, params.beta)
            return _botorch_batch(gp, hx, px, q, params.acquisition, params.beta, sampler)
    except Exception as err:  # numerical trouble in a fit must not stop tuning
        logger.warning("BO selection failed (%s: %s): falling back to the cost model's ranking",
                       type(err).__name__, str(err).splitlines()[0][:160])
        return by_prior[:q]


def _task_gp(pool_x: np.ndarray, pool_prior: np.ndarray, hist_x: np.ndarray,
             hist_prior: np.ndarray, hist_y: np.ndarray, device: torch.device):
    """The task's GP fitted on the measurements (:func:`fit_gp`), with its
    inputs: the ``n x (d + 1)`` history and ``m x (d + 1)`` pool rows (knob vector, then
    the cost model's prediction standardized over both); targets are ``hist_y``
    standardized.

    Returns:
        ``(gp, history rows, pool rows)``.
    """
    prior = _standardize(np.concatenate([hist_prior, pool_prior]))
    as_t = lambda a: torch.as_tensor(a, dtype=torch.float64, device=device)  # noqa: E731
    hx = as_t(np.column_stack([hist_x, prior[: len(hist_x)]]))
    px = as_t(np.column_stack([pool_x, prior[len(hist_x):]]))
    return fit_gp(hx, as_t(_standardize(hist_y)).unsqueeze(-1)), hx, px


@torch_threads()  # a GP of a few hundred points: one thread (metatune.threads)
def posterior_mean(pool_x: np.ndarray, pool_prior: np.ndarray, hist_x: np.ndarray,
                   hist_prior: np.ndarray, hist_y: np.ndarray, *,
                   device: torch.device | None = None) -> np.ndarray:
    """The GP's posterior mean throughput of each pool member, in ``hist_y``'s units: the
    ranking :func:`select_batch`'s acquisition starts from, given the same measurements.

    With fewer than three distinct measurements, or when the GP cannot be fitted (where
    :func:`select_batch` ranks by the cost model), it is the cost model's prediction.

    Args:
        pool_x: ``m x d`` knob vectors to score.
        pool_prior: ``m`` cost-model predictions for them.
        hist_x: ``n x d`` knob vectors of the measured candidates.
        hist_prior: ``n`` cost-model predictions for them.
        hist_y: ``n`` measured throughputs.
        device: Where the GP runs (:func:`default_device` by default).

    Returns:
        An ``m`` array.
    """
    if len(np.unique(hist_y)) < 3:
        return np.asarray(pool_prior, dtype=float)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gp, _, px = _task_gp(pool_x, pool_prior, hist_x, hist_prior, hist_y,
                                 device or default_device())
            with torch.no_grad():
                mean = gp.posterior(px).mean[..., 0].double().cpu().numpy()
    except Exception as err:  # as in select_batch: a failed fit leaves the cost model's
        logger.debug("GP fit failed (%s): the cost model's prediction stands",
                     type(err).__name__)
        return np.asarray(pool_prior, dtype=float)
    std = float(np.std(hist_y))
    return mean * (std if std > 1e-12 else 1.0) + float(np.mean(hist_y))


def _botorch_batch(gp, hx: torch.Tensor, px: torch.Tensor, q: int, acquisition: str,
                   beta: float, sampler) -> list[int]:
    from botorch.acquisition import qLogNoisyExpectedImprovement, qUpperConfidenceBound
    from botorch.optim import optimize_acqf_discrete

    if acquisition == "qlognei":
        acq = qLogNoisyExpectedImprovement(gp, X_baseline=hx, sampler=sampler,
                                           prune_baseline=True)
    else:
        acq = qUpperConfidenceBound(gp, beta=beta, sampler=sampler)
    chosen, _ = optimize_acqf_discrete(acq, q=q, choices=px, unique=True)
    return _rows_to_indices(chosen, px)


def _rows_to_indices(chosen: torch.Tensor, choices: torch.Tensor) -> list[int]:
    """Pool indices of the chosen rows (each index used once)."""
    used: set[int] = set()
    out = []
    for row in chosen:
        matches = torch.nonzero(torch.all(choices == row, dim=-1)).flatten().tolist()
        idx = next((i for i in matches if i not in used), None)
        if idx is not None:
            used.add(idx)
            out.append(idx)
    return out
