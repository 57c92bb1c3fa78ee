"""Why a model call failed: the `reason` a ProviderError carries, which a caller may act on.

The transient ones are retried within the call's time budget (ProviderError.transient).
"""

from __future__ import annotations

UNREACHABLE = "unreachable"
TIMEOUT = "timeout"
UNAUTHORIZED = "unauthorized"
MODEL_NOT_FOUND = "model_not_found"
RATE_LIMITED = "rate_limited"
SERVER_ERROR = "server_error"
BAD_REQUEST = "bad_request"
# The answer was not what the API returns (an HTML page, plain text): not a model endpoint.
BAD_RESPONSE = "bad_response"
# The outbound guard refused the destination (cadre.outbound): never retried.
REFUSED = "refused"
TRANSIENT = frozenset({UNREACHABLE, TIMEOUT, RATE_LIMITED, SERVER_ERROR})
