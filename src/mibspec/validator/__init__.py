"""The mibspec validator: strict parsing, schema conformance, rules, recomputation."""

from ._catalogue import Catalogue, RuleInfo, catalogue
from ._engine import (
    DocumentResult,
    InternalError,
    RuleContext,
    Stage,
    StageStatus,
    VerificationResult,
    VerifyOptions,
    verify_paths,
)
from ._findings import Finding, Severity
from ._parse import DEFAULT_LIMITS, Limits, load_json_file, parse_json_bytes
from ._profiles import Profile, known_profiles, load_profile
from ._sidecars import (
    SidecarError,
    read_npy_header,
    read_safetensors_header,
    safetensors_bytes,
    write_safetensors,
)

__all__ = [
    "DEFAULT_LIMITS",
    "Catalogue",
    "DocumentResult",
    "Finding",
    "InternalError",
    "Limits",
    "Profile",
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
    "parse_json_bytes",
    "read_npy_header",
    "read_safetensors_header",
    "safetensors_bytes",
    "verify_paths",
    "write_safetensors",
]
