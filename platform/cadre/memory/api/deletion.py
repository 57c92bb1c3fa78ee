"""The memory API's deletion endpoints: delete and purge return the deletion report, which
`GET memories/{id}/deletion/` shows again (with the purge task's progress)."""

from __future__ import annotations

from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.response import Response

from cadre.errors import NotFound
from cadre.memory import selectors, services
from cadre.memory.models import Memory


class RedactionCountsSerializer(serializers.Serializer):
    sessions = serializers.IntegerField()
    runs = serializers.IntegerField()
    steps = serializers.IntegerField()
    events = serializers.IntegerField()
    waits = serializers.IntegerField()
    context_records = serializers.IntegerField()


class DerivedCopiesSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["pending", "complete"])
    counts = serializers.DictField(child=serializers.IntegerField())
    copies = serializers.DictField(
        child=serializers.ListField(child=serializers.IntegerField()),
        help_text="Ids by kind: tool_trajectories, experiences, summaries (derived memories), "
        "skill_drafts, skill_candidates, skill_proposals.",
    )


class RedactionSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["pending", "in_progress", "complete"])
    counts = RedactionCountsSerializer()
    sessions = serializers.ListField(child=serializers.IntegerField())
    runs = serializers.ListField(child=serializers.IntegerField())
    steps = serializers.ListField(child=serializers.IntegerField())
    events = serializers.ListField(child=serializers.IntegerField())
    waits = serializers.ListField(child=serializers.IntegerField())
    context_records = serializers.ListField(child=serializers.IntegerField())
    deferred_runs = serializers.ListField(
        child=serializers.IntegerField(), help_text="Runs in progress, redacted once they rest."
    )
    sessions_pending = serializers.IntegerField(allow_null=True)
    derived = DerivedCopiesSerializer(
        help_text="Memories derived from runs and skill drafts that quoted it, redacted."
    )


class RemovedSerializer(serializers.Serializer):
    read_paths = serializers.ListField(child=serializers.CharField())
    vector_index = serializers.DictField(child=serializers.IntegerField())
    lexical_index = serializers.BooleanField()
    content = serializers.ChoiceField(choices=["purge_pending", "purged"])


class RetainedCopySerializer(serializers.Serializer):
    copy = serializers.CharField()
    holds = serializers.CharField()
    retention = serializers.CharField()
    ids = serializers.ListField(child=serializers.IntegerField(), required=False)
    runs = serializers.ListField(child=serializers.IntegerField(), required=False)


class DeletionTaskSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    status = serializers.CharField()


class DeletionReportSerializer(serializers.Serializer):
    memory = serializers.IntegerField()
    predecessors = serializers.ListField(
        child=serializers.IntegerField(),
        help_text="The memories it had replaced (a correction, a merge), deleted with it.",
    )
    deleted_with = serializers.IntegerField(
        allow_null=True, help_text="The memory whose deletion deleted this earlier form of it."
    )
    status = serializers.CharField()
    marker = serializers.CharField(help_text="What the redacted runs show in place of the text.")
    deleted_at = serializers.DateTimeField(allow_null=True)
    purged_at = serializers.DateTimeField(allow_null=True)
    removed = RemovedSerializer()
    redaction = RedactionSerializer()
    task = DeletionTaskSerializer(allow_null=True)
    retained = RetainedCopySerializer(many=True)


class MemoryDeletionActions:
    """Mixed into MemoryViewSet: DELETE, POST …/purge/ and GET …/deletion/."""

    @extend_schema(
        request=None,
        responses={200: DeletionReportSerializer},
        description="Delete now: gone from get, list, search (vector and lexical indexes), "
        "history and context assembly; the memory's text is redacted from the runs that "
        "carried it (marker `[memory N deleted on <date>]`), from the memories derived from "
        "runs (tool trajectories, experiences, summaries) and from the skill drafts, "
        "candidates and proposals that quote it; a purge task removes the content "
        "once the redaction is complete. Answers the deletion report. A second delete is "
        "409 `already_deleted` and changes nothing.",
    )
    def destroy(self, request, pk=None):
        memory = selectors.memory_get_for_deletion(self.actor, pk)
        memory = services.memory_delete(actor=self.actor, memory=memory)
        return Response(DeletionReportSerializer(services.deletion_report(memory)).data)

    @extend_schema(
        request=None,
        responses={200: DeletionReportSerializer},
        description="Delete (if not yet) and purge at once: run copies redacted, then the "
        "content, history text and vectors removed. If the memory reached more sessions than "
        "one request handles, or a run that carried it is still running, the report says "
        "`purge_pending` and the purge task finishes. A purged memory is 409 `already_purged`.",
    )
    @action(detail=True, methods=["post"])
    def purge(self, request, pk=None):
        memory = selectors.memory_get_for_deletion(self.actor, pk)
        memory = services.memory_purge_now(actor=self.actor, memory=memory)
        return Response(DeletionReportSerializer(services.deletion_report(memory)).data)

    @extend_schema(
        responses={200: DeletionReportSerializer},
        description="The deletion report of a deleted memory, with the purge's progress.",
    )
    @action(detail=True, methods=["get"])
    def deletion(self, request, pk=None):
        memory = selectors.memory_get_for_deletion(self.actor, pk)
        if memory.status != Memory.Status.DELETED or not selectors.can_modify(self.actor, memory):
            raise NotFound(_("No deletion of this memory."))
        return Response(DeletionReportSerializer(services.deletion_report(memory)).data)
