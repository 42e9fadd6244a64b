"""Property tests (hypothesis): round trips and agreement with leaf-by-leaf torch ops."""

from __future__ import annotations

import math

import torch
from core_helpers import assert_same, tensor_leaves
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tensordict import TensorDict, cat, stack

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

batch_sizes = st.lists(st.integers(1, 4), min_size=0, max_size=3)
nonempty_batch_sizes = st.lists(st.integers(1, 4), min_size=1, max_size=3)


def build_td(bs, with_extra_batch=True):
    """Every leaf holds distinct values, so any misplaced element is visible."""
    n = math.prod(bs)
    src = {
        "x": torch.arange(n * 2, dtype=torch.float32).reshape(*bs, 2),
        "y": torch.arange(n).reshape(bs) + 1000,
        "n": {"z": torch.arange(n * 3, dtype=torch.float64).reshape(*bs, 3) - 500},
        "s": "text",
    }
    td = TensorDict(src, list(bs))
    if with_extra_batch:
        td["d"] = TensorDict({"w": torch.arange(n * 2 * 5).reshape(*bs, 2, 5)}, [*bs, 2])
    return td


# ---------------------------------------------------------------- stack / unbind
@SETTINGS
@given(bs=batch_sizes, data=st.data())
def test_stack_unbind_round_trip(bs, data):
    td = build_td(bs)
    n = data.draw(st.integers(1, 3), label="n")
    dim = data.draw(st.integers(-(len(bs) + 1), len(bs)), label="dim")
    tds = [td.apply(lambda x, i=i: x + i) for i in range(n)]
    stacked = stack(tds, dim)
    d = dim % (len(bs) + 1)
    assert stacked.batch_size == torch.Size([*bs[:d], n, *bs[d:]])
    for key in tensor_leaves(td):
        assert torch.equal(stacked[key], torch.stack([t[key] for t in tds], d)), key
    parts = stacked.unbind(dim)
    assert len(parts) == n
    for part, orig in zip(parts, tds):
        assert_same(part, orig)


@SETTINGS
@given(bs=nonempty_batch_sizes, data=st.data())
def test_unbind_stack_round_trip(bs, data):
    td = build_td(bs)
    dim = data.draw(st.integers(-len(bs), len(bs) - 1), label="dim")
    assert_same(torch.stack(td.unbind(dim), dim), td)


# ---------------------------------------------------------------- cat / split
@SETTINGS
@given(bs=nonempty_batch_sizes, data=st.data())
def test_cat_split_round_trip(bs, data):
    td = build_td(bs)
    dim = data.draw(st.integers(-len(bs), len(bs) - 1), label="dim")
    size = bs[dim]
    # a random partition of the dimension into positive parts
    cuts = (
        data.draw(st.sets(st.integers(1, size - 1), max_size=size - 1), label="cuts")
        if size > 1
        else set()
    )
    bounds = [0, *sorted(cuts), size]
    sizes = [b - a for a, b in zip(bounds, bounds[1:])]
    parts = td.split(sizes, dim)
    assert [p.batch_size[dim] for p in parts] == sizes
    for part, ref in zip(parts, td["x"].split(sizes, dim % len(bs))):
        assert torch.equal(part["x"], ref)
    assert_same(cat(parts, dim), td)


@SETTINGS
@given(bs=nonempty_batch_sizes, data=st.data())
def test_split_int_and_chunk_cat_round_trip(bs, data):
    td = build_td(bs)
    dim = data.draw(st.integers(0, len(bs) - 1), label="dim")
    k = data.draw(st.integers(1, 5), label="k")
    parts = td.split(k, dim)
    assert [p.batch_size[dim] for p in parts] == [t.shape[dim] for t in td["y"].split(k, dim)]
    assert_same(torch.cat(parts, dim), td)
    chunks = td.chunk(k, dim)
    assert [c.batch_size[dim] for c in chunks] == [t.shape[dim] for t in td["y"].chunk(k, dim)]
    assert_same(torch.cat(chunks, dim), td)


# ---------------------------------------------------------------- flatten_keys / unflatten_keys
key_names = st.text(alphabet="abcxyz_", min_size=1, max_size=3)


def nested_structures(depth=3):
    leaf = st.integers(1, 3)  # feature size of a leaf
    return st.recursive(
        st.dictionaries(key_names, leaf, min_size=1, max_size=3),
        lambda children: st.dictionaries(
            key_names, st.one_of(leaf, children), min_size=1, max_size=3
        ),
        max_leaves=8,
    )


def build_from_structure(structure, bs, counter):
    out = {}
    for key, value in structure.items():
        if isinstance(value, dict):
            out[key] = build_from_structure(value, bs, counter)
        else:
            n = math.prod(bs) * value
            out[key] = torch.arange(counter[0], counter[0] + n).reshape(*bs, value)
            counter[0] += n
    return out


@SETTINGS
@given(structure=nested_structures(), bs=batch_sizes, sep=st.sampled_from([".", "/", "::"]))
def test_flatten_unflatten_keys_round_trip(structure, bs, sep):
    td = TensorDict(build_from_structure(structure, bs, [0]), bs)
    flat = td.flatten_keys(sep)
    # a flat tensordict: one top-level leaf per nested leaf, named by joining the path
    expected_flat = {sep.join(k) if isinstance(k, tuple) else k for k in td.keys(True, True)}
    assert set(flat.keys()) == expected_flat
    assert list(flat.keys(True)) == list(flat.keys())
    for key, value in td.items(True, True):
        name = sep.join(key) if isinstance(key, tuple) else key
        assert flat[name] is value
    back = flat.unflatten_keys(sep)
    assert set(back.keys(True)) == set(td.keys(True))
    for key, value in td.items(True, True):
        assert back[key] is value
    for key, value in td.items(True):
        if isinstance(value, TensorDict):
            assert back[key].batch_size == value.batch_size == torch.Size(bs)


