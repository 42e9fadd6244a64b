"""The reference 0.15's small public helpers: key utilities, dtype predicates, the logger,
``print_directory_tree``, ``TensorDictFuture`` and the legacy module path."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

import tensordict
from tensordict import TensorDict
from tensordict.utils import (
    KEY_SEPARATOR,
    TensorDictFuture,
    is_bool,
    is_floating,
    is_inexact,
    is_integer,
    logger,
    print_directory_tree,
    unravel_key_to_tuple,
)


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("a", ("a",)),
        (("a",), ("a",)),
        (("a", ("b", ("c",))), ("a", "b", "c")),
        (("a", 1), ()),
        (1, ()),
        ((), ()),
        (("a", ()), ()),
    ],
)
def test_unravel_key_to_tuple(key: object, expected: tuple) -> None:
    assert unravel_key_to_tuple(key) == expected  # type: ignore[arg-type]


def test_key_separator_is_flatten_keys_default() -> None:
    td = TensorDict(a={"b": torch.zeros(1)})
    assert list(td.flatten_keys().keys()) == [f"a{KEY_SEPARATOR}b"]


DTYPES = {
    torch.float32: "floating",
    torch.bfloat16: "floating",
    torch.complex64: "complex",
    torch.bool: "bool",
    torch.uint8: "integer",
    torch.int64: "integer",
}


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("with_key", [False, True])
def test_dtype_predicates_look_at_the_last_argument(dtype: torch.dtype, with_key: bool) -> None:
    value = torch.zeros(2, dtype=dtype)
    args = ("key", value) if with_key else (value,)
    kind = DTYPES[dtype]
    assert is_floating(*args) is (kind == "floating")
    assert is_inexact(*args) is (kind in ("floating", "complex"))
    assert is_bool(*args) is (kind == "bool")
    assert is_integer(*args) is (kind == "integer")


def test_dtype_predicates_on_non_tensors_are_false() -> None:
    for predicate in (is_floating, is_inexact, is_bool, is_integer):
        assert predicate("a string") is False
        assert predicate(1.5) is False
    with pytest.raises(TypeError):
        is_floating()


def test_top_level_names() -> None:
    for name in (
        "KEY_SEPARATOR",
        "unravel_key_to_tuple",
        "is_bool",
        "is_floating",
        "is_inexact",
        "is_integer",
    ):
        assert getattr(tensordict, name) is getattr(tensordict.utils, name)


def test_logger_is_the_tensordict_logger(caplog: pytest.LogCaptureFixture) -> None:
    assert logger is logging.getLogger("tensordict")
    logger.propagate = True  # let caplog see it
    try:
        with caplog.at_level(logging.INFO, logger="tensordict"):
            logger.info("hello")
    finally:
        logger.propagate = False
    assert {r.getMessage() for r in caplog.records} == {"hello"}


def test_print_directory_tree(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "x.bin").write_bytes(b"12345")
    (tmp_path / "y.txt").write_bytes(b"abc")
    tree = print_directory_tree(tmp_path)
    lines = tree.splitlines()
    assert lines[0] == "Directory size: 8.00 B"
    assert lines[1] == f"{tmp_path.name}/"
    assert sorted(lines[2:]) == sorted(["    sub/", "        x.bin", "    y.txt"])
    assert lines.index("        x.bin") == lines.index("    sub/") + 1
    bare = print_directory_tree(tmp_path, indent="> ", display_metadata=False).splitlines()
    assert bare[0] == f"> {tmp_path.name}/"
    assert all(line.startswith("> ") for line in bare)


def test_tensordict_future_waits_and_reraises() -> None:
    td = TensorDict(a=torch.zeros(3))
    gate = threading.Event()

    def write() -> None:
        gate.wait(5)
        td["a"].fill_(1.0)

    with ThreadPoolExecutor(1) as pool:
        future = TensorDictFuture([pool.submit(write)], td)
        assert not future.done()
        gate.set()
        assert future.result() is td
        assert td["a"].tolist() == [1.0, 1.0, 1.0]
        assert future.done()

        def fail() -> None:
            raise ValueError("boom")

        with pytest.raises(ValueError, match="boom"):
            TensorDictFuture([pool.submit(fail)], td).result()


def test_legacy_module_path() -> None:
    from tensordict.tensordict import (
        LazyStackedTensorDict,
        TensorDictBase,
        pad_sequence,
    )
    from tensordict.tensordict import (
        TensorDict as LegacyTensorDict,
    )

    assert LegacyTensorDict is tensordict.TensorDict
    assert LazyStackedTensorDict is tensordict.LazyStackedTensorDict
    assert TensorDictBase is tensordict.TensorDictBase
    assert pad_sequence is tensordict.pad_sequence
    import tensordict.tensordict as legacy

    with pytest.raises(AttributeError):
        legacy.not_a_name  # noqa: B018


def test_utils_reexports() -> None:
    from tensordict.utils import (
        assert_allclose_td,
        get_printoptions,
        is_tensorclass,
        lazy_legacy,
        set_lazy_legacy,
        set_printoptions,
    )

    assert set_lazy_legacy is tensordict.set_lazy_legacy
    assert lazy_legacy is tensordict.lazy_legacy
    assert assert_allclose_td is tensordict.assert_allclose_td
    assert get_printoptions is tensordict.get_printoptions
    assert set_printoptions is tensordict.set_printoptions
    assert is_tensorclass is tensordict.is_tensorclass
