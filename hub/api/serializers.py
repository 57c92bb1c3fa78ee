"""Hub API representations (also the OpenAPI schema of the Hub endpoints)."""

from __future__ import annotations

from rest_framework import serializers

from hub import outcomes, selectors
from hub.models import SkillPackage


class OwnerSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    display_name = serializers.CharField()


class PackageSerializer(serializers.Serializer):
    name = serializers.CharField(source="full_name")
    namespace = serializers.CharField(source="namespace.handle")
    slug = serializers.CharField(source="name")
    display_name = serializers.CharField()
    summary = serializers.CharField()
    organization = serializers.CharField(source="organization.slug")
    visibility = serializers.ChoiceField(choices=SkillPackage.Visibility.choices)
    department = serializers.IntegerField(source="department_id", allow_null=True)
    owner = OwnerSerializer()
    badges = serializers.ListField(child=serializers.CharField())
    deprecated = serializers.BooleanField()
    deprecation_message = serializers.CharField()
    tags = serializers.SerializerMethodField()
    latest_version = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def get_tags(self, package) -> dict[str, str]:
        return {tag.tag: tag.version.version for tag in package.tags.all()}

    def get_latest_version(self, package) -> str | None:
        return self.get_tags(package).get("latest")


class PackageDetailSerializer(PackageSerializer):
    stats = serializers.SerializerMethodField()
    can_maintain = serializers.SerializerMethodField()

    def get_stats(self, package) -> dict:
        return selectors.package_stats(package)

    def get_can_maintain(self, package) -> bool:
        return selectors.can_maintain(self.context["request"].actor, package)


class FileSerializer(serializers.Serializer):
    path = serializers.CharField()
    size = serializers.IntegerField()
    sha256 = serializers.CharField()
    content_type = serializers.CharField()


class OutcomeStatsSerializer(serializers.Serializer):
    uses = serializers.IntegerField(help_text="runs that had the version in their context")
    successes = serializers.IntegerField()
    failures = serializers.IntegerField()
    success_rate = serializers.FloatField(allow_null=True)


class VersionSerializer(serializers.Serializer):
    version = serializers.CharField()
    status = serializers.CharField(help_text="pending_review, published or rejected")
    yanked = serializers.BooleanField()
    yanked_reason = serializers.CharField()
    changelog = serializers.CharField()
    fingerprint = serializers.CharField()
    scan_verdict = serializers.CharField()
    created_at = serializers.DateTimeField()
    published_at = serializers.DateTimeField(allow_null=True)
    outcomes = serializers.SerializerMethodField()

    def get_outcomes(self, version) -> OutcomeStatsSerializer:
        # The views pass every listed version's rates in one query as context["rates"].
        rates = self.context.get("rates")
        if rates is None:
            rates = outcomes.version_success_rates([version.pk])
        return rates.get(version.pk, outcomes.EMPTY_RATE)


class VersionDetailSerializer(VersionSerializer):
    package = serializers.CharField(source="package.full_name")
    frontmatter = serializers.JSONField()
    total_bytes = serializers.IntegerField()
    signature = serializers.CharField()
    key_id = serializers.CharField()
    files = FileSerializer(many=True)
    scan_findings = serializers.SerializerMethodField()
    validation = serializers.JSONField()
    review_note = serializers.CharField()

    def get_scan_findings(self, version) -> list[dict]:
        # Findings (with excerpts) are for the people who maintain or review the skill.
        if selectors.can_maintain(self.context["request"].actor, version.package):
            return version.scan_findings
        return []


class PublishRequestSerializer(serializers.Serializer):
    bundle = serializers.FileField(required=False, help_text="zip or tar.gz (or send it raw)")
    version = serializers.CharField(max_length=128)
    namespace = serializers.CharField(max_length=65, required=False)
    name = serializers.CharField(max_length=64, required=False)
    changelog = serializers.CharField(required=False, allow_blank=True, max_length=20000)
    visibility = serializers.ChoiceField(choices=SkillPackage.Visibility.choices, required=False)
    department = serializers.IntegerField(required=False)
    display_name = serializers.CharField(required=False, max_length=200)
    tags = serializers.ListField(child=serializers.CharField(max_length=64), required=False)
    dry_run = serializers.BooleanField(required=False, default=False)


class PublishResponseSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    dry_run = serializers.BooleanField()
    fingerprint = serializers.CharField()
    validation = serializers.JSONField()
    scan = serializers.JSONField()
    files = serializers.JSONField()
    package = serializers.CharField(required=False)
    version = serializers.CharField(required=False)
    status = serializers.CharField(required=False)


class ReviewSerializer(serializers.Serializer):
    approve = serializers.BooleanField()
    note = serializers.CharField(required=False, allow_blank=True, max_length=4000)


class YankSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=4000)


class TagSerializer(serializers.Serializer):
    version = serializers.CharField(max_length=128)


class DeprecateSerializer(serializers.Serializer):
    deprecated = serializers.BooleanField(default=True)
    message = serializers.CharField(required=False, allow_blank=True, max_length=2000)


class PackageUpdateSerializer(serializers.Serializer):
    visibility = serializers.ChoiceField(choices=SkillPackage.Visibility.choices, required=False)
    department = serializers.IntegerField(required=False)
    display_name = serializers.CharField(required=False, max_length=200)
    badges = serializers.ListField(child=serializers.CharField(max_length=32), required=False)


class NamespaceSerializer(serializers.Serializer):
    handle = serializers.CharField(max_length=65)
    department = serializers.IntegerField(required=False, allow_null=True)
    display_name = serializers.CharField(required=False, allow_blank=True, max_length=200)


class SearchResultSerializer(PackageSerializer):
    score = serializers.FloatField()


class SigningKeySerializer(serializers.Serializer):
    algorithm = serializers.CharField()
    key_id = serializers.CharField()
    public_key_pem = serializers.CharField()
