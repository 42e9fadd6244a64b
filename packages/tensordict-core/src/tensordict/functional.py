"""``tensordict.functional``: the functions that build or combine tensordicts.

The reference's module path for them; each is also a top-level name of ``tensordict``.

>>> import torch
>>> from tensordict import TensorDict
>>> from tensordict.functional import pad
>>> pad(TensorDict(x=torch.ones(2), batch_size=[2]), [0, 1])["x"]
tensor([1., 1., 0.])
"""

from __future__ import annotations

from tensordict._combine.functional import dense_stack_tds
from tensordict._formats.from_python import make_tensordict
from tensordict._functions.grouping import collate, group_by
from tensordict._functions.pad import pad, pad_sequence, unpad_sequence
from tensordict._shared.key_sets import merge_tensordicts

__all__ = [
    "collate",
    "dense_stack_tds",
    "group_by",
    "make_tensordict",
    "merge_tensordicts",
    "pad",
    "pad_sequence",
    "unpad_sequence",
]
