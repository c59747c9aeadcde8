"""Checkpoints written before a state dataclass gained a field that holds no arrays (None: `State.others`,
added for several learners) restore into today's states, and the other way round; an array the checkpoint
lacks is still an error naming it."""

import jax
import numpy as np
import pytest
from flax import serialization

from boxjax.envs.toy import PointReach
from boxjax.models import checkpoint
from boxjax.rl import ppo


def _without(tree, field: str):
    """`tree` as nested dicts (`flax.serialization.to_state_dict`) with every `field` entry left out."""
    if isinstance(tree, dict):
        return {k: _without(v, field) for k, v in tree.items() if k != field}
    return tree


@pytest.fixture(scope="module")
def states():
    config = ppo.PPOConfig(
        num_envs=4, unroll_length=5, minibatch_size=20, policy_hidden=(8,), value_hidden=(8,)
    )
    result, _ = ppo.train_run(PointReach(), config, jax.random.PRNGKey(0), iterations=1)
    return {"train": result.train_state, "rollout": result.rollout_state}


def test_a_checkpoint_without_a_none_field_restores_into_todays_state(tmp_path, states):
    """Saved as nested dicts without `others` (the layout of a checkpoint from before the field), restored
    into the state with it: every array equal, `others` None."""
    old = _without(serialization.to_state_dict(jax.device_get(states)), "others")
    assert "others" not in old["rollout"]["env"]
    checkpoint.save(str(tmp_path), 1, old, {"format": checkpoint.FORMAT})
    restored = checkpoint.restore(str(tmp_path), states)
    assert restored["rollout"].env.others is None
    for a, b in zip(jax.tree.leaves(restored), jax.tree.leaves(states), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_none_field_the_template_lacks_is_no_mismatch_but_a_missing_array_is(tmp_path, states):
    """A checkpoint with `others` None restores into a template without it; one without the normaliser's
    arrays is refused, naming the leaf."""
    checkpoint.save(str(tmp_path / "new"), 1, jax.device_get(states), {"format": checkpoint.FORMAT})
    template = _without(serialization.to_state_dict(jax.device_get(states)), "others")
    restored = checkpoint.restore(str(tmp_path / "new"), template)
    np.testing.assert_array_equal(restored["train"]["iteration"], states["train"].iteration)
    lacking = serialization.to_state_dict(jax.device_get(states))
    lacking["train"] = _without(lacking["train"], "normalizer")
    checkpoint.save(str(tmp_path / "lacking"), 1, lacking, {"format": checkpoint.FORMAT})
    with pytest.raises(checkpoint.CheckpointMismatchError, match="no leaf train/normalizer"):
        checkpoint.restore(str(tmp_path / "lacking"), states)


def test_an_array_the_template_lacks_is_refused(tmp_path, states):
    """A checkpoint with an array the run's state has no place for (here a normaliser field) is refused,
    naming it, not dropped."""
    extra = serialization.to_state_dict(jax.device_get(states))
    extra["train"]["normalizer"]["surplus"] = np.ones(3, np.float32)
    checkpoint.save(str(tmp_path), 1, extra, {"format": checkpoint.FORMAT})
    with pytest.raises(checkpoint.CheckpointMismatchError, match="train/normalizer/surplus"):
        checkpoint.restore(str(tmp_path), states)
