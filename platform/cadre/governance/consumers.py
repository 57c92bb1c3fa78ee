"""Live confirmation queue over websockets (`ws/confirmations/`) for the console.

On connect the signed-in member gets the pending confirmations they may see; afterwards each
create / vote / decision the services push to the organization's group is forwarded if the
member may see it (a decider, the requester, or someone with confirmation.decide / audit.view).
"""

from __future__ import annotations

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from cadre.governance.confirmations import group_name, queue_item
from cadre.governance.models import Confirmation
from cadre.tenancy.middleware import SESSION_KEY, session_memberships
from cadre.tenancy.roles import permissions_for_roles


@database_sync_to_async
def _member_for(scope):
    user = scope.get("user")
    if user is None or not user.is_authenticated:
        return None
    session = scope.get("session")
    wanted = session.get(SESSION_KEY) if session is not None else None
    members = session_memberships(session, user)
    member = members.filter(organization_id=wanted).first() if wanted else None
    return member or members.first()


@database_sync_to_async
def _pending_queue(member, sees_all: bool) -> list[dict]:
    queryset = Confirmation.objects.filter(
        organization_id=member.organization_id, status=Confirmation.Status.PENDING
    )
    if not sees_all:
        queryset = queryset.filter(decider_ids__contains=[member.pk]) | queryset.filter(
            requester_id=member.pk
        )
    return [queue_item(c) for c in queryset.order_by("expires_at")[:200]]


class ConfirmationQueueConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self):
        member = await _member_for(self.scope)
        if member is None:
            await self.close(code=4401)
            return
        permissions = permissions_for_roles(member.roles)
        self.member_id = member.pk
        self.sees_all = "confirmation.decide" in permissions or "audit.view" in permissions
        self.group = group_name(member.organization_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self.send_json(
            {"type": "queue", "confirmations": await _pending_queue(member, self.sees_all)}
        )

    async def disconnect(self, code):
        group = getattr(self, "group", None)
        if group is not None:
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive_json(self, content, **kwargs):
        # Read-only stream: decisions go through the API (permission-checked services).
        await self.send_json({"type": "error", "message": "decide through the API"})

    async def confirmation_event(self, message):
        item = message["confirmation"]
        visible = (
            self.sees_all
            or self.member_id in item.get("deciders", [])
            or self.member_id == item.get("requester")
        )
        if visible:
            await self.send_json({"type": message["event"], "confirmation": item})
