"""Hub routes: the Cadre Hub API (/api/v1/hub/), the ClawHub-compatible API and discovery."""

from __future__ import annotations

from django.urls import path

from hub.api import clawhub, distribution, views

_skill = "skills/<str:namespace>/<str:name>/"
_version = _skill + "versions/<str:version>/"

# mounted under /api/v1/hub/
api_urlpatterns: list = [
    path("skills/", views.PackageListView.as_view(), name="hub-skills"),
    path("publish/", views.PublishView.as_view(), name="hub-publish"),
    path("search/", views.SearchView.as_view(), name="hub-search"),
    path("signing-key/", views.SigningKeyView.as_view(), name="hub-signing-key"),
    path("namespaces/", views.NamespaceView.as_view(), name="hub-namespaces"),
    path(_skill, views.PackageDetailView.as_view(), name="hub-skill"),
    path(_skill + "deprecate/", views.DeprecateView.as_view(), name="hub-skill-deprecate"),
    path(_skill + "download/", views.DownloadView.as_view(), name="hub-skill-download"),
    path(_skill + "tags/<str:tag>/", views.TagView.as_view(), name="hub-skill-tag"),
    path(
        _skill + "templates/",
        distribution.PackageTemplatesView.as_view(),
        name="hub-skill-templates",
    ),
    path(_skill + "versions/", views.VersionListView.as_view(), name="hub-versions"),
    path(_version, views.VersionDetailView.as_view(), name="hub-version"),
    path(_version + "review/", views.ReviewView.as_view(), name="hub-version-review"),
    path(_version + "yank/", views.YankView.as_view(), name="hub-version-yank"),
    path(_version + "unyank/", views.UnyankView.as_view(), name="hub-version-unyank"),
    path(_version + "files/<path:path>", views.FileView.as_view(), name="hub-version-file"),
    path("installs/", distribution.InstallListView.as_view(), name="hub-installs"),
    path("installs/<int:pk>/", distribution.InstallDetailView.as_view(), name="hub-install"),
    path(
        "installs/<int:pk>/apply/",
        distribution.InstallApplyView.as_view(),
        name="hub-install-apply",
    ),
    path(
        "installs/<int:pk>/rollback/",
        distribution.InstallRollbackView.as_view(),
        name="hub-install-rollback",
    ),
    path("runs/<int:run_id>/skills/", distribution.RunSkillsView.as_view(), name="hub-run-skills"),
    path(
        "runs/<int:run_id>/feedback/",
        distribution.RunFeedbackView.as_view(),
        name="hub-run-feedback",
    ),
    # ClawHub's per-file upload URL (handed out by POST /api/v1/skills/-/upload-url)
    path("uploads/<str:ticket>", clawhub.UploadView.as_view(), name="clawhub-upload"),
]

# mounted under /api/v1/ (ClawHub's own paths; none clashes with Cadre's /api/v1/ routes)
clawhub_urlpatterns: list = [
    path("whoami", clawhub.WhoamiView.as_view(), name="clawhub-whoami"),
    path("search", clawhub.SearchView.as_view(), name="clawhub-search"),
    path("resolve", clawhub.ResolveView.as_view(), name="clawhub-resolve"),
    path("download", clawhub.DownloadView.as_view(), name="clawhub-download"),
    path("skills", clawhub.SkillsView.as_view(), name="clawhub-skills"),
    path("skills/-/upload-url", clawhub.UploadUrlView.as_view(), name="clawhub-upload-url"),
    path("skills/<str:slug>", clawhub.SkillView.as_view(), name="clawhub-skill"),
    path("skills/<str:slug>/versions", clawhub.VersionsView.as_view(), name="clawhub-versions"),
    path(
        "skills/<str:slug>/versions/<str:version>",
        clawhub.VersionView.as_view(),
        name="clawhub-version",
    ),
    path("skills/<str:slug>/file", clawhub.FileView.as_view(), name="clawhub-file"),
    path(
        "skills/<str:slug>/moderation", clawhub.ModerationView.as_view(), name="clawhub-moderation"
    ),
    path("skills/<str:slug>/tags/<str:tag>", clawhub.TagView.as_view(), name="clawhub-tag"),
]

# mounted at the site root
site_urlpatterns: list = [
    path(".well-known/clawhub.json", clawhub.well_known, name="clawhub-well-known"),
]