# ---------------------------------------------------------------- reshape
@st.composite
def same_numel_shape(draw, bs):
    """A shape with the same number of elements: shuffle the dims, merge adjacent ones,
    and sprinkle dims of size 1."""
    dims = list(draw(st.permutations(bs))) if bs else []
    merged = []
    for d in dims:
        if merged and draw(st.booleans()):
            merged[-1] *= d
        else:
            merged.append(d)
    if draw(st.booleans()):
        merged.insert(draw(st.integers(0, len(merged))), 1)
    return merged


@SETTINGS
@given(bs=batch_sizes, data=st.data())
def test_reshape_round_trip(bs, data):
    td = build_td(bs)
    new = data.draw(same_numel_shape(bs), label="new shape")
    out = td.reshape(*new)
    assert out.batch_size == torch.Size(new)
    nb = len(bs)
    for key, value in tensor_leaves(td).items():
        assert torch.equal(out[key], value.reshape((*new, *value.shape[nb:]))), key
    assert out["d"].batch_size == torch.Size([*new, 2])
    assert_same(out.reshape(*bs), td)
    # view agrees with reshape on contiguous data
    assert_same(td.view(*new), out)


@SETTINGS
@given(bs=nonempty_batch_sizes, data=st.data())
def test_permute_round_trip(bs, data):
    td = build_td(bs)
    perm = data.draw(st.permutations(range(len(bs))), label="perm")
    out = td.permute(*perm)
    nb = len(bs)
    for key, value in tensor_leaves(td).items():
        assert torch.equal(out[key], value.permute(*perm, *range(nb, value.ndim))), key
    inverse = sorted(range(nb), key=lambda i: perm[i])
    assert_same(out.permute(*inverse), td)


# ---------------------------------------------------------------- indexing
@st.composite
def batch_index(draw, bs):
    """An index over the batch dims: ints, slices, None, lists, 1-D bool masks, and an
    optional Ellipsis (items after it index the trailing batch dims)."""
    nb = len(bs)
    n_indexed = draw(st.integers(0, nb))
    use_ellipsis = draw(st.booleans())
    ellipsis_at = draw(st.integers(0, n_indexed)) if use_ellipsis else None
    # dims consumed before the ellipsis are the leading ones, after it the trailing ones
    if use_ellipsis:
        dims = list(range(ellipsis_at)) + list(range(nb - (n_indexed - ellipsis_at), nb))
    else:
        dims = list(range(n_indexed))
    items = []
    for dim in dims:
        size = bs[dim]
        kind = draw(st.sampled_from(["int", "slice", "list", "mask"]))
        if kind == "int":
            item = draw(st.integers(-size, size - 1))
        elif kind == "slice":
            start = draw(st.one_of(st.none(), st.integers(-size, size)))
            stop = draw(st.one_of(st.none(), st.integers(-size, size)))
            step = draw(st.one_of(st.none(), st.integers(1, 3)))
            item = slice(start, stop, step)
        elif kind == "list":
            item = draw(st.lists(st.integers(-size, size - 1), min_size=1, max_size=3))
        else:
            item = torch.tensor(draw(st.lists(st.booleans(), min_size=size, max_size=size)))
        items.append(item)
        if draw(st.integers(0, 4)) == 0:
            items.append(None)
    if use_ellipsis:
        # position of the ellipsis among the drawn items (Nones do not consume dims)
        consumed, at = 0, len(items)
        for i, item in enumerate(items):
            if consumed == ellipsis_at:
                at = i
                break
            if item is not None:
                consumed += 1
        items.insert(at, Ellipsis)
    # torch only allows one advanced index group to be broadcast: keep at most one list/mask
    advanced = [i for i, it in enumerate(items) if isinstance(it, (list, torch.Tensor))]
    for i in advanced[1:]:
        items[i] = slice(None)
    return tuple(items)


def spell_out(index, nb):
    """The index with '...' replaced by ':' over the batch dims only."""
    consumed = sum(1 for it in index if it is not None and it is not Ellipsis)
    out = []
    for it in index:
        if it is Ellipsis:
            out.extend([slice(None)] * (nb - consumed))
        else:
            out.append(it)
    if not any(it is Ellipsis for it in index):
        out.extend([slice(None)] * (nb - consumed))
    return tuple(out)


@SETTINGS
@given(bs=batch_sizes, data=st.data())
def test_indexing_agrees_with_leafwise_indexing(bs, data):
    td = build_td(bs)
    index = data.draw(batch_index(bs), label="index")
    full = spell_out(index, len(bs))
    out = td[index]
    expected_bs = td["y"][full].shape
    assert out.batch_size == expected_bs
    for key, value in tensor_leaves(td).items():
        assert torch.equal(out[key], value[full]), (key, index)
    assert out["n"].batch_size == expected_bs
    assert out["d"].batch_size == torch.Size([*expected_bs, 2])
    assert out["s"] == "text"


@SETTINGS
@given(bs=nonempty_batch_sizes, data=st.data())
def test_setitem_agrees_with_leafwise_setitem(bs, data):
    td = build_td(bs, with_extra_batch=False)
    index = data.draw(batch_index(bs), label="index")
    full = spell_out(index, len(bs))
    sub_bs = td["y"][full].shape
    value = build_td(list(sub_bs), with_extra_batch=False).apply(lambda x: -x - 1)
    expected = {k: v.clone() for k, v in tensor_leaves(td).items()}
    for key in expected:
        expected[key][full] = value[key]
    td[index] = value
    for key, exp in expected.items():
        assert torch.equal(td[key], exp), (key, index)
