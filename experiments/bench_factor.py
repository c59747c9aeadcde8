"""Mass-matrix factor+solve: MuJoCo Warp's stock LDLᵀ against our one launch (`boxjax.bench.factor`)."""

import sys

from boxjax.bench import factor

if __name__ == "__main__":
    sys.exit(factor.main())
