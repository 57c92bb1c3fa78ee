"""The identity provider's user-admin API (one route, a bearer token): the tests set a user's
claims the way an administrator would in the IdP's console."""

from __future__ import annotations

import json
import secrets

from django.conf import settings
from django.http import HttpResponseForbidden, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from tests.tenancy.dot_idp.users import user_put


@csrf_exempt
@require_POST
def users(request):
    supplied = request.headers.get("Authorization", "").removeprefix("Bearer ")
    if not secrets.compare_digest(supplied, settings.ADMIN_TOKEN):
        return HttpResponseForbidden()
    user = user_put(**json.loads(request.body))
    return JsonResponse({"id": user.pk, "username": user.username})
