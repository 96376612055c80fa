"""`proctor view`: a local web app over a folder of runs — runs list, item browser paged from SQLite,
item detail with judgments and model calls, conversations, human labels (append-only, `labels.sqlite`
in the run folder), meta-evaluation of every automatic judge against them, and the comparison of two runs.
"""

from proctor.viewer.app import create_app
from proctor.viewer.server import serve

__all__ = ["create_app", "serve"]
