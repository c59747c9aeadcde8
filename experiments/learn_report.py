"""Block learning check at a glance, per window of iterations (`boxjax.bench.learn_report`)."""

from boxjax.bench import learn_report

if __name__ == "__main__":
    raise SystemExit(learn_report.main())
