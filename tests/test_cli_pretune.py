"""``stuning pretune`` end to end on tiny models (model-only strategy, interpreter), and its errors."""

from __future__ import annotations

import json

import pytest
import torch

from stuning.cli.main import main
from stuning.nn.examples import tiny_mlp
from stuning.ops.selection import SELECTOR

TINY = ["--min-size", "0", "--tokens", "16,40", "--strategy", "model", "--device", "h100"]


@pytest.fixture
def db_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("STUNING_DB_DIR", str(tmp_path / "default"))
    SELECTOR.reset()
    yield tmp_path / "db"
    SELECTOR.reset()


def _json(capsys, argv) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_model_json_then_resumed(db_dir, capsys):
    argv = ["pretune", "--model", "stuning.nn.examples:tiny_mlp", "--sparsity", "0.8", *TINY, "--db", str(db_dir),
            "--json"]
    out = _json(capsys, argv)
    assert out["sparsify"]["totals"]["layers"] == 3
    # gate_proj and up_proj share a shape and a bucketed sparsity: 2 shapes x 2 token counts.
    assert out["pretune"]["tuned"] == 4 and out["pretune"]["skipped"] == 0
    assert out["pretune"]["database"] == str(db_dir / "nvidia-h100-sxm.json")
    again = _json(capsys, argv)["pretune"]
    assert again["tuned"] == 0 and again["skipped"] == 4


def test_measured_table_compares_each_problem_with_its_dense_layer(db_dir, capsys, fake_measuring):
    fake_measuring.extend([4.0, 10.0, 20.0, 2.5])  # configs all time at 5 us
    argv = ["pretune", "--model", "stuning.nn.examples:tiny_mlp", "--sparsity", "0.8", "--min-size", "0",
            "--tokens", "16,40", "--trials", "2", "--db", str(db_dir), "--workers", "1"]
    assert main(argv) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "vs dense" in out and "0.50x" in out and "4.00x" in out
    assert "2 of 4 timed problems run faster than their dense layer; 2 slower (down to 0.50x)" in out


@pytest.mark.parametrize("suffix", [".safetensors", ".pt"])
def test_weights_file_2_4_tables(db_dir, tmp_path, capsys, suffix):
    state = tiny_mlp().half().state_dict()
    path = tmp_path / f"mlp{suffix}"
    if suffix == ".safetensors":
        from safetensors.torch import save_file

        save_file(state, str(path))
    else:
        torch.save(state, path)
    assert main(["pretune", "--weights", str(path), "--pattern", "2:4", "--sparsity", "0.5", *TINY,
                 "--db", str(db_dir)]) == 0
    out = capsys.readouterr().out
    assert "layers.0.down_proj" in out and "semi24" in out and "4 tuned" in out


@pytest.mark.parametrize(
    "argv,code,needle",
    [
        (["--model", "no_such_module:build"], 2, "cannot import module 'no_such_module'"),
        (["--model", "stuning.nn.examples:nothing"], 2, "has no callable 'nothing'"),
        (["--model", "stuning.nn.examples"], 2, "write it as module:function"),
        (["--weights", "/nonexistent/model.safetensors"], 2, "no such weights file"),
        (["--model", "stuning.nn.examples:tiny_mlp", "--tokens", "16,lots"], 2, "--tokens: cannot read"),
        (["--model", "stuning.nn.examples:tiny_mlp", "--tokens", "16,-4"], 2, "must be positive"),
        (["--model", "stuning.nn.examples:tiny_mlp", "--pattern", "2:4", "--min-size", "0"], 2, "not 2:4 sparse"),
        (["--model", "stuning.nn.examples:tiny_mlp", "--min-size", "100000"], 2, "no layer to sparsify"),
        (["--model", "stuning.nn.examples:tiny_mlp", "--max-seconds", "-1"], 2, "--max-seconds must be positive"),
    ],
)
def test_bad_input_one_line_error(db_dir, capsys, argv, code, needle):
    assert main(["pretune", *argv, "--strategy", "model"]) == code
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err, err


def test_measuring_without_a_gpu_and_corrupt_database(db_dir, tmp_path, capsys):
    if not torch.cuda.is_available():
        assert main(["pretune", "--model", "stuning.nn.examples:tiny_mlp"]) == 3
        assert "needs a CUDA GPU" in capsys.readouterr().err
    db_dir.mkdir()
    (db_dir / "nvidia-h100-sxm.json").write_text("{not json")
    assert main(["pretune", "--model", "stuning.nn.examples:tiny_mlp", "--sparsity", "0.8", *TINY,
                 "--db", str(db_dir)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "nvidia-h100-sxm.json" in err, err
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"\x00not a checkpoint")
    assert main(["pretune", "--weights", str(garbage), "--strategy", "model"]) == 2
    assert "cannot read weights file" in capsys.readouterr().err


def test_ctrl_c_ends_with_one_line_and_keeps_what_finished(db_dir, capsys, interrupt_second_tune):
    argv = ["pretune", "--model", "stuning.nn.examples:tiny_mlp", "--sparsity", "0.8", *TINY, "--db", str(db_dir)]
    assert main(argv) == 130
    err = capsys.readouterr().err.strip()  # the progress bar's last state, then the one line
    assert err.splitlines()[-1].startswith("stuning pretune: interrupted") and "Traceback" not in err, err
    (written,) = db_dir.glob("*.json")
    assert len(json.loads(written.read_text())["entries"]) == 1
