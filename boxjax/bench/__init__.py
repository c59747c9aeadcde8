"""The measurement tools: the speed benchmarks (`stance`, `block` with its timing `block_timing`, `cpu`,
`factor`, the Brax comparison `brax` and `profile_ppo`), the reports and tables read from their rows and from
training runs (`run_report`, `learn_report`, `solve_report`, `seed_table`, `trace_report`, `plot_block`), the
constraint solver's iterations a step (`solver_iterations`), and what every tool shares (`rows`: its argument
parser and common flags, the row writer, timing, device, versions, commit, prices). Each tool with a `main`
runs as `boxjax bench NAME`, `python -m boxjax.bench.NAME` and through its `experiments/*.py` wrapper."""
