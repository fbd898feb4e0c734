"""The attribution's variants: each part of MetaTune switched on alone in MetaSchedule's
default (xgb) and switched off in ours, as tune overrides, and the comparisons the page
draws from them (:data:`PARTS`)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from bench.common import in_repo

#: The parts a variant switches.
SAMPLER, COST_MODEL, SEARCH, FINE_TUNING, ALL, LEVER = (
    "sampler", "cost model", "search", "fine-tuning", "all", "lever")

#: BO's candidate sampler (``search_params.bo``: evolutionary population 96 x 1 iteration,
#: pool 96) and xgb's (``search_params``: population 256 x 4 genetic iterations). A BO pool
#: from xgb's sampler takes the population's best 256, as the lab's 256 x 4 pool did
#: (``docs/lab/search/search-pool.md``).
BO_SAMPLER = ["search_params.population_size=96", "search_params.genetic_num_iters=1",
              "search_params.init_min_unmeasured=48"]  # as BO's sampler lowers it
XGB_SAMPLER_FOR_BO = ["search_params.bo.population=256", "search_params.bo.genetic_iters=4",
                      "search_params.bo.pool_size=256"]

#: The six splits of the shipped ``llvm-znver4`` pair (``checkpoints/llvm-znver4-super.json``).
ZNVER4_SPLITS = ("../llvm-icelake-server/train,../llvm-rocketlake/train-networks,"
                 "train-networks,train-networks-nhwc,train-nhwc,train-more-networks-nhwc")
#: The GCN pre-trained on them and never meta-trained (``meta.steps=0``), a pair as the
#: shipped one is (``-seed1`` beside it is averaged with it, as the default's seed 1 is).
PRETRAINED_ONLY = "checkpoints/llvm-znver4-super-pretrained.ckpt"
PRETRAINED_ONLY_SEED1 = "checkpoints/llvm-znver4-super-pretrained-seed1.ckpt"


def pretrained_only_command(seed: int, out: str) -> str:
    """``train.py``'s command for the pre-trained-only checkpoint of one seed: the shipped
    pair's recipe (data, graph, seed, pre-training, calibration) with no MAML step."""
    return ("python train.py data_dir=data/llvm-znver4 data.mixed_platforms=true "
            f"'data.splits=[{ZNVER4_SPLITS}]' graph=super seed={seed} meta.steps=0 out={out}")


@dataclass(frozen=True)
class Variant:
    """One configuration of the attribution.

    Attributes:
        name: Its name on the page and in its runs' file names.
        part: What it switches (:data:`SAMPLER`, :data:`COST_MODEL`, ...).
        preset: The ``tune.py`` preset it starts from (``None``: ``tune.py``'s defaults).
        overrides: Tune overrides on top (dotlist); checkpoint paths repository-relative.
        what: One line saying what it is.
        needs: Repository files it needs (a checkpoint), with the commands that make them.
    """

    name: str
    part: str
    preset: str | None
    overrides: tuple[str, ...]
    what: str
    needs: tuple[tuple[str, str], ...] = ()

    def tune_overrides(self) -> list[str]:
        """Its overrides on top of its preset, paths made absolute (workers run anywhere)."""
        out = []
        for o in self.overrides:
            key, _, value = o.partition("=")
            out.append(f"{key}={in_repo(value)}" if key == "metatune.checkpoint" else o)
        return out

    def dotlist(self) -> list[str]:
        """Its whole configuration as tune overrides: the preset, then the rest."""
        return [*([f"preset={self.preset}"] if self.preset else []), *self.tune_overrides()]

    def missing(self) -> list[tuple[str, str]]:
        """The files it needs that are not here, each with the command that makes it."""
        return [(path, cmd) for path, cmd in self.needs if not os.path.exists(in_repo(path))]


