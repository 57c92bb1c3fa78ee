"""Routes of the compatible memory APIs: Mem0 at /mem0/ (its self-hosted server's contract at
/mem0/oss/), MemOS at /memos/."""

from __future__ import annotations

from django.urls import path, re_path

from cadre.compat import mem0, mem0_oss, mem0_platform, memos
from cadre.compat.schemas import SchemaView

# Mem0's organization and webhook paths, as MemoryClient's Project and webhook calls spell them.
PROJECTS = "api/v1/orgs/organizations/<str:org_id>/projects/"
WEBHOOKS = "api/v1/webhooks/"

mem0_urlpatterns = [
    path("openapi.json", SchemaView.as_view(layer="mem0"), name="mem0-schema"),
    path("v1/ping/", mem0.Ping.as_view(), name="mem0-ping"),
    path("v1/memories/", mem0.Memories.as_view(), name="mem0-memories"),
    path("v3/memories/add/", mem0.AddMemories.as_view(), name="mem0-add"),
    # One view for each of the API versions clients call it by.
    *(
        path(f"{v}/memories/", mem0.ListMemories.as_view(), name=f"mem0-list-{v}")
        for v in ("v3", "v2")
    ),
    *(
        path(f"{v}/memories/search/", mem0.Search.as_view(), name=f"mem0-search-{v}")
        for v in ("v3", "v2", "v1")
    ),
    path("v1/memories/<str:memory_id>/", mem0.MemoryDetail.as_view(), name="mem0-memory"),
    path(
        "v1/memories/<str:memory_id>/history/", mem0.History.as_view(), name="mem0-memory-history"
    ),
    path("v1/feedback/", mem0.Feedback.as_view(), name="mem0-feedback"),
    path("v1/entities/", mem0_platform.Entities.as_view(), name="mem0-entities"),
    path(
        "v2/entities/<str:entity_type>/<str:entity_id>/",
        mem0_platform.EntityDetail.as_view(),
        name="mem0-entity",
    ),
    path(
        "v2/entities/user/<str:entity_id>/profile/",
        mem0_platform.Profile.as_view(),
        name="mem0-profile",
    ),
    path(
        "v2/profiles/settings/",
        mem0_platform.ProfileSettings.as_view(),
        name="mem0-profile-settings",
    ),
    path("v2/profiles/jobs/", mem0_platform.ProfileJobs.as_view(), name="mem0-profile-jobs"),
    path(
        "v2/profiles/jobs/<str:job_id>/",
        mem0_platform.ProfileJob.as_view(),
        name="mem0-profile-job",
    ),
    path("v1/batch/", mem0_platform.Batch.as_view(), name="mem0-batch"),
    path("v1/exports/", mem0_platform.Exports.as_view(), name="mem0-exports"),
    path("v1/exports/get/", mem0_platform.ExportGet.as_view(), name="mem0-export-get"),
    path("v1/summary/", mem0_platform.Summary.as_view(), name="mem0-summary"),
    path(PROJECTS, mem0_platform.Projects.as_view(), name="mem0-projects"),
    path(
        f"{PROJECTS}<str:project_id>/", mem0_platform.ProjectDetail.as_view(), name="mem0-project"
    ),
    path(
        f"{PROJECTS}<str:project_id>/members/",
        mem0_platform.ProjectMembers.as_view(),
        name="mem0-project-members",
    ),
    path(
        f"{WEBHOOKS}projects/<str:project_id>/",
        mem0_platform.Webhooks.as_view(),
        name="mem0-webhooks",
    ),
    path(
        f"{WEBHOOKS}<str:webhook_id>/", mem0_platform.WebhookDetail.as_view(), name="mem0-webhook"
    ),
    # Mem0's self-hosted server contract (MEM0_HOST=<CADRE_BASE_URL>/mem0/oss): no slashes.
    path("oss/memories", mem0_oss.Memories.as_view(), name="mem0-oss-memories"),
    path("oss/memories/<str:memory_id>", mem0_oss.MemoryDetail.as_view(), name="mem0-oss-memory"),
    path(
        "oss/memories/<str:memory_id>/history",
        mem0_oss.History.as_view(),
        name="mem0-oss-memory-history",
    ),
    path("oss/search", mem0_oss.Search.as_view(), name="mem0-oss-search"),
    path("oss/configure", mem0_oss.Configure.as_view(), name="mem0-oss-configure"),
    path("oss/configure/providers", mem0_oss.Providers.as_view(), name="mem0-oss-providers"),
    path(
        "oss/generate-instructions",
        mem0_oss.GenerateInstructions.as_view(),
        name="mem0-oss-instructions",
    ),
    path("oss/reset", mem0_oss.Reset.as_view(), name="mem0-oss-reset"),
    re_path(r"^.*$", mem0.Unknown.as_view(), name="mem0-unknown"),
]

memos_urlpatterns = [
    path("openapi.json", SchemaView.as_view(layer="memos"), name="memos-schema"),
    path("add/message", memos.AddMessage.as_view(), name="memos-add-message"),
    path("search/memory", memos.SearchMemory.as_view(), name="memos-search"),
    path("get/memory", memos.GetMemory.as_view(), name="memos-get"),
    path("update/memory", memos.UpdateMemory.as_view(), name="memos-update"),
    path("delete/memory", memos.DeleteMemory.as_view(), name="memos-delete"),
    path("add/feedback", memos.AddFeedback.as_view(), name="memos-feedback"),
    path("get/status", memos.GetStatus.as_view(), name="memos-status"),
    path("get/memory/<str:memory_id>", memos.GetMemoryById.as_view(), name="memos-memory"),
    path("get/message", memos.GetMessage.as_view(), name="memos-get-message"),
    path("create/knowledgebase", memos.Knowledgebase.as_view(), name="memos-kb-create"),
    path("delete/knowledgebase", memos.Knowledgebase.as_view(), name="memos-kb-delete"),
    path("add/knowledgebase-file", memos.Knowledgebase.as_view(), name="memos-kb-file-add"),
    path("get/knowledgebase-file", memos.Knowledgebase.as_view(), name="memos-kb-file-get"),
    path("delete/knowledgebase-file", memos.Knowledgebase.as_view(), name="memos-kb-file-delete"),
    re_path(r"^.*$", memos.Unknown.as_view(), name="memos-unknown"),
]
