"""The built-in networks beyond the classic CNNs: bert-tiny (a BERT-style encoder in plain
PyTorch) and convnext-atto; each network's own default input shape."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from metatune.errors import ConfigError, UnknownNetworkError
from tuner.engine.builtin_models import Encoder, EncoderConfig, SelfAttention
from tuner.engine.networks import (
    BUILTIN_NETWORKS,
    builtin_input_shape,
    builtin_module,
    load_network,
)


def test_each_network_has_its_own_default_input_shape():
    assert builtin_input_shape("bert-tiny", None) == (128, 128)
    assert builtin_input_shape("bert-mini", None) == (128, 256)
    assert builtin_input_shape("convnext-atto", None) == (3, 224, 224)
    assert builtin_input_shape("resnet-18", None) == (3, 224, 224)
    # what may change: an image's size, a sequence's length; not channels nor hidden size
    assert builtin_input_shape("resnet-18", (3, 112, 112)) == (3, 112, 112)
    assert builtin_input_shape("bert-tiny", (64, 128)) == (64, 128)
    with pytest.raises(ConfigError, match=r"bert-tiny takes token embeddings.*dim 2 = 128"):
        builtin_input_shape("bert-tiny", (3, 224, 224))
    with pytest.raises(ConfigError, match="dim 2 = 128"):
        builtin_input_shape("bert-tiny", (128, 64))
    with pytest.raises(ConfigError, match=r"an image.*dim 1 = 3"):
        builtin_input_shape("convnext-atto", (1, 224, 224))
    with pytest.raises(UnknownNetworkError, match="bert-tiny"):
        builtin_input_shape("bert-base", None)


def test_a_sequence_longer_than_bert_tinys_positions_is_refused_before_import():
    from tuner.engine.builtin_models import EncoderConfig
    from tuner.engine.networks import builtin

    most = EncoderConfig().max_positions
    assert builtin("bert-tiny").max_dims == ((0, most),)  # the encoder's own bound
    assert builtin_input_shape("bert-tiny", (most, 128)) == (most, 128)
    with pytest.raises(ConfigError, match=rf"at most {most} in dim 1"):
        builtin_input_shape("bert-tiny", (most + 1, 128))


def test_a_builtin_builds_seeded_in_eval_mode():
    a, b = builtin_module("bert-tiny"), builtin_module("bert-tiny")
    assert not a.training
    for (key, x), y in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(x, y), key
    assert set(BUILTIN_NETWORKS) >= {"alexnet", "resnet-18", "bert-tiny", "bert-mini",
                                     "convnext-atto"}
    mini = builtin_module("bert-mini")
    assert (len(mini.layers), mini.position.shape[-1]) == (4, 256)


def test_attention_is_scaled_dot_product_attention():
    torch.manual_seed(0)
    cfg = EncoderConfig(hidden=32, heads=4)
    attn = SelfAttention(cfg).eval()
    x = torch.randn(2, 10, 32)

    def heads(t):
        return t.reshape(2, 10, 4, 8).transpose(1, 2)

    with torch.no_grad():
        q, k, v = heads(attn.query(x)), heads(attn.key(x)), heads(attn.value(x))
        ctx = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        want = attn.output(ctx.transpose(1, 2).reshape(2, 10, 32))
        torch.testing.assert_close(attn(x), want, rtol=1e-5, atol=1e-5)


def test_bert_tiny_is_bert_tiny_sized():
    model = builtin_module("bert-tiny")
    assert isinstance(model, Encoder)
    cfg = model.cfg
    assert (cfg.layers, cfg.hidden, cfg.heads, cfg.intermediate) == (2, 128, 2, 512)
    # two layers of 4 h^2 (attention) + 2 h i (feed-forward) weights, biases and norms
    per_layer = 4 * (128 * 128 + 128) + (128 * 512 + 512) + (512 * 128 + 128) + 2 * 2 * 128
    embeddings = 512 * 128 + 128 + 2 * 128
    assert sum(p.numel() for p in model.parameters()) == 2 * per_layer + embeddings
    with torch.no_grad():
        out = model(torch.randn(1, 128, 128))
    assert out.shape == (1, 128, 128)
    # post-norm: every token's output is normalized (unit gamma, zero beta at init)
    torch.testing.assert_close(out.mean(-1), torch.zeros(1, 128), atol=1e-4, rtol=0)


def test_convnext_atto_has_layernorm_gelu_and_depthwise_7x7():
    model = builtin_module("convnext-atto")
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    depthwise = [c for c in convs if c.groups == c.in_channels > 1]
    assert len(depthwise) == 2 + 2 + 6 + 2 and all(c.kernel_size == (7, 7) for c in depthwise)
    assert [c.in_channels for c in depthwise[::2]][:3] == [40, 80, 160]
    assert any(isinstance(m, torch.nn.GELU) for m in model.modules())
    assert any(isinstance(m, torch.nn.LayerNorm) for m in model.modules())
    assert 3.0e6 < sum(p.numel() for p in model.parameters()) < 4.0e6  # timm's atto: 3.7 M
    with torch.no_grad():
        out = model(torch.randn(1, 3, 224, 224))
    assert out.shape == (1, 1000) and torch.isfinite(out).all()


def test_bert_tiny_imports_with_its_own_input_shape_and_transformer_tasks():
    from tuner.engine.targets import resolve_target
    from tuner.engine.tasks import Lowering, extract_tasks

    net = load_network("bert-tiny")
    assert net.input_shape == (1, 128, 128)
    x = net.example_input()
    assert x.dtype == np.float32 and x.shape == (1, 128, 128)
    assert np.isfinite(net.reference(x)).all()
    tasks = extract_tasks(net.relax_mod, resolve_target("llvm").target, Lowering(layout="NHWC"))
    names = [t.name for t in tasks]
    assert not any(t.is_conv for t in tasks)
    # batched matmuls of attention (two 3-D inputs: heads x 128 x 64 and x 64 x 128 or
    # heads x 128 x 128 and x 128 x 64), dense layers, softmax, LayerNorm, GELU
    # (the scores' scaling fused in since activation_fusion moves it above the reshape)
    batched = [t.arg_shapes for t in tasks if "matmul" in t.name and len(t.arg_shapes[0]) == 3]
    assert [[2, 128, 64], [2, 64, 128], [2, 128, 128]] in batched
    assert [[2, 128, 128], [2, 128, 64], [2, 128, 64]] in batched
    for part in ("fused_matmul", "softmax", "layer_norm", "gelu"):
        assert any(part in n for n in names), part
    dense = [t for t in tasks if t.name.startswith("fused_matmul") and len(t.arg_shapes[0]) == 2]
    # the feed-forward layers (128 x 512 x 128); the first has its GELU fused in
    assert max(t.flops for t in dense if "gelu" not in t.name) == pytest.approx(
        2 * 128 * 128 * 512, rel=0.01)
    assert any("gelu" in t.name and t.flops > 2 * 128 * 128 * 512 for t in dense)
    shorter = load_network("bert-tiny", input_shape=(64, 128))
    assert shorter.input_shape == (1, 64, 128)
    assert shorter.reference(shorter.example_input()).shape == (1, 64, 128)


@pytest.mark.slow
def test_convnext_atto_imports_into_conv_layernorm_gelu_tasks():
    from tuner.engine.targets import resolve_target
    from tuner.engine.tasks import Lowering, extract_tasks

    net = load_network("convnext-atto")
    assert net.input_shape == (1, 3, 224, 224)
    tasks = extract_tasks(net.relax_mod, resolve_target("llvm").target, Lowering(layout="NHWC"))
    names = [t.name for t in tasks]
    depthwise = [t for t in tasks if t.is_conv and t.arg_shapes[1][1:3] == [7, 7]
                 and t.arg_shapes[1][-1] == 1]  # OHWI, one input channel per group
    assert {t.arg_shapes[1][0] for t in depthwise} == {40, 80, 160, 320}
    assert sum(t.is_conv for t in tasks) == 8  # 4 depthwise 7x7, stem, 3 downsamplings
    for part in ("fused_matmul", "layer_norm", "gelu"):
        assert any(part in n for n in names), part
    total = sum(t.flops * t.weight for t in tasks)
    assert math.isclose(total, 1.12e9, rel_tol=0.05)  # ConvNeXt-atto: about 0.55 GMACs


def test_the_parity_benchmark_lists_them_and_times_convs_on_their_own_input():
    from bench.parity_convs import onednn_convs
    from bench.pytorch_parity import NETWORKS

    assert {"bert-tiny", "convnext-atto"} <= set(NETWORKS)
    assert onednn_convs("bert-tiny", num_threads=1, repeat=1) == []  # an encoder: no convs
