"""Stance solves on the seed's terms: cost per solve and the worlds sweep (`boxjax.bench.solve_report`)."""

from boxjax.bench import solve_report

if __name__ == "__main__":
    raise SystemExit(solve_report.main())
