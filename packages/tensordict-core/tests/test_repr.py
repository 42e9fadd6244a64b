"""The printed form follows the reference layout: sorted fields, one line per leaf
(``a: Tensor(shape=..., device=..., dtype=..., is_shared=...)``), nested tensordicts
indented, then batch_size, device and is_shared."""

from __future__ import annotations

import textwrap

import torch

from tensordict import TensorDict


def test_repr_single_leaf():
    td = TensorDict({"a": torch.zeros(3)}, [3])
    expected = textwrap.dedent(
        """\
        TensorDict(
            fields={
                a: Tensor(shape=torch.Size([3]), device=cpu, dtype=torch.float32, is_shared=False)},
            batch_size=torch.Size([3]),
            device=None,
            is_shared=False)"""
    )
    assert repr(td) == expected
    assert str(td) == expected


def test_repr_sorted_keys_nested_and_device():
    td = TensorDict(
        {
            "z": torch.zeros(3),
            "a": torch.zeros(3, 2, dtype=torch.int64),
            "m": {"y": torch.ones(3, dtype=torch.bool)},
        },
        [3],
        device="cpu",
    )
    expected = textwrap.dedent(
        """\
        TensorDict(
            fields={
                a: Tensor(shape=torch.Size([3, 2]), device=cpu, dtype=torch.int64, is_shared=False),
                m: TensorDict(
                    fields={
                        y: Tensor(shape=torch.Size([3]), device=cpu, dtype=torch.bool, is_shared=False)},
                    batch_size=torch.Size([3]),
                    device=cpu,
                    is_shared=False),
                z: Tensor(shape=torch.Size([3]), device=cpu, dtype=torch.float32, is_shared=False)},
            batch_size=torch.Size([3]),
            device=cpu,
            is_shared=False)"""
    )
    assert repr(td) == expected


def test_repr_reference_from_tuple_example():
    # the reference prints TensorDict.from_tuple((1, 2, 3)) like this
    td = TensorDict({"0": torch.tensor(1), "1": torch.tensor(2), "2": torch.tensor(3)})
    expected = textwrap.dedent(
        """\
        TensorDict(
            fields={
                0: Tensor(shape=torch.Size([]), device=cpu, dtype=torch.int64, is_shared=False),
                1: Tensor(shape=torch.Size([]), device=cpu, dtype=torch.int64, is_shared=False),
                2: Tensor(shape=torch.Size([]), device=cpu, dtype=torch.int64, is_shared=False)},
            batch_size=torch.Size([]),
            device=None,
            is_shared=False)"""
    )
    assert repr(td) == expected


def test_repr_reference_nested_example():
    # reference load_memmap docstring example, on cpu
    td = TensorDict({"a": torch.zeros(()), "b": {"c": torch.zeros(())}})
    expected = textwrap.dedent(
        """\
        TensorDict(
            fields={
                a: Tensor(shape=torch.Size([]), device=cpu, dtype=torch.float32, is_shared=False),
                b: TensorDict(
                    fields={
                        c: Tensor(shape=torch.Size([]), device=cpu, dtype=torch.float32, is_shared=False)},
                    batch_size=torch.Size([]),
                    device=None,
                    is_shared=False)},
            batch_size=torch.Size([]),
            device=None,
            is_shared=False)"""
    )
    assert repr(td) == expected


def test_repr_meta_device():
    td = TensorDict({"a": torch.zeros(()), "b": {"c": torch.zeros(())}}, device="meta")
    text = repr(td)
    assert (
        "a: Tensor(shape=torch.Size([]), device=meta, dtype=torch.float32, is_shared=False)" in text
    )
    assert text.count("device=meta") == 4  # 2 leaves + nested + root


def test_repr_parameter_class_name():
    td = TensorDict({"p": torch.nn.Parameter(torch.zeros(2))}, [2])
    assert (
        "p: Parameter(shape=torch.Size([2]), device=cpu, dtype=torch.float32, is_shared=False)"
        in repr(td)
    )


def test_repr_shared():
    td = TensorDict({"a": torch.zeros(2)}, [2]).share_memory_()
    text = repr(td)
    assert (
        "a: Tensor(shape=torch.Size([2]), device=cpu, dtype=torch.float32, is_shared=True)" in text
    )
    assert text.endswith("is_shared=True)")


def test_repr_non_tensor():
    td = TensorDict({"s": "text", "a": torch.zeros(2)}, [2])
    lines = repr(td).splitlines()
    assert lines[2].strip().startswith("a: Tensor(")
    assert (
        lines[3].strip() == "s: NonTensorData(data=text, batch_size=torch.Size([2]), device=None)},"
    )


def test_repr_empty():
    expected = textwrap.dedent(
        """\
        TensorDict(
            fields={
            },
            batch_size=torch.Size([]),
            device=None,
            is_shared=False)"""
    )
    assert repr(TensorDict()) == expected


def test_repr_sorts_regardless_of_insertion_order():
    td1 = TensorDict({"b": torch.zeros(1), "a": torch.zeros(1)}, [1])
    td2 = TensorDict({"a": torch.zeros(1), "b": torch.zeros(1)}, [1])
    assert repr(td1) == repr(td2)
    assert repr(td1).index("a: Tensor") < repr(td1).index("b: Tensor")


def test_repr_of_a_strided_nested_tensor_marks_ragged_dims():
    nested = torch.nested.nested_tensor([torch.zeros(2, 4), torch.zeros(3, 4)])
    text = repr(TensorDict({"n": nested}, [2]))
    assert "n: Tensor(shape=torch.Size([2, -1, 4]), device=cpu, dtype=torch.float32" in text
