"""How many checkpoints a run keeps (`RunOptions.keep_checkpoints`, `checkpoint.save`'s `keep`): the newest
three by default, every one at 0 (what a skill curve, `boxjax eval RUN --checkpoints`, reads)."""

import numpy as np
import pytest

from boxjax.models import checkpoint
from boxjax.rl.loop import RunOptions


def saved_steps(directory, keep) -> list[int]:
    """Steps left on disk after saving steps 1..5 with `keep`."""
    for step in range(1, 6):
        checkpoint.save(str(directory), step, {"x": np.full((2,), step, np.float32)}, {"env": "toy"}, keep)
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())


def test_a_run_keeps_its_newest_checkpoints_or_every_one(tmp_path):
    assert saved_steps(tmp_path / "default", 3) == [3, 4, 5]
    assert saved_steps(tmp_path / "all", None) == [1, 2, 3, 4, 5]
    assert checkpoint.latest_step(str(tmp_path / "all")) == 5


def test_a_negative_count_is_refused():
    assert RunOptions().keep_checkpoints == 3
    with pytest.raises(ValueError, match="keep_checkpoints"):
        RunOptions(keep_checkpoints=-1)
