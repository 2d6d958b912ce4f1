"""sparsify and pretune on CNNs: which convolutions convert, same outputs, GEMM-view tuning keys."""

from __future__ import annotations

import json

import pytest
import torch
from naive import TOL, assert_close
from torch import nn

import stuning
from stuning.nn import SparseConv2d, SparseLinear
from stuning.nn.cnn_examples import mobilenet_v1, resnet50, tiny_mobilenet, tiny_resnet
from stuning.nn.shapes import gemm_columns
from stuning.tuning.session import key_for


def _dense_with_zeros(model: nn.Module, sparse: nn.Module, names: list[str]) -> nn.Module:
    with torch.no_grad():
        for name in names:
            model.get_submodule(name).weight.copy_(sparse.get_submodule(name).dense_weight())
    return model


def test_example_networks_have_the_published_sizes():
    resnet, mobilenet = resnet50(), mobilenet_v1()
    assert sum(p.numel() for p in resnet.parameters()) == 25_557_032  # torchvision's resnet50
    assert sum(p.numel() for p in mobilenet.parameters()) == 4_231_976  # MobileNetV1 1.0, 1000 classes
    assert sum(isinstance(m, nn.Conv2d) for m in resnet.modules()) == 53
    assert sum(isinstance(m, nn.Conv2d) and m.groups > 1 for m in mobilenet.modules()) == 13


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
def test_sparsified_resnet_matches_the_dense_one_with_the_same_zeros(channels_last, gen):
    model, reference = tiny_resnet(), tiny_resnet()
    report = stuning.sparsify(model, sparsity=0.8, min_size=0)
    names = [r.name for r in report.layers]
    assert len(names) == 10 and report.skipped == {}  # 9 convolutions and the classifier
    stem = report.layers[0]
    assert (stem.name, stem.kind, stem.shape, stem.format) == ("stem.0", "Conv2d", (8, 3, 7, 7), "csr")
    assert stem.dense_bytes == 8 * 3 * 7 * 7 * 4 and stem.sparsity == pytest.approx(0.8, abs=0.01)
    assert isinstance(model.stem[0], SparseConv2d) and isinstance(model.fc, SparseLinear)
    _dense_with_zeros(reference, model, names)
    layout = torch.channels_last if channels_last else torch.contiguous_format
    if channels_last:
        model, reference = model.to(memory_format=layout), reference.to(memory_format=layout)
    x = torch.randn(2, 3, 32, 32, generator=gen).to(memory_format=layout)
    with torch.no_grad():
        assert_close(model(x), reference.double()(x.double()), 10 * TOL[torch.float32], "tiny ResNet")


def test_depthwise_stays_dense_with_its_reason_and_2_4_pointwise(gen):
    model, reference = tiny_mobilenet().half(), tiny_mobilenet().half()
    report = stuning.sparsify(model, sparsity=0.5, pattern="2:4", min_size=0, skip="fc")
    depthwise = [name for name, m in reference.named_modules() if isinstance(m, nn.Conv2d) and m.groups > 1]
    assert len(depthwise) == 4 and set(report.skipped) == {*depthwise, "fc"}
    assert all("(depthwise): only groups=1" in report.skipped[n] for n in depthwise)
    assert [r.format for r in report.layers] == ["2:4"] * 5  # the stem and four pointwise convolutions
    _dense_with_zeros(reference, model, [r.name for r in report.layers])
    x = torch.randn(2, 3, 32, 32, generator=gen).half()
    with torch.no_grad():
        assert_close(model(x), reference.double()(x.double()), 5 * TOL[torch.float16], "tiny MobileNet 2:4")


def test_min_size_and_skip_apply_to_convolutions():
    model = tiny_resnet()
    report = stuning.sparsify(model, sparsity=0.9, min_size=600, skip="stages.1.*")
    assert [r.name for r in report.layers] == ["stem.0", "fc"]  # 8 x 3 x 7 x 7 = 1176 and 10 x 64 weights
    assert report.skipped["stages.0.0.branch.3"] == "576 weights < min_size 600"  # 8 x 8 x 3 x 3
    assert report.skipped["stages.1.0.branch.3"] == "skip"


