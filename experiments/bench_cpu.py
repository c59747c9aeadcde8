"""CPU path benchmark: env step against bare MuJoCo, training per core count (`boxjax.bench.cpu`)."""

from boxjax.bench import cpu

if __name__ == "__main__":
    raise SystemExit(cpu.main())
