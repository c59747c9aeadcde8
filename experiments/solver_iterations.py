"""The constraint solver's iterations per physics step, a policy acting (`boxjax.bench.solver_iterations`)."""

from boxjax.bench import solver_iterations

if __name__ == "__main__":
    raise SystemExit(solver_iterations.main())
