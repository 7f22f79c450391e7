"""What the validator and the reference implementation share, with no dependency beyond
the standard library (numpy only inside the sidecar functions that load data).

* :mod:`.findings`: :class:`Finding` and :class:`Severity`;
* :mod:`.comparisons`: claims against recomputed values under a tolerance;
* :mod:`.rounding`: declared rounding, the interval a printed number stands for;
* :mod:`.progress`: the one progress interface;
* :mod:`.pointers`: JSON pointers;
* :mod:`.files`: file hashes;
* :mod:`.sidecars`: reading safetensors and ``.npy`` sidecars;
* :mod:`.spec`: the spec version, the document kinds and the spec's files;
* :mod:`.profiles`: the profiles of the spec;
* :mod:`.conventions`: the conventions a report is checked under (its own, else its profile's);
* :mod:`.strict_json`: strict JSON and JSON Lines parsing under the resource limits;
* :mod:`.tracks`: one descriptor per report track;
* :mod:`.outputs`: writing outputs atomically, never over an input;
* :mod:`.folders`: the one way importers and exporters read a folder and write one (safe names,
  no link out, every file planned before the first is written);
* :mod:`.integers`: the one parser of integers written as text;
* :mod:`.environment`: the numeric environment variables, checked at start-up;
* :mod:`.display`: showing untrusted text without control characters.

Dependency direction: ``core`` ← ``validator`` and ``core`` ← ``reference_impl``; this
package imports nothing else of mibspec (``tests/test_architecture.py`` checks it).
"""

from .comparisons import Comparison, Recomputation, recompute_tolerance, tolerance, within
from .conventions import Convention, convention, conventions
from .files import sha256_file
from .findings import Finding, Severity
from .pointers import escape_pointer_token, join_pointer
from .profiles import LoadedProfile, known_profiles, load_profile
from .progress import NULL_PROGRESS, Progress, start_task
from .sidecars import SidecarError, TensorInfo, load_tensor, tensor_infos
from .spec import KINDS, KNOWN_SPEC_VERSIONS, SPEC_VERSION, load_spec_json, spec_dir

__all__ = [
    "KINDS",
    "KNOWN_SPEC_VERSIONS",
    "NULL_PROGRESS",
    "SPEC_VERSION",
    "Comparison",
    "Convention",
    "Finding",
    "LoadedProfile",
    "Progress",
    "Recomputation",
    "Severity",
    "SidecarError",
    "TensorInfo",
    "convention",
    "conventions",
    "escape_pointer_token",
    "join_pointer",
    "known_profiles",
    "load_profile",
    "load_spec_json",
    "load_tensor",
    "recompute_tolerance",
    "sha256_file",
    "spec_dir",
    "start_task",
    "tensor_infos",
    "tolerance",
    "within",
]
