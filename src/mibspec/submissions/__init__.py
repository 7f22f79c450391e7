"""From what a MIB participant holds to a recomputed verdict: a submission folder, the model and
the dataset as pinned hub ids (read from the local Hugging Face cache when offline) or local
files, imported, pinned and verified in one call (:func:`verify_submission`)."""

from .path import (
    DEFAULT_SPLIT,
    LeaderboardRow,
    ReleasedFile,
    SubmissionOutcome,
    SubmissionRequest,
    hub_dataset_file,
    leaderboard_rows,
    verify_submission,
)

__all__ = [
    "DEFAULT_SPLIT",
    "LeaderboardRow",
    "ReleasedFile",
    "SubmissionOutcome",
    "SubmissionRequest",
    "hub_dataset_file",
    "leaderboard_rows",
    "verify_submission",
]
