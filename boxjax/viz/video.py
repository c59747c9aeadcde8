"""Frames to a video file through imageio (the `watch` extra): GIF through Pillow, MP4 through ffmpeg."""

from __future__ import annotations

import importlib.util
import math
import os
import warnings

import numpy as np

FORMATS = (".gif", ".mp4")
"""The file types `write_video` writes (by the path's extension)."""
GIF_MAX_FPS = 25.0
"""A GIF keeps every k-th frame so that it shows at most this many a second: a GIF's frame delay is a whole
number of centiseconds (a 40 Hz video's 25 ms would play at 20 ms, too fast), and the file stays small."""
INSTALL = "pip install -e '.[watch]' (make installs it)"
"""How to get the packages this module needs."""


def write_video(path: str, frames: np.ndarray, fps: float) -> str:
    """Write (T, H, W, 3) uint8 `frames` at `fps` frames per second to `path` (.gif or .mp4); returns the
    path. GIF needs imageio only; MP4 also imageio-ffmpeg (its own ffmpeg binary)."""
    ext = check_video(path)
    import imageio.v3 as iio

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    if ext == ".gif":
        stride = gif_stride(fps)
        delay_ms = 10.0 * round(100.0 * stride / fps)
        iio.imwrite(path, frames[::stride], extension=".gif", duration=delay_ms, loop=0)
    else:
        with warnings.catch_warnings():
            # JAX warns at any fork; this one is imageio-ffmpeg starting its ffmpeg (fork, then exec)
            warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
            iio.imwrite(path, frames, extension=".mp4", fps=fps, codec="libx264", quality=7)
    return path


def check_video(path: str) -> str:
    """The extension of a video path `write_video` can write here; `ValueError` for another file type,
    `ImportError` naming the extra when a package it needs is missing."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in FORMATS:
        raise ValueError(f"cannot write {path!r}: the video's name must end in {' or '.join(FORMATS)}")
    missing = [m for m in ("imageio", *(("imageio_ffmpeg",) if ext == ".mp4" else ())) if not _found(m)]
    if missing:
        raise ImportError(f"writing {ext} needs {' and '.join(missing)}, the watch extra: {INSTALL}")
    return ext


def gif_stride(fps: float) -> int:
    """Keep every k-th frame of an `fps` video in a GIF: the smallest k that shows at most `GIF_MAX_FPS`
    frames a second (its delay, k / fps, is then rounded to whole centiseconds: exact at 40 or 50 Hz)."""
    return max(1, math.ceil(fps / GIF_MAX_FPS - 1e-9))


def _found(module: str) -> bool:
    return importlib.util.find_spec(module) is not None
