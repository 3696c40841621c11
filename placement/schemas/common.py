"""Patterns shared by the request schemas.

Resource class and trait names are upper-case letters, digits and ``_``;
user-defined ones carry the ``CUSTOM_`` prefix. Upstream validates names
with exactly these patterns, so the 400 messages match.
"""

NAME_CHARS = "[A-Z0-9_]"
RC_PATTERN = f"^{NAME_CHARS}+$"
CUSTOM_RC_PATTERN = f"^CUSTOM_{NAME_CHARS}+$"
CUSTOM_TRAIT_PATTERN = CUSTOM_RC_PATTERN

# The largest integer upstream accepts in an inventory (a signed 32-bit int)
# and the largest allocation ratio (a single-precision float column upstream).
MAX_INT = 0x7FFFFFFF
MAX_FLOAT = 3.40282e38

UUID_STRING = {"type": "string", "format": "uuid"}
