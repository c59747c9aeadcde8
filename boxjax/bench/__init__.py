"""The measurement tools: the speed benchmarks (`stance`, `block`, `cpu`, `factor`, the Brax comparison
`brax` and `profile_ppo`), the reports and tables read from their rows and from training runs
(`run_report`, `learn_report`, `solve_report`, `seed_table`, `trace_report`, `plot_block`), the constraint
solver's iterations a step (`solver_iterations`), and what every row shares (`rows`: timing, device,
versions, commit, prices). Each tool with a `main` runs as
`python -m boxjax.bench.NAME` and through its `experiments/*.py` wrapper."""
