"""PPO for boxjax environments: `from boxjax.rl import ppo`."""
