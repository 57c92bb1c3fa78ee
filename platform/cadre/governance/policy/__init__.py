"""The policy chain (the gateway's security plugins): interface, registry and evaluation.

Other apps call `evaluate(organization=..., stage=..., payload=..., ...)`; new plugins
subclass `Plugin` and `register()` themselves (see base.py and docs/governance.md).
"""

from __future__ import annotations

from cadre.governance.policy.base import (
    ACTIONS,
    ALLOW,
    DENY,
    MODIFY,
    REQUIRE_CONFIRMATION,
    STAGES,
    Decision,
    Plugin,
    PolicyContext,
    all_plugins,
    get,
    register,
    unregister,
)
from cadre.governance.policy.chain import (
    ChainResult,
    RateLimited,
    evaluate,
    policy_check_input,
    policy_check_run,
    resolve_chain,
    stage_handled,
)

__all__ = [
    "ACTIONS",
    "ALLOW",
    "DENY",
    "MODIFY",
    "REQUIRE_CONFIRMATION",
    "STAGES",
    "ChainResult",
    "Decision",
    "Plugin",
    "PolicyContext",
    "RateLimited",
    "all_plugins",
    "evaluate",
    "get",
    "policy_check_input",
    "policy_check_run",
    "register",
    "resolve_chain",
    "stage_handled",
    "unregister",
]
