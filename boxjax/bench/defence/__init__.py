"""The defence of a block policy, measured (`boxjax eval`): every punch that arrives counted by outcome and
by its tags, falls and the other episode kinds' successes, on the CPU path or the JAX env (`rollout`);
shares with Wilson intervals (`tally`); tables, rows and charts (`report`)."""
