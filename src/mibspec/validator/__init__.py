"""The mibspec validator: strict parsing, schema conformance, rules, recomputation.

The sidecar readers, profiles and :class:`Finding` live in :mod:`mibspec.core` (shared
with the reference implementation) and are re-exported here."""

from mibspec.core.findings import Finding, Severity
from mibspec.core.profiles import LoadedProfile, known_profiles, load_profile
from mibspec.core.sidecars import (
    SidecarError,
    read_npy_header,
    read_safetensors_header,
    safetensors_bytes,
    write_safetensors,
)
from mibspec.core.strict_json import DEFAULT_LIMITS, Limits, load_json_file, parse_json_bytes

from ._catalogue import Catalogue, InternalError, RuleInfo, catalogue, make_finding, parse_findings
from ._context import (
    RECOMPUTE_NOT_REQUESTED,
    DocumentResult,
    RuleContext,
    Stage,
    StageStatus,
    VerificationResult,
    VerifyOptions,
)
from ._pipeline import printable_path, record_internal_error, verify_paths

__all__ = [
    "DEFAULT_LIMITS",
    "RECOMPUTE_NOT_REQUESTED",
    "Catalogue",
    "DocumentResult",
    "Finding",
    "InternalError",
    "Limits",
    "LoadedProfile",
    "RuleContext",
    "RuleInfo",
    "Severity",
    "SidecarError",
    "Stage",
    "StageStatus",
    "VerificationResult",
    "VerifyOptions",
    "catalogue",
    "known_profiles",
    "load_json_file",
    "load_profile",
    "make_finding",
    "parse_findings",
    "parse_json_bytes",
    "printable_path",
    "read_npy_header",
    "read_safetensors_header",
    "record_internal_error",
    "safetensors_bytes",
    "verify_paths",
    "write_safetensors",
]
