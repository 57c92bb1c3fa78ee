"""Request and response types of the Memory Viewer endpoints (timeline, heatmap, quality,
map, trail) for validation and the OpenAPI schema."""

from __future__ import annotations

from datetime import UTC, datetime

from django.conf import settings
from django.utils import timezone
from rest_framework import serializers

from cadre.memory.api.serializers import MemoryVersionSerializer, ScopeListField
from cadre.memory.models import Kind
from cadre.viewer import timeline, vector_map


class ViewerQuerySerializer(serializers.Serializer):
    scope = ScopeListField(required=False)
    member = serializers.ListField(child=serializers.IntegerField(min_value=1), required=False)
    agent = serializers.ListField(child=serializers.IntegerField(min_value=1), required=False)
    department = serializers.ListField(child=serializers.IntegerField(min_value=1), required=False)
    kind = serializers.ListField(
        child=serializers.ChoiceField(choices=Kind.choices), required=False
    )


class TimelineQuerySerializer(ViewerQuerySerializer):
    since = serializers.DateTimeField(required=False)
    until = serializers.DateTimeField(required=False)
    bucket = serializers.ChoiceField(choices=timeline.BUCKETS, required=False)
    as_of = serializers.DateTimeField(required=False)


class WindowQuerySerializer(ViewerQuerySerializer):
    days = serializers.IntegerField(min_value=1, max_value=365, default=30)


class HeatmapQuerySerializer(WindowQuerySerializer):
    unused_days = serializers.IntegerField(min_value=1, max_value=3650, default=30)


class MapQuerySerializer(ViewerQuerySerializer):
    model = serializers.CharField(required=False, max_length=128)
    method = serializers.ChoiceField(choices=vector_map.METHODS, default="pca")
    sample = serializers.IntegerField(
        min_value=1, max_value=vector_map.MAX_SAMPLE, default=vector_map.DEFAULT_SAMPLE
    )
    clusters = serializers.IntegerField(
        min_value=1, max_value=vector_map.MAX_CLUSTERS, required=False
    )
    display = serializers.IntegerField(
        min_value=1, max_value=vector_map.MAX_SAMPLE, default=vector_map.DEFAULT_DISPLAY
    )
    q = serializers.CharField(required=False, max_length=500)
    refresh = serializers.BooleanField(default=False)


# --- responses -----------------------------------------------------------------------------


def _iso_datetime(value: datetime, zone) -> str:
    text = value.astimezone(zone).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


_PLAIN = {
    serializers.IntegerField: int,
    serializers.FloatField: float,
    serializers.CharField: str,
    serializers.BooleanField: bool,
}


class RowSerializer(serializers.Serializer):
    """Flat rows of plain values (dicts), written without DRF's per-field machinery — points,
    cells and series run to thousands a response — with the declared fields' output: ints,
    floats, strings, ISO 8601 dates and date-times in the current time zone (`Z` for UTC), an
    optional field left out when the row has no such key. Other field types go through the
    field."""

    def _plan(self) -> list[tuple[str, object, bool]]:
        plan = type(self).__dict__.get("_row_plan")  # each class its own fields
        if plan is None:
            plan = []
            for name, field in self.fields.items():
                kind = type(field)
                if kind in (serializers.DateTimeField, serializers.DateField):
                    convert = kind
                else:
                    convert = _PLAIN.get(kind, field)
                plan.append((name, convert, field.required))
            type(self)._row_plan = plan
        return plan

    def to_representation(self, row) -> dict:
        zone = timezone.get_current_timezone() if settings.USE_TZ else UTC
        result = {}
        for name, convert, required in self._plan():
            if name not in row:
                if not required:
                    continue
                raise KeyError(name)
            value = row[name]
            if value is None:
                result[name] = None
            elif convert is serializers.DateTimeField:
                result[name] = _iso_datetime(value, zone)
            elif convert is serializers.DateField:
                result[name] = value.isoformat()
            elif isinstance(convert, serializers.Field):
                result[name] = convert.to_representation(value)
            else:
                result[name] = convert(value)
        return result