def test_gemm_columns_follow_each_layer_through_the_network():
    model = resnet50(width=8)  # ResNet-50's strides and depth, narrower: quicker to sparsify
    stuning.sparsify(model, sparsity=0.9, min_size=0)
    cols = gemm_columns(model, [(1, 3, 224, 224), (8, 3, 224, 224)])  # meta tensors: nothing computed
    assert cols["stem.0"] == [112 * 112, 8 * 112 * 112]
    assert cols["stages.0.0.branch.0"] == [56 * 56, 8 * 56 * 56]
    assert cols["stages.3.2.branch.6"] == [7 * 7, 8 * 7 * 7]
    assert cols["fc"] == [1, 8]
    assert "forward" not in model.fc.__dict__  # the stubs are gone


def test_pretune_writes_gemm_view_keys(db_dir):
    model = tiny_mobilenet()
    stuning.sparsify(model, sparsity=0.8, min_size=0)
    report = stuning.pretune(model, input_shapes=[(1, 3, 32, 32), (4, 3, 32, 32)], strategy="model",
                             device="h100", progress=False)
    stem = [p for p in report.problems if p.layers == ["features.0"]]
    # The 3x3 stride-2 stem on 32x32: M = 8, K = 3 x 3 x 3, N = batch x 16 x 16.
    assert [(p.op, p.shape, p.tokens) for p in stem] == [("spmm", (8, 27), 256), ("spmm", (8, 27), 1024)]
    # The 1x1 8 -> 16 convolution (K = 8, under two nonzeros a row) is below the spmm config space's
    # smallest nonzero step, so it fails and gets the heuristic at run time; the others are tuned.
    assert {p.status for p in report.problems if p.shape[1] > 8} == {"tuned"}
    stored = json.loads((db_dir / "nvidia-h100-sxm.json").read_text())["entries"]
    assert set(stored) == {p.key for p in report.problems if p.status == "tuned"}
    features = stored[stem[1].key]["features"]
    assert (features["m"], features["k"], features["n"]) == (8, 27, 1024)
    weight = model.features[0].sparse_weight
    assert stem[1].key == key_for(weight.features(4 * 16 * 16))  # what a forward at batch 4 looks up


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({}, "depends on the input: pass input_shapes"),
        ({"tokens": [16], "input_shapes": (1, 3, 32, 32)}, "not both"),
        ({"input_shapes": [(1, 3, 32, 0)]}, "input_shapes must be one shape of positive ints"),
        ({"input_shapes": (1, 4, 32, 32)}, "could not run the model .* expected 3 input channels"),
    ],
)
def test_pretune_bad_requests_raise(db_dir, kwargs, match):
    model = tiny_resnet()
    stuning.sparsify(model, sparsity=0.8, min_size=0)
    with pytest.raises(ValueError, match=match):
        stuning.pretune(model, strategy="model", progress=False, **kwargs)


def test_cli_pretune_of_a_cnn_takes_input_shapes(db_dir, capsys):
    from stuning.cli.main import main

    argv = ["pretune", "--model", "stuning.nn.cnn_examples:tiny_resnet", "--sparsity", "0.8", "--min-size", "0",
            "--strategy", "model", "--device", "h100", "--db", str(db_dir / "cli"), "--no-check"]
    assert main([*argv, "--input-shapes", "2x3x32x32", "--json"]) in (0, 1)  # 1: the K = 8 layers fail
    out = json.loads(capsys.readouterr().out)["pretune"]
    stem = [p for p in out["problems"] if p["layers"] == ["stem.0"]]
    assert [(p["shape"], p["tokens"], p["status"]) for p in stem] == [([8, 147], 2 * 16 * 16, "tuned")]
    assert main(argv) == 2  # a convolution's N needs the input shapes
    assert "depends on the input: pass input_shapes" in capsys.readouterr().err
    assert main([*argv, "--tokens", "16", "--input-shapes", "1x3x32x32"]) == 2
