"""What counts as a secret in a plan, and what stands in its place wherever it would be shown.

Low in the package (the plan, the backends and the engine all mask secrets), so the backends
need not import the plan to know the mask.
"""

from __future__ import annotations

import re

REDACTED = "[redacted]"
# A custom header whose name says it carries a credential (Azure's `api-key`, `x-api-key`, a
# session cookie): its value is kept out of the work dir's plan.toml and masked in failure messages.
SECRET_HEADER_RE = re.compile(r"key|token|secret|auth|cookie|password", re.IGNORECASE)