#: Every variant, in the page's order. ``xgb`` is the baseline every ratio is taken to.
VARIANTS: tuple[Variant, ...] = (
    Variant("xgb", ALL, "xgb", (), "MetaSchedule's default: XGBoost; evolutionary 256 x 4 "
            "picks its top 16"),
    Variant("xgb+bo-sampler", SAMPLER, "xgb", tuple(BO_SAMPLER),
            "xgb with BO's sampler: evolutionary population 96 x 1 iteration picks its top 16"),
    Variant("xgb-Xfer", COST_MODEL, "xgb-Xfer", (),
            "XGBoost pre-trained on the checkpoint's splits (AutoTVM-style transfer)"),
    Variant("xgb+bo", SEARCH, "xgb", ("search=bo",),
            "XGBoost with batch BO on BO's pool (96 x 1): the default with XGBoost for the GCN"),
    Variant("default", ALL, None, (), "our default: the GCN (super graph, pre-trained + MAML, "
            "fine-tuned online), batch BO on a 96 x 1 evolutionary pool"),
    Variant("default-xgb-sampler", SAMPLER, None, tuple(XGB_SAMPLER_FOR_BO),
            "the default with xgb's sampler: its pool from 256 x 4, pool_size 256"),
    Variant("plain-graph", COST_MODEL, "meta-BO", (),
            "the default on the plain graph (meta-BO; the plain pair)"),
    Variant("gcn-pretrained", COST_MODEL, None, (f"metatune.checkpoint={PRETRAINED_ONLY}",),
            "the default with the GCN pre-trained only (no MAML)",
            ((PRETRAINED_ONLY, pretrained_only_command(0, PRETRAINED_ONLY)),
             (PRETRAINED_ONLY_SEED1, pretrained_only_command(1, PRETRAINED_ONLY_SEED1)))),
    Variant("gcn-scratch", COST_MODEL, None, ("metatune.from_scratch=true",),
            "the default with the GCN from random weights, learning online only"),
    Variant("model-topk", SEARCH, None, ("search_params.bo.acquisition=model",),
            "the default measuring the fine-tuned model's top 16 of the pool (no GP)"),
    Variant("gcn-evolutionary", SEARCH, None, ("search=evolutionary",),
            "the GCN in xgb's search: evolutionary 256 x 4 picks its top 16"),
    Variant("no-finetune", FINE_TUNING, None, ("metatune.adapt_steps=0",),
            "the default without online fine-tuning"),
    Variant("pool-512", LEVER, None, ("search_params.bo.population=512",
                                      "search_params.bo.genetic_iters=2",
                                      "search_params.bo.pool_size=512"),
            "the default with a pool of 512 (512 x 2) scored by the model"),
    Variant("pool-2048", LEVER, None, ("search_params.bo.population=2048",
                                       "search_params.bo.genetic_iters=2",
                                       "search_params.bo.pool_size=2048"),
            "the default with a pool of 2048 (2048 x 2) scored by the model"),
)
BY_NAME = {v.name: v for v in VARIANTS}
BASELINE, DEFAULT = "xgb", "default"
#: What a plain run measures: every variant but the levers (kept for a later A/B).
DEFAULT_VARIANTS = [v.name for v in VARIANTS if v.part != LEVER]


@dataclass(frozen=True)
class Part:
    """A part and the two comparisons that price it, each ``(with it, without it)``:
    ``on`` from MetaSchedule's default (switched on alone in xgb), ``off`` from ours
    (switched off in the default); ``None`` where there is no such pair."""

    name: str
    on: tuple[str, str] | None
    off: tuple[str, str] | None


#: The parts priced on the page's second table.
PARTS: tuple[Part, ...] = (
    Part("everything", ("default", "xgb"), None),
    Part("BO's sampler (96 x 1 for 256 x 4)", ("xgb+bo-sampler", "xgb"),
         ("default", "default-xgb-sampler")),
    Part("the GCN (for XGBoost)", ("gcn-evolutionary", "xgb"), ("default", "xgb+bo")),
    Part("XGBoost's transfer (xgb-Xfer)", ("xgb-Xfer", "xgb"), None),
    Part("the super graph (for the plain one)", None, ("default", "plain-graph")),
    Part("MAML (on pre-training)", None, ("default", "gcn-pretrained")),
    Part("pre-training + MAML (for random weights)", None, ("default", "gcn-scratch")),
    Part("batch BO's GP (for the model's top 16)", ("xgb+bo", "xgb+bo-sampler"),
         ("default", "model-topk")),
    Part("batch BO + its sampler (for evolutionary 256 x 4)", ("xgb+bo", "xgb"),
         ("default", "gcn-evolutionary")),
    Part("online fine-tuning", None, ("default", "no-finetune")),
)


def choose(names: list[str] | None) -> list[Variant]:
    """The variants named (the default set when ``None``), in the table's order.

    Raises:
        SystemExit: A name that is not a variant, listing them.
    """
    names = names or DEFAULT_VARIANTS
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise SystemExit(f"--variants {' '.join(unknown)}: not a variant; choose from "
                         + ", ".join(BY_NAME))
    return [v for v in VARIANTS if v.name in names]
