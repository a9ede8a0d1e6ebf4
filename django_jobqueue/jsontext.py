"""JSON text as every stored value is written: compact, no NaN or infinity, ASCII.

``json.dumps(value, allow_nan=False, separators=(",", ":"))`` made a new encoder per
value; a bulk enqueue encodes one payload per job, and that was a third of the cost
of encoding an empty one. Here the encoder is made once, and so is its C half (when
the interpreter has one), without the circular-reference check, whose marks would be
shared between threads: a circle then ends in a RecursionError, and the value is
encoded again by the checking encoder, which raises what ``json.dumps`` raises.
"""

from __future__ import annotations

import json
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any

_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"))
_checked = _ENCODER.encode
_fast = (
    None
    if c_make_encoder is None
    else c_make_encoder(
        None, _ENCODER.default, encode_basestring_ascii, None, ":", ",", False, False, False
    )
)


def encode(value: Any) -> str:
    """``json.dumps(value, allow_nan=False, separators=(",", ":"))``, and its errors."""
    if _fast is None:
        return _checked(value)
    try:
        return "".join(_fast(value, 0))
    except RecursionError:
        return _checked(value)


__all__ = ["encode"]
