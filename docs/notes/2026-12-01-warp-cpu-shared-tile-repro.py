"""Warp 1.18 CPU, `enable_cpu_blocks`: a shared tile read after a barrier returns 0 for some lanes.

One block of 64 lanes (fibers), four shared tiles (1662, 89, 89, 152 floats): lanes write A, B, C, barrier, write S
from A and B, barrier, read S. Lane 63 reads S[88] and S[24] (written by lane 24 before the barrier) as 0.
With the C tile removed, or C allocated but never written, or a second barrier, it prints True; with 32
lanes lane 31 fails the same way. Seen 2026-12-01 on the x86-64 dev machine while
trying the shared-memory factor kernel (2026-12-01-shared-memory-factor.patch), which fails the fibers64 test the
same way. Run: `.venv/bin/python docs/notes/2026-12-01-warp-cpu-shared-tile-repro.py` (expect "False [ 63 127]").
"""

import warp as wp
import numpy as np
wp.config.quiet = True
wp.config.enable_cpu_blocks = True

@wp.func_native(snippet="WP_TILE_SYNC();")
def _sync(): ...

@wp.kernel(module="unique", enable_backward=False)
def k(out: wp.array2d[float]):
    w, t = wp.tid()
    bd = wp.block_dim()
    A = wp.tile_empty(shape=1662, dtype=float, storage="shared")
    B = wp.tile_empty(shape=89, dtype=float, storage="shared")
    C = wp.tile_empty(shape=89, dtype=float, storage="shared")
    S = wp.tile_empty(shape=152, dtype=float, storage="shared")
    for e in range(t, 1662, bd):
        A[e] = float(e)
    for e in range(t, 89, bd):
        B[e] = float(e)
        C[e] = float(e)
    _sync()
    for e in range(t, 152, bd):
        S[e] = A[e] + B[e % 89]
    _sync()
    for e in range(t, 152, bd):
        out[w, e] = S[151 - e]

out = wp.zeros((1, 152), dtype=float, device="cpu")
wp.launch(k, dim=(1, 64), outputs=[out], block_dim=64, device="cpu")
o = out.numpy()
exp = np.array([(151 - e) + ((151 - e) % 89) for e in range(152)], float)
print(o[0][[62,63,64,126,127,128]], exp[[62,63,64,126,127,128]]); print(np.array_equal(o[0], exp), np.flatnonzero(o[0] != exp)[:20])
