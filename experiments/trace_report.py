"""A summary of a `jax.profiler` trace, per thread and per event name (`boxjax.bench.trace_report`)."""

from boxjax.bench import trace_report

if __name__ == "__main__":
    raise SystemExit(trace_report.main())
