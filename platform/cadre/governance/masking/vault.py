"""The pseudonym vault: placeholders like `<PHONE_1>`, consistent within one conversation.

`ConversationVault` keeps the mapping in `PseudonymMapping` rows (value encrypted at rest,
looked up by an HMAC of the normalized value) scoped to (organization, conversation key);
`EphemeralVault` keeps it in memory for previews and offline use. Numbering is per placeholder
label within a conversation and safe under concurrency: new placeholders are assigned under a
per-conversation transaction-scoped advisory lock (held until the caller's transaction ends),
and the unique constraints plus a re-read-and-retry loop remain as the safety net.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from typing import Protocol

from django.utils.translation import gettext

from cadre.errors import InvalidInput
from cadre.governance.masking.policy import PLACEHOLDER, normalize, placeholder_label

MAX_ATTEMPTS = 50
_LOCK_NAMESPACE = 0x5E0D  # first key of the advisory lock pair: "pseudonym vault"


class Vault(Protocol):
    def placeholders_for(self, items: Sequence[tuple[str, str]]) -> list[str]:
        """Placeholders for (entity_type, original value) pairs, creating numbers as needed."""

    def resolve(self, placeholders: Sequence[str]) -> dict[str, str]:
        """Originals of the given placeholders that this vault knows."""


def _restore(text: str, vault: Vault) -> str:
    found = {match.group(0) for match in PLACEHOLDER.finditer(text)}
    if not found:
        return text
    originals = vault.resolve(sorted(found))
    return PLACEHOLDER.sub(lambda match: originals.get(match.group(0), match.group(0)), text)


class EphemeralVault:
    """An in-memory mapping: nothing is stored; used by previews and benchmarks."""

    def __init__(self):
        self._by_key: dict[tuple[str, str], str] = {}
        self._values: dict[str, str] = {}
        self._counters: dict[str, int] = {}

    def placeholders_for(self, items: Sequence[tuple[str, str]]) -> list[str]:
        result = []
        for entity_type, value in items:
            key = (entity_type, normalize(entity_type, value))
            placeholder = self._by_key.get(key)
            if placeholder is None:
                label = placeholder_label(entity_type)
                self._counters[label] = self._counters.get(label, 0) + 1
                placeholder = f"<{label}_{self._counters[label]}>"
                self._by_key[key] = placeholder
                self._values[placeholder] = value
            result.append(placeholder)
        return result

    def resolve(self, placeholders: Sequence[str]) -> dict[str, str]:
        return {p: self._values[p] for p in placeholders if p in self._values}

    def reidentify(self, text: str) -> str:
        return _restore(text, self)


def value_hash(organization_id: int, entity_type: str, value: str) -> str:
    """HMAC-SHA256 (key: SECRET_KEY) of the normalized value: lookup without decrypting."""
    from django.conf import settings

    message = f"{organization_id}\x00{entity_type}\x00{normalize(entity_type, value)}"
    return hmac.new(settings.SECRET_KEY.encode(), message.encode(), hashlib.sha256).hexdigest()


class ConversationVault:
    """The stored mapping of one conversation of one organization."""

    def __init__(self, organization, conversation_key: str):
        if not conversation_key or len(conversation_key) > 200:
            raise InvalidInput(gettext("conversation_key must be 1-200 characters"))
        self.organization = organization
        self.conversation_key = conversation_key

    def _rows(self):
        # lazy: settings — the engine and its vaults run without Django (the masking benches).
        from cadre.governance.models import PseudonymMapping

        return PseudonymMapping.objects.filter(
            organization=self.organization, conversation_key=self.conversation_key
        )

    def placeholders_for(self, items: Sequence[tuple[str, str]]) -> list[str]:
        if not items:
            return []
        hashes = [value_hash(self.organization.pk, t, v) for t, v in items]
        known = dict(
            self._rows().filter(value_hash__in=set(hashes)).values_list("value_hash", "placeholder")
        )
        missing = [(t, v, h) for (t, v), h in zip(items, hashes, strict=True) if h not in known]
        if missing:
            from django.db import transaction

            with transaction.atomic():
                self._lock()
                for entity_type, value, digest in missing:
                    if digest not in known:
                        known[digest] = self._create(entity_type, value, digest)
        return [known[digest] for digest in hashes]

    def _lock(self) -> None:
        """Serialize new placeholders per conversation until the surrounding transaction ends
        (uncommitted rows are invisible to other workers, so the lock must outlive the insert).
        """
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
                [_LOCK_NAMESPACE, f"{self.organization.pk}:{self.conversation_key}"],
            )

    def _create(self, entity_type: str, value: str, digest: str) -> str:
        from django.db import IntegrityError, transaction
        from django.db.models import Max

        label = placeholder_label(entity_type)
        for _ in range(MAX_ATTEMPTS):
            existing = self._rows().filter(value_hash=digest).values_list("placeholder", flat=True)
            for placeholder in existing:
                return placeholder
            highest = self._rows().filter(label=label).aggregate(n=Max("number"))["n"] or 0
            number = highest + 1
            try:
                with transaction.atomic():  # a savepoint: a lost race leaves the caller's txn
                    self._rows().create(
                        organization=self.organization,
                        conversation_key=self.conversation_key,
                        label=label,
                        number=number,
                        placeholder=f"<{label}_{number}>",
                        entity_type=entity_type,
                        value_hash=digest,
                        value=value,
                    )
            except IntegrityError:
                continue  # another worker took this number or stored this value: look again
            return f"<{label}_{number}>"
        raise RuntimeError("could not assign a pseudonym placeholder (too much contention)")

    def resolve(self, placeholders: Sequence[str]) -> dict[str, str]:
        return dict(
            self._rows().filter(placeholder__in=placeholders).values_list("placeholder", "value")
        )

    def reidentify(self, text: str) -> str:
        return _restore(text, self)


def reidentify(text: str, *, organization, conversation_key: str) -> str:
    """Put the originals back for this conversation's placeholders; others stay as they are."""
    return _restore(text, ConversationVault(organization, conversation_key))
