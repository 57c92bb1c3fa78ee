"""Page-number pagination with a bounded, client-chosen page size."""

from __future__ import annotations

from rest_framework.pagination import PageNumberPagination


class PagePagination(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = 500
