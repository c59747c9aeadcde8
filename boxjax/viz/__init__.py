"""Watching a policy: what to keep of each traced step (`record`), the frames MuJoCo's renderer draws of
them (`render`, with the block task's `overlays`) and the video file they make (`video`).

Choose the OpenGL backend before importing this package (`boxjax.platform.select_gl`): MuJoCo binds it on
import.
"""

from boxjax.viz.overlays import BlockMarks, block_marks
from boxjax.viz.record import block_record, block_recorder, pose_record
from boxjax.viz.render import View, render_episode
from boxjax.viz.video import check_video, write_video

__all__ = [
    "BlockMarks",
    "View",
    "block_marks",
    "block_record",
    "block_recorder",
    "check_video",
    "pose_record",
    "render_episode",
    "write_video",
]
