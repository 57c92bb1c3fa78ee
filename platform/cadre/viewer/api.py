"""The Memory Viewer endpoints under /api/v1/: timeline, heatmap, quality and the vector map
under `memory-viewer/`, over the memories the caller may read, and a memory's provenance trail
at `memories/{id}/trail/`."""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.decorators import action
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from cadre.memory.api.viewsets import MemoryScopedViewSet
from cadre.memory.models import Kind, Memory
from cadre.viewer import cache, heatmap, quality, reach, timeline, vector_map
from cadre.viewer import serializers as types
from cadre.viewer.trail import memory_trail

LISTS = ("scope", "member", "agent", "department", "kind")
FILTERS = [
    OpenApiParameter("scope", OpenApiTypes.STR, many=True, description="Scope key(s)"),
    OpenApiParameter("member", OpenApiTypes.INT, many=True, description="A member's memory"),
    OpenApiParameter("agent", OpenApiTypes.INT, many=True, description="An agent's memory"),
    OpenApiParameter("department", OpenApiTypes.INT, many=True, description="A department's"),
    OpenApiParameter("kind", OpenApiTypes.STR, many=True, enum=Kind.values),
]


def _query(request, serializer_class) -> dict:
    params = request.query_params
    serializer = serializer_class(
        data={key: params.getlist(key) if key in LISTS else params.get(key) for key in params}
    )
    serializer.is_valid(raise_exception=True)
    data = dict(serializer.validated_data)
    data["scope_keys"] = reach.requested_scope_keys(
        scopes=data.pop("scope", None),
        members=data.pop("member", None),
        agents=data.pop("agent", None),
        departments=data.pop("department", None),
    )
    data["kinds"] = data.pop("kind", None)
    return data