class KindCountSerializer(RowSerializer):
    t = serializers.DateTimeField()
    kind = serializers.CharField()
    count = serializers.IntegerField()


class EventCountSerializer(RowSerializer):
    t = serializers.DateTimeField()
    event = serializers.ChoiceField(choices=timeline.EVENTS)
    count = serializers.IntegerField()


class TimelinePointSerializer(RowSerializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    status = serializers.CharField()
    scope_key = serializers.CharField()
    created_at = serializers.DateTimeField()
    valid_from = serializers.DateTimeField()
    valid_to = serializers.DateTimeField(allow_null=True)
    preview = serializers.CharField()


class AsOfSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    count = serializers.IntegerField()
    by_kind = serializers.DictField(child=serializers.IntegerField())
    memory_ids = serializers.ListField(
        child=serializers.IntegerField(),
        help_text="The memories valid then, newest first (at most 2000; deleted ones left out)",
    )


class TimelineSerializer(serializers.Serializer):
    since = serializers.DateTimeField()
    until = serializers.DateTimeField()
    bucket = serializers.CharField()
    by_kind = KindCountSerializer(many=True)
    by_event = EventCountSerializer(many=True)
    points = TimelinePointSerializer(many=True)
    points_total = serializers.IntegerField()
    as_of = AsOfSerializer(allow_null=True)


class UsageSerializer(RowSerializer):
    day = serializers.DateField()
    retrieved = serializers.IntegerField()
    sent = serializers.IntegerField()


class KindUsageSerializer(UsageSerializer):
    kind = serializers.CharField()


class ScopeUsageSerializer(UsageSerializer):
    scope_key = serializers.CharField()
    label = serializers.CharField()


class MemoryUsageDaySerializer(UsageSerializer):
    memory_id = serializers.IntegerField()


class MemoryUsageSerializer(RowSerializer):
    memory_id = serializers.IntegerField()
    id = serializers.IntegerField()
    kind = serializers.CharField(required=False)
    scope_key = serializers.CharField(required=False)
    scope_label = serializers.CharField(required=False, help_text="The scope's readable name")
    preview = serializers.CharField(required=False)
    retrieved = serializers.IntegerField()
    sent = serializers.IntegerField()
    last_used = serializers.DateTimeField()


class MemoryBriefSerializer(RowSerializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    scope_key = serializers.CharField()
    scope_label = serializers.CharField(help_text="The scope's readable name")
    preview = serializers.CharField()


class UnusedSerializer(serializers.Serializer):
    days = serializers.IntegerField()
    count = serializers.IntegerField()
    memories = MemoryBriefSerializer(many=True)


class HeatmapSerializer(serializers.Serializer):
    days = serializers.ListField(child=serializers.DateField())
    by_kind = KindUsageSerializer(many=True)
    by_scope = ScopeUsageSerializer(
        many=True, help_text="Per day, for the 20 scopes with the most sends in the window"
    )
    scopes_total = serializers.IntegerField(help_text="Scopes whose memories were used")
    by_memory = MemoryUsageDaySerializer(many=True)
    hottest = MemoryUsageSerializer(many=True)
    coldest = MemoryUsageSerializer(many=True)
    unused = UnusedSerializer()


class SeriesPointSerializer(RowSerializer):
    day = serializers.DateField()
    value = serializers.FloatField(allow_null=True)
    numerator = serializers.IntegerField(required=False)
    denominator = serializers.IntegerField(required=False)


class FigureSerializer(serializers.Serializer):
    key = serializers.CharField()
    name = serializers.CharField()
    definition = serializers.CharField()
    unit = serializers.ChoiceField(choices=["ratio", "count", "cosine", "currency"])
    signal = serializers.BooleanField(help_text="False: nothing records this; no value shown")
    value = serializers.FloatField(allow_null=True)
    note = serializers.CharField(allow_blank=True)
    numerator = serializers.IntegerField(required=False)
    denominator = serializers.IntegerField(required=False)
    series = SeriesPointSerializer(many=True)
    versions = serializers.ListField(child=serializers.DictField(), required=False)


class QualitySerializer(serializers.Serializer):
    since = serializers.DateTimeField()
    days = serializers.IntegerField()
    figures = FigureSerializer(many=True)


class MapPointSerializer(RowSerializer):
    id = serializers.IntegerField()
    x = serializers.FloatField()
    y = serializers.FloatField()
    cluster = serializers.IntegerField()
    label = serializers.CharField()
    kind = serializers.CharField()
    scope_key = serializers.CharField()
    created_at = serializers.DateTimeField()
    preview = serializers.CharField()


class MapClusterSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    label = serializers.CharField()
    terms = serializers.ListField(child=serializers.CharField())
    size = serializers.IntegerField()
    x = serializers.FloatField()
    y = serializers.FloatField()


class MapHitSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    rank = serializers.IntegerField()
    score = serializers.FloatField()
    on_map = serializers.BooleanField()
    x = serializers.FloatField(allow_null=True)
    y = serializers.FloatField(allow_null=True)


class MapQueryResultSerializer(serializers.Serializer):
    text = serializers.CharField()
    x = serializers.FloatField(allow_null=True)
    y = serializers.FloatField(allow_null=True)
    hits = MapHitSerializer(many=True)


class MapSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ready", "computing", "failed", "empty"])
    map_id = serializers.IntegerField(allow_null=True)
    computing_id = serializers.IntegerField(allow_null=True)
    scope_keys = serializers.ListField(child=serializers.CharField())
    model = serializers.CharField()
    params = serializers.DictField()
    computed_at = serializers.DateTimeField(allow_null=True)
    compute_ms = serializers.IntegerField()
    total = serializers.IntegerField(help_text="Memories with a vector in the selection")
    sample_size = serializers.IntegerField(help_text="Points projected (sampled beyond this)")
    shown = serializers.IntegerField(
        help_text="Points in `points`: every point projected, or a fixed random subset of "
        "`display` of them when the map has more (before dropping those unreadable now)"
    )
    association_strength = serializers.FloatField(allow_null=True)
    explained_variance = serializers.ListField(child=serializers.FloatField())
    points = MapPointSerializer(many=True)
    clusters = MapClusterSerializer(many=True)
    query = MapQueryResultSerializer(allow_null=True)


class TrailMemorySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    status = serializers.CharField()
    scope_key = serializers.CharField()
    version = serializers.IntegerField()
    created_at = serializers.DateTimeField()


class TrailOriginSerializer(serializers.Serializer):
    source_kind = serializers.CharField()
    source_ref = serializers.DictField()
    conversation_id = serializers.CharField(allow_blank=True)
    author_type = serializers.CharField(allow_blank=True)
    author_id = serializers.CharField(allow_blank=True)
    author_label = serializers.CharField(allow_blank=True)
    observed_at = serializers.DateTimeField()


class TrailMergedSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField(allow_blank=True)
    status = serializers.CharField(allow_blank=True)
    preview = serializers.CharField(allow_blank=True, help_text="Empty when unreadable")


class TrailCallSerializer(serializers.Serializer):
    context_record_id = serializers.IntegerField()
    kind = serializers.CharField()
    run_id = serializers.CharField(allow_blank=True)
    step_id = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()
    memory_version = serializers.IntegerField()
    rank = serializers.IntegerField()
    score = serializers.FloatField()
    status = serializers.CharField()
    source = serializers.CharField()
    reason = serializers.CharField(allow_blank=True)


class TrailSerializer(serializers.Serializer):
    memory = TrailMemorySerializer()
    origin = TrailOriginSerializer()
    sources = serializers.ListField(child=serializers.DictField())
    versions = MemoryVersionSerializer(many=True)
    merged = TrailMergedSerializer(many=True)
    merge_count = serializers.IntegerField()
    model_calls = TrailCallSerializer(many=True)
    model_call_count = serializers.IntegerField()
    withheld = TrailCallSerializer(many=True)
    masked = TrailCallSerializer(many=True)
    skills = serializers.ListField(child=serializers.DictField())
