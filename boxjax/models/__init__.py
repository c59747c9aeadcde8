"""What a trained policy is made of and how it is stored: the networks (`networks`) and checkpoints
(`checkpoint`). Below both `boxjax.envs` (the walking teacher loads one) and `boxjax.rl` (which trains
them)."""
