"""k2dec.primitives.files: the one place gzip files are opened (text lines, plain copies, .gz
outputs)."""

from __future__ import annotations

import gzip

import pytest

from k2dec.primitives.files import (
    UnsafeFileError,
    copy_as,
    is_gzip,
    load_checked_state,
    load_torch_file,
    plain_file,
    text_lines,
)


@pytest.mark.parametrize("name", ["lm.arpa.gz", "lm.arpa"])
def test_plain_file_decompresses_by_content_not_name(tmp_path, name):
    path = tmp_path / name
    with gzip.open(path, "wb") as f:
        f.write(b"\\data\\\n")
    with plain_file(path, "ARPA file") as plain:
        assert plain != path and not is_gzip(plain)
        assert plain.read_bytes() == b"\\data\\\n"
        kept = plain
    assert not kept.exists()  # the copy is removed on exit


def test_plain_file_gives_a_plain_file_itself(tmp_path):
    path = tmp_path / "lm.arpa.gz"  # named .gz, but plain text
    path.write_text("\\data\\\n")
    with plain_file(path, "ARPA file") as plain:
        assert plain == path


def test_plain_file_names_a_corrupt_gzip_file(tmp_path):
    path = tmp_path / "lm.arpa.gz"
    path.write_bytes(gzip.compress(b"x" * 1000)[:20])
    with pytest.raises(ValueError, match=r"lm.arpa.gz: cannot decompress ARPA file"):
        with plain_file(path, "ARPA file"):
            pass


@pytest.mark.parametrize("name, compressed", [("out.arpa.gz", True), ("out.arpa", False)])
def test_copy_as_compresses_by_the_name_and_reads_back(tmp_path, name, compressed):
    src = tmp_path / "src.txt"
    src.write_text("a\nb\n")
    dst = copy_as(src, tmp_path / name)
    assert dst == tmp_path / name and is_gzip(dst) is compressed
    assert not (tmp_path / f"{name}.partial").exists()
    assert [line for _, line in text_lines(dst, "text")] == ["a\n", "b\n"]


class _RunsCode:
    """Unpickling this creates ``marker``: a checkpoint carrying code."""

    def __init__(self, marker) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_load_torch_file_reads_tensors_and_plain_values(tmp_path):
    import torch

    obj = {"model_config": {"dim": 4, "dropout": 0.1, "name": "x", "sizes": (1, 2),
                            "flag": None},
           "model": {"w": torch.arange(6.0).reshape(2, 3), "i": torch.tensor([1, 2])},
           "dtype": torch.float16, "shape": torch.Size([2, 3])}
    torch.save(obj, tmp_path / "ok.pt")
    got = load_torch_file(tmp_path / "ok.pt", "model file")
    assert got["model_config"] == obj["model_config"] and got["dtype"] == torch.float16
    assert torch.equal(got["model"]["w"], obj["model"]["w"]) and got["shape"] == (2, 3)


def test_load_torch_file_never_runs_a_files_code(tmp_path):
    import torch

    marker = tmp_path / "ran"
    torch.save({"model": {}, "x": _RunsCode(marker)}, tmp_path / "evil.pt")
    with pytest.raises(UnsafeFileError, match=r"model file .*evil.pt holds a .*open object"):
        load_torch_file(tmp_path / "evil.pt", "model file")
    assert not marker.exists()
    assert torch.load(tmp_path / "evil.pt", weights_only=False) and marker.exists()  # it would


def test_load_torch_file_refuses_a_torchscript_archive(tmp_path):
    import torch

    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), str(tmp_path / "jit.pt"))
    with pytest.raises(UnsafeFileError, match=r"jit.pt is a TorchScript archive"):
        load_torch_file(tmp_path / "jit.pt", "LM checkpoint")


def test_load_torch_file_says_a_cut_archive_is_truncated(tmp_path):
    import torch

    torch.save({"w": torch.zeros(1000)}, tmp_path / "full.pt")
    (tmp_path / "cut.pt").write_bytes((tmp_path / "full.pt").read_bytes()[:2000])
    with pytest.raises(ValueError, match=r"LM checkpoint .*cut.pt cannot be read \(a torch "
                                         r"archive, truncated or corrupt\?\)"):
        load_torch_file(tmp_path / "cut.pt", "LM checkpoint")


@pytest.mark.parametrize("dtype", ["int32", "int64", "bool", "complex64"])
def test_load_checked_state_refuses_non_float_weights_naming_the_tensor(dtype):
    import torch

    module = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Linear(3, 1))
    state = dict(module.state_dict())
    state["1.weight"] = state["1.weight"].to(getattr(torch, dtype))
    with pytest.raises(ValueError, match=rf"ckpt.pt: weight '1.weight' has dtype torch.{dtype}"):
        load_checked_state(module, state, "ckpt.pt")
    state["1.weight"] = state["1.weight"].to(torch.float16)  # a float dtype is cast
    load_checked_state(module, state, "ckpt.pt")
    assert module[1].weight.dtype == torch.float32
