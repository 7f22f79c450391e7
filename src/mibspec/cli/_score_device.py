"""``--device`` and ``--batch-size`` of the ``score`` commands: checked before anything runs;
a malformed value or an absent device is a usage error. ``--device`` is spelled and helped as
``mibspec verify`` declares it (:class:`~mibspec.verification.request.VerificationRequest`)."""

from __future__ import annotations

from typing import Annotated

from mibspec.cli._options import Option
from mibspec.cli._request import option_of
from mibspec.cli._support import usage_error
from mibspec.core.strict_json import DEFAULT_LIMITS

__all__ = ["MAX_MODEL_BYTES", "DeviceOption", "MaxModelBytesOption", "batch_size_or_exit", "device_or_exit"]

#: ``--device`` of ``verify-submission`` and of every ``score`` command (checked by the command).
DeviceOption = Annotated[str, option_of("device")]
#: The default of ``--max-model-bytes``: verify's (``Limits.max_model_bytes``).
MAX_MODEL_BYTES = DEFAULT_LIMITS.max_model_bytes
#: ``--max-model-bytes`` of the ``score`` commands that load a model folder: the bound
#: ``verify`` applies to a recomputation, and so the size a report written here can be
#: verified under with the same option.
MaxModelBytesOption = Annotated[
    int,
    Option(
        "--max-model-bytes",
        help="Largest model the command loads, in bytes: its parameters in the dtype it computes in "
        "(verify the report with the same --max-model-bytes).",
        min=1,
    ),
]


def device_or_exit(device: str) -> str:
    """The device a producer runs on, resolved (``mibspec.reference_impl.devices``)."""
    from mibspec.reference_impl.devices import resolve_device

    try:
        return resolve_device(device)
    except ValueError as exc:
        usage_error(f"--{exc}")


def batch_size_or_exit(value: str) -> int | str:
    """A positive number of examples per pass, or ``auto``."""
    from mibspec.reference_impl.devices import parse_batch_size

    try:
        return parse_batch_size(value)
    except ValueError as exc:
        usage_error(f"--{exc}".replace("--batch_size:", "--batch-size:", 1))
