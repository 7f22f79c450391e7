"""A verification receipt: what ``mibspec verify --receipt`` checked, byte for byte.

A receipt pins every file a verification read (each document, every artifact each
document declares, following referenced documents, and the model files recomputation
used) by SHA-256 and size, the spec's schema bundle, the tool and its environment, and
the verdict of every stage with the recomputed values. ``mibspec verify-receipt``
re-hashes the files to show that they are still the ones that were verified, without
verifying again.

Paths in ``files`` are relative to the folder holding the receipt, '/'-separated, and stay
inside it: no absolute path, no ``..``, no symbolic link out of it.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ._base import Closed
from .output import DocumentOutput

__all__ = ["Receipt", "ReceiptEnvironment", "ReceiptFile", "ReceiptOptions", "ReceiptSpec", "ReceiptTool"]

SHA256 = r"^[0-9a-f]{64}$"


class ReceiptTool(Closed):
    name: Literal["mibspec"]
    version: str = Field(min_length=1)


class ReceiptSpec(Closed):
    version: str = Field(pattern=r"^[0-9]+\.[0-9]+$", description="spec version (MAJOR.MINOR)")
    schema_bundle_sha256: str = Field(
        pattern=SHA256,
        description="SHA-256 over the spec's schema files, names and bytes in name order "
        "(`mibspec.schema_bundle_hash()`; what `mibspec cite` names)",
    )


class ReceiptEnvironment(Closed):
    python: str = Field(description="Python version, e.g. 3.11.7")
    implementation: str = Field(description="Python implementation, e.g. CPython")
    platform: str = Field(description="platform.platform()")
    packages: dict[str, str] = Field(
        description="versions of numpy, scipy, torch, transformers, safetensors, tokenizers and "
        "captum, for those the verification imported"
    )
    device: str | None = Field(
        default=None,
        description="where recomputation ran (`--device`, resolved): `cpu`, `cuda:N` or `mps`; "
        "absent when nothing was recomputed",
    )


class ReceiptOptions(Closed):
    recompute: bool
    profile: str | None = Field(description="the --profile override, null when none")
    select: list[str]
    ignore: list[str]
    error_on_warning: bool
    batch_size: Annotated[int, Field(ge=1)] | Literal["auto"] | None = Field(
        default=None,
        description="the --batch-size of recomputation (a positive integer or `auto`); absent "
        "when each report's own batch size was used",
    )


class ReceiptFile(Closed):
    path: str = Field(
        min_length=1,
        description="relative to the receipt's folder, '/'-separated, inside it (no '..', not absolute)",
    )
    role: Literal["document", "artifact", "model"] = Field(
        description="a verified document, an artifact a document declares, or a model file "
        "recomputation used (hashed as the bytes it used)"
    )
    sha256: str | None = Field(pattern=SHA256, description="null when the file could not be read")
    bytes: int | None = Field(ge=0, description="size in bytes; null when the file could not be read")
    document: str = Field(
        description="for a document, its path as in `documents`; for an artifact, the path of the "
        "document that declares it; for a model file, the path of the report recomputed with it"
    )
    artifact_id: str | None = Field(default=None, description="the artifact's id in that document")
    refused: str | None = Field(
        default=None,
        description="why the file was not hashed: the verification refused it unread (an artifact "
        "whose size differs from the declared one, a document over the size limit); `bytes` is "
        "then its size on disk. Absent when the file was hashed.",
    )


class Receipt(Closed):
    receipt_version: Literal["1.0"]
    tool: ReceiptTool
    spec: ReceiptSpec
    environment: ReceiptEnvironment
    options: ReceiptOptions
    valid: bool = Field(description="the verification's verdict (as in the JSON output)")
    files: list[ReceiptFile] = Field(description="every file read, each once, in the order first read")
    documents: list[DocumentOutput] = Field(
        description="each document's verdict, findings, stages and recomputed values, as in the "
        "JSON output of `mibspec verify`"
    )
