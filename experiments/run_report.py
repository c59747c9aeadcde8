"""Summarise training runs from their metrics, or write a solved run's rows (`boxjax.bench.run_report`)."""

from boxjax.bench import run_report

if __name__ == "__main__":
    raise SystemExit(run_report.main())
