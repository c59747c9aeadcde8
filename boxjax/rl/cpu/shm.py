"""Pytrees of numpy arrays in one shared-memory block each, for the CPU path's processes.

The process that creates a block owns it (and unlinks it); the others attach by name with a template of
the same structure, shapes and dtypes, which every process builds for itself. Views are live: a write
in one process is seen by the others; who may write when is the caller's protocol.
"""

from __future__ import annotations

from multiprocessing import resource_tracker, shared_memory
from typing import Any

import jax
import numpy as np

_ALIGN_BYTES = 64
_CREATED: set[str] = set()
"""Blocks this process created (and owns)."""


def _offsets(leaves: list[Any]) -> tuple[list[int], int]:
    offsets, end = [], 0
    for leaf in leaves:
        end = -(-end // _ALIGN_BYTES) * _ALIGN_BYTES
        offsets.append(end)
        end += int(np.prod(np.shape(leaf), dtype=np.int64)) * np.dtype(leaf.dtype).itemsize
    return offsets, max(end, 1)


class SharedTree:
    """A pytree whose leaves are numpy arrays in one `multiprocessing.shared_memory` block."""

    def __init__(self, block: shared_memory.SharedMemory, template: Any, owner: bool):
        leaves, self.treedef = jax.tree.flatten(template)
        offsets, _ = _offsets(leaves)
        self.block, self.owner = block, owner
        self.leaves = [
            np.ndarray(np.shape(x), np.dtype(x.dtype), buffer=block.buf, offset=o)
            for x, o in zip(leaves, offsets, strict=True)
        ]

    @classmethod
    def create(cls, template: Any) -> SharedTree:
        """A new zeroed block laid out like `template` (leaves with `.shape` and `.dtype`)."""
        _, size = _offsets(jax.tree.leaves(template))
        block = shared_memory.SharedMemory(create=True, size=size)
        _CREATED.add(block.name)
        tree = cls(block, template, owner=True)
        for leaf in tree.leaves:
            leaf[...] = 0
        return tree

    @classmethod
    def attach(cls, name: str, template: Any) -> SharedTree:
        """The existing block `name`, laid out like `template`."""
        block = shared_memory.SharedMemory(name=name)
        if block.name not in _CREATED:
            # Python < 3.13 registers an attached block with this process's resource tracker, which
            # would remove it when this process exits; only its creator may.
            resource_tracker.unregister(block._name, "shared_memory")
        return cls(block, template, owner=False)

    @property
    def name(self) -> str:
        """The block's system-wide name (pass it to `attach`)."""
        return self.block.name

    def view(self) -> Any:
        """The tree of live views (writes land in shared memory)."""
        return jax.tree.unflatten(self.treedef, self.leaves)

    def read(self) -> Any:
        """A private copy of the tree."""
        return jax.tree.unflatten(self.treedef, [leaf.copy() for leaf in self.leaves])

    def write(self, tree: Any) -> None:
        """Copy `tree` (same structure) into the block."""
        for leaf, value in zip(self.leaves, jax.tree.leaves(tree), strict=True):
            leaf[...] = np.asarray(value)

    def close(self) -> None:
        """Drop this process's mapping; the owner also removes the block."""
        self.leaves = []
        try:
            self.block.close()
        except BufferError:  # a caller still holds a view; the mapping goes with the process
            pass
        if self.owner:
            self.block.unlink()
            _CREATED.discard(self.block.name)
