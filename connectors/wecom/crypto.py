"""WeCom callback crypto: the shared WXBizMsgCrypt scheme (`connectors.base.callback_crypto`),
whose receive id is the corp id."""

from __future__ import annotations

from connectors.base.callback_crypto import (
    CallbackCryptoError as WeComCryptoError,
)
from connectors.base.callback_crypto import (
    aes_key,
    check_signature,
    decrypt,
    encrypt,
    signature,
)

__all__ = ["WeComCryptoError", "aes_key", "check_signature", "decrypt", "encrypt", "signature"]
