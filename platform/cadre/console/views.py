"""Console views (thin: they call services and selectors, then render)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import render


@login_required
def home(request, **kwargs):
    return render(request, "console/home.html", {})
