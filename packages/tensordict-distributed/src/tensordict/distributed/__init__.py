"""tensordict.distributed: tensordicts across processes (``tensordict-distributed``).

This subpackage will own:

* point-to-point transport: ``send``/``recv``/``isend``/``irecv`` (and the async
  ``asend``/``arecv``), sending one consolidated buffer plus metadata per tensordict;
* ``init_remote``/``from_remote_init``;
* collectives: ``broadcast``, ``reduce``, ``all_reduce``, ``all_gather``, each taking a
  ``group`` and a timeout so that nothing hangs forever;
* ``map``/``map_iter`` over worker processes.

It depends on ``tensordict-core`` only; shared-scratch transport through memory-mapped
files needs the ``memmap`` extra (``pip install tensordict-distributed[memmap]``) and
imports ``tensordict.memmap`` only when used.
"""

__version__ = "0.1.0"
