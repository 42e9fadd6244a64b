"""Sphinx configuration. Build with `nox -s docs` (html and doctest, warnings are errors).

The documented packages are imported from the environment (nox installs all five
distributions), never from sys.path tricks, so the docs show what users install.
"""

from __future__ import annotations

import tensordict

project = "tensordict"
author = "the tensordict monorepo authors"
copyright = "2026, the tensordict monorepo authors"
version = release = tensordict.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.doctest",
    "sphinx.ext.napoleon",
]

root_doc = "index"
exclude_patterns = ["_build"]
html_theme = "alabaster"
html_static_path: list[str] = []

autodoc_default_options = {"members": True, "member-order": "bysource"}
autodoc_typehints = "description"
napoleon_google_docstring = True
napoleon_numpy_docstring = True

# Every doctest (in .rst pages and in docstrings pulled in by autodoc) starts from this.
# Docstring examples may use their module's names unqualified, as under ``python -m
# doctest``; the public names of core's modules are put in scope for them.
doctest_global_setup = """
import torch
import tensordict
from tensordict import *
from tensordict._keys import *
from tensordict._leaves.collection import *
from tensordict._leaves.nontensor import *
from tensordict._keys.shape import *
from tensordict._keys.index import *
from tensordict._kinds.kinds import *
from tensordict._engine.tree import *
from tensordict._formats.repr import *
from tensordict.base import set_get_defaults_to_none, get_defaults_to_none
from tensordict.nn import *
from tensordict.nn.distributions import *
from tensordict.nn.distributions.composite import *
from tensordict.nn.distributions.truncated_normal import *
from tensordict.utils import *  # last: the public unravel_key is utils', not _keys'
# the star imports bring `annotations` (a __future__ feature object) from modules that use
# `from __future__ import annotations`; doctest would then compile every example with it
globals().pop("annotations", None)
"""