class MemoryViewerViewSet(MemoryScopedViewSet):
    model = Memory
    pagination_class = None

    def get_queryset(self):
        return Memory.objects.none()  # every action reads through the viewer's selectors

    @extend_schema(
        parameters=[
            *FILTERS,
            OpenApiParameter(
                "since",
                OpenApiTypes.DATETIME,
                description="Default: fitted to the data (from just before the oldest memory; "
                "at least 15 minutes, at most a year; 30 days when there is none)",
            ),
            OpenApiParameter("until", OpenApiTypes.DATETIME, description="Default: now"),
            OpenApiParameter("bucket", OpenApiTypes.STR, enum=list(timeline.BUCKETS)),
            OpenApiParameter("as_of", OpenApiTypes.DATETIME, description="The set at a moment"),
        ],
        responses=types.TimelineSerializer,
        description="Memories added per bucket by kind, events (added, updated, corrected, "
        "superseded, merged, deleted, expired) per bucket, the newest points with their "
        "validity spans, and with `as_of` how many memories were valid then.",
    )
    @action(detail=False, methods=["get"])
    def timeline(self, request):
        data = _query(request, types.TimelineQuerySerializer)
        body = cache.cached(
            self.actor,
            "timeline",
            data,
            lambda: types.TimelineSerializer(timeline.memory_timeline(self.actor, **data)).data,
        )
        return Response(body)

    @extend_schema(
        parameters=[
            *FILTERS,
            OpenApiParameter("days", OpenApiTypes.INT, description="Window (default 30)"),
            OpenApiParameter("unused_days", OpenApiTypes.INT, description="Default 30"),
        ],
        responses=types.HeatmapSerializer,
        description="How often memories were retrieved and sent to model calls per day (from "
        "the context records), by kind, scope and memory; the hottest and coldest; those "
        "not sent to any model call for `unused_days`.",
    )
    @action(detail=False, methods=["get"])
    def heatmap(self, request):
        data = _query(request, types.HeatmapQuerySerializer)
        body = cache.cached(
            self.actor,
            "heatmap",
            data,
            lambda: types.HeatmapSerializer(heatmap.memory_heatmap(self.actor, **data)).data,
        )
        return Response(body)

    @extend_schema(
        parameters=[*FILTERS, OpenApiParameter("days", OpenApiTypes.INT)],
        responses=types.QualitySerializer,
        description="Each quality figure with its definition, its value over the window and "
        "its daily series; a figure with no recorded signal has `signal: false` and no value.",
    )
    @action(detail=False, methods=["get"])
    def quality(self, request):
        data = _query(request, types.WindowQuerySerializer)
        body = cache.cached(
            self.actor,
            "quality",
            data,
            lambda: types.QualitySerializer(quality.memory_quality(self.actor, **data)).data,
        )
        return Response(body)

    @extend_schema(
        parameters=[
            *FILTERS,
            OpenApiParameter("model", OpenApiTypes.STR, description="Default: the active model"),
            OpenApiParameter("method", OpenApiTypes.STR, enum=list(vector_map.METHODS)),
            OpenApiParameter("sample", OpenApiTypes.INT, description="Most points projected"),
            OpenApiParameter("clusters", OpenApiTypes.INT),
            OpenApiParameter(
                "display", OpenApiTypes.INT, description="Most points served (default 20000)"
            ),
            OpenApiParameter("q", OpenApiTypes.STR, description="Place this query on the map"),
            OpenApiParameter("refresh", OpenApiTypes.BOOL, description="Compute anew"),
        ],
        responses={200: types.MapSerializer, 202: types.MapSerializer},
        description="The newest computed 2-D map of the selection's embeddings (200), or 202 "
        "while the first one is computed in the background (poll again). Beyond `sample` "
        "memories the map is of a random sample; `sample_size` and `total` say so. Beyond "
        "`display` points a fixed random subset is served; `shown` says how many.",
    )
    @action(detail=False, methods=["get"], url_path="map")
    def vector_map(self, request):
        data = _query(request, types.MapQuerySerializer)
        query = data.pop("q", None)
        display = data.pop("display")
        ready, computing = vector_map.memory_map_request(
            actor=self.actor,
            scope_keys=data.pop("scope_keys"),
            kinds=data.pop("kinds"),
            model_id=data.pop("model", None),
            **data,
        )
        # The body is built as plain data: the serializer above is the schema, and 20k points
        # through DRF fields would cost the cached map its speed.
        shown = ready

        def body():  # all but the points
            return {
                "status": "ready" if shown else ("computing" if computing else "empty"),
                "map_id": shown.pk if shown else None,
                "computing_id": computing.pk if computing else None,
                "scope_keys": (shown or computing).scope_keys if (shown or computing) else [],
                "model": (shown or computing).model_id if (shown or computing) else "",
                "params": (shown or computing).params if (shown or computing) else {},
                "computed_at": shown.computed_at if shown else None,
                "compute_ms": shown.compute_ms if shown else 0,
                "total": shown.total if shown else 0,
                "sample_size": shown.sample_size if shown else 0,
                "shown": min(shown.sample_size, display) if shown else 0,
                "association_strength": shown.association_strength if shown else None,
                "explained_variance": (
                    shown.projection.get("explained_variance", []) if shown else []
                ),
                "clusters": shown.clusters if shown else [],
                "query": (
                    vector_map.map_query(self.actor, shown, query) if shown and query else None
                ),
            }

        def rendered_body() -> bytes:
            # The points are written as JSON by the database (5 MB at 20k points) and set
            # into the rest of the body as they are.
            rest = JSONRenderer().render(body())
            points = vector_map.map_points_json(self.actor, shown, display).encode()
            return rest[:-1] + b',"points":' + points + b"}"

        if shown and not query:
            # A ready map's body is the same for every request until a write: kept rendered,
            # as the figures are (see viewer/cache.py).
            rendered = cache.cached(
                self.actor,
                "map",
                {
                    "map": shown.pk,
                    "computing": computing.pk if computing else None,
                    "display": display,
                },
                rendered_body,
            )
            return HttpResponse(rendered, content_type="application/json")
        points = vector_map.map_points(self.actor, shown, display) if shown else []
        return Response({**body(), "points": points}, status=200 if shown or not computing else 202)


class MemoryTrailViewSet(MemoryScopedViewSet):
    """`memories/{id}/trail/`, beside the memory API's own routes under `memories/`."""

    model = Memory
    pagination_class = None

    def get_queryset(self):
        return Memory.objects.none()  # the trail reads through the memory selectors

    @extend_schema(
        responses=types.TrailSerializer,
        description="The memory's provenance trail: its origin (session, message, author), "
        "every version and merge with the memories merged in, every recorded model call "
        "that received, withheld or dropped it (`withheld`: policy or the budget kept it "
        "out; `masked`: sent after the policy chain masked it, with what), and the skills "
        "distilled from it.",
    )
    @action(detail=True, methods=["get"])
    def trail(self, request, pk=None):
        return Response(types.TrailSerializer(memory_trail(self.actor, pk)).data)
