"""The policy's action distributions (`boxjax.models.distributions`), hand-checked."""

import jax.numpy as jnp
import numpy as np
import pytest

from boxjax.models import distributions
from boxjax.rl.config import PPOConfig
from boxjax.rl.train_step import make_network


def test_the_clipped_normal_clips_its_actions_and_shares_one_log_std():
    d = distributions.named("clipped_normal")
    raw = jnp.asarray([[-1.5, 0.3], [2.0, -0.2]])
    np.testing.assert_array_equal(d.action(raw), np.asarray([[-1.0, 0.3], [1.0, -0.2]], np.float32))
    log_std = jnp.log(jnp.asarray([0.5, 2.0]))
    mean = jnp.zeros((2, 2))
    # log N(x; 0, s) = -x^2 / (2 s^2) - log s - log(2 pi) / 2, summed over the two dims
    want = [
        sum(
            -(x**2) / (2 * s**2) - np.log(s) - 0.5 * np.log(2 * np.pi)
            for x, s in zip(r, (0.5, 2.0), strict=True)
        )
        for r in raw.tolist()
    ]
    np.testing.assert_allclose(d.log_prob(mean, log_std, raw), want, rtol=1e-6)
    assert d.entropy_sample(mean, log_std, None) is None
    assert float(d.entropy(log_std)) == pytest.approx(
        float(np.sum(np.log([0.5, 2.0]) + 0.5 * (1 + np.log(2 * np.pi))))
    )
    # KL of two Gaussians with one std: 0.5 * sum(dmean^2 / s^2), averaged over the batch
    kl = d.kl(mean, log_std, mean + jnp.asarray([1.0, 2.0]), log_std)
    assert float(kl) == pytest.approx(0.5 * (1.0 / 0.25 + 4.0 / 4.0))


def test_the_tanh_normal_squashes_reads_its_scale_and_samples_its_entropy():
    d = distributions.named("tanh_normal")
    head = jnp.asarray([[0.5, -3.0, 0.0, 2.0]])  # mean (0.5, -3), scale pre-activations (0, 2)
    mean, log_std = d.mean_and_log_std(head, None)
    np.testing.assert_allclose(mean, [[0.5, -3.0]])
    np.testing.assert_allclose(
        np.exp(log_std), [[np.log(2.0) + 0.001, np.log1p(np.exp(2.0)) + 0.001]], rtol=1e-6
    )
    np.testing.assert_allclose(d.action(mean), np.tanh([[0.5, -3.0]]), rtol=1e-6)
    noise = jnp.asarray([[1.0, -1.0]])
    sample = d.entropy_sample(mean, log_std, noise)
    np.testing.assert_allclose(sample, mean + jnp.exp(log_std) * noise)
    assert float(d.entropy(log_std, sample)) == pytest.approx(
        float(distributions.squashed_entropy(log_std, sample))
    )
    with pytest.raises(ValueError, match="needs the batch's entropy_noise"):
        d.entropy_sample(mean, log_std, None)
    same = d.kl(mean, log_std, mean, log_std)
    assert float(same) == pytest.approx(0.0, abs=1e-7)
    wider = d.kl(
        mean, log_std, mean, log_std + jnp.log(2.0)
    )  # KL(N(0,s) || N(0,2s)) = log 2 + 1/8 - 1/2 a dim
    assert float(wider) == pytest.approx(2 * (np.log(2.0) + 0.125 - 0.5), rel=1e-5)


def test_the_network_reads_its_config_s_distribution_and_unknown_ones_are_named():
    assert make_network_for(False).dist is distributions.CLIPPED_NORMAL
    assert make_network_for(True).dist is distributions.TANH_NORMAL
    with pytest.raises(ValueError, match="unknown action distribution 'beta'"):
        distributions.named("beta")


def make_network_for(tanh: bool):
    class Env:
        observation_size, action_size = 3, 2

    return make_network(
        Env(),
        PPOConfig(
            num_envs=4,
            unroll_length=2,
            minibatch_size=8,
            action_distribution="tanh_normal" if tanh else "clipped_normal",
        ),
    )
