"""Hub read paths: what an actor may see, version resolution (tags, pins, ranges), search."""

from __future__ import annotations

import re
from datetime import timedelta

from django.contrib.postgres.search import SearchQuery, SearchRank, TrigramSimilarity
from django.db.models import Exists, F, OuterRef, Q, QuerySet, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone
from django.utils.translation import gettext as _

from cadre.agents.models import Run
from cadre.agents.selectors import run_may_act, transcripts_readable
from cadre.errors import InvalidInput, NotFound, NotPermitted
from cadre.tenancy.models import Department, department_subtree_ids
from cadre.tenancy.roles import GRANTABLE
from hub.models import (
    DistTag,
    HubNamespace,
    SkillDailyStat,
    SkillInstall,
    SkillPackage,
    SkillVersion,
)
from hub.outcomes import EMPTY_RATE, package_success_rates
from hub.semantic import semantic_matches
from hub.versions import Version, parse_range, parse_version, sort_key

INSTALL_WINDOW_DAYS = 60
# Members with one of these roles administer the organization: with `skill.publish` at
# organization level they may publish into every one of its team namespaces.
ORG_ADMIN_ROLES = frozenset({"owner", "it_admin"})
CANDIDATES = 200  # text matches ranked by use (step 2 of search)


def _department_ancestors(department_id: int | None) -> set[int]:
    if department_id is None:
        return set()
    found: set[int] = set()
    current = department_id
    while current is not None and current not in found:
        found.add(current)
        current = Department.objects.filter(pk=current).values_list("parent_id", flat=True).first()
    return found


def _own_department_condition(actor) -> Q:
    """Department-visibility packages of the actor's org that the actor reaches."""
    if actor.has("skill.review"):
        return Q(pk__isnull=False)  # (an empty Q() would vanish from the OR)
    member = actor.member
    reach = _department_ancestors(getattr(member, "department_id", None))
    condition = Q(department_id__in=reach) if reach else Q(pk__in=[])
    if member is not None:
        condition |= Q(owner_id=member.pk)
    roots = actor.granted_ids("skill.review", Department)
    if roots:
        subtree = department_subtree_ids(actor.organization.pk, roots)
        condition |= Q(department_id__in=subtree)
    return condition


def packages_visible(actor) -> QuerySet[SkillPackage]:
    """Own organization's packages the actor may see, plus other organizations' instance-wide
    packages that have a published version. Nothing without `skill.view`."""
    if actor is None or actor.organization is None or not actor.has("skill.view"):
        return SkillPackage.objects.none()
    own = Q(organization=actor.organization) & (
        ~Q(visibility=SkillPackage.Visibility.DEPARTMENT) | _own_department_condition(actor)
    )
    published = SkillVersion.objects.filter(
        package=OuterRef("pk"), status=SkillVersion.Status.PUBLISHED
    )
    shared = (
        Q(visibility=SkillPackage.Visibility.INSTANCE)
        & ~Q(organization=actor.organization)
        & Exists(published)
    )
    return SkillPackage.objects.filter(own | shared).select_related("namespace", "owner")


def can_maintain(actor, package: SkillPackage) -> bool:
    """Owner with publish rights, or a reviewer of the package (org-wide or by department)."""
    if actor is None or actor.organization is None:
        return False
    if package.organization_id != actor.organization.pk:
        return False
    member = actor.member
    if actor.has("skill.publish") and member is not None and package.owner_id == member.pk:
        return True
    return actor.can("skill.review", package)


def namespace_publish_refusal(actor, namespace: HubNamespace) -> tuple[str, str] | None:
    """Why the actor may not publish into `namespace` — (error code, message) — or None.

    Another organization's namespace: never. The organization's own namespaces without a
    department: anyone with `skill.publish`. A team namespace (tied to a department): members
    of that department or of a department below it, holders of an object grant on it (or on a
    department above it, which reaches it), and organization admins (`ORG_ADMIN_ROLES`) with
    `skill.publish` at organization level. An API key acts as the member who created it (its
    department and roles; keys carry no object grants).
    """
    organization = getattr(actor, "organization", None)
    if organization is None or namespace.organization_id != organization.pk:
        return (
            "namespace_foreign",
            f"@{namespace.handle} belongs to another organization; publish under your "
            "organization's namespace.",
        )
    if namespace.department_id is None:
        return None
    member = actor.member
    if actor.has("skill.publish") and ORG_ADMIN_ROLES & set(getattr(member, "roles", ()) or ()):
        return None
    team = department_subtree_ids(organization.pk, {namespace.department_id})
    if member is not None and member.department_id in team:
        return None
    roots: set[int] = set()
    for permission in GRANTABLE["department"]:
        roots |= actor.granted_ids(permission, Department)
    if roots and namespace.department_id in department_subtree_ids(organization.pk, roots):
        return None
    return (
        "namespace_not_member",
        f"@{namespace.handle} is a team namespace: only members of its department, holders of "
        "a grant on it, or organization admins may publish into it.",
    )


def package_get(actor, handle: str, name: str) -> SkillPackage:
    handle = handle.lstrip("@")
    package = packages_visible(actor).filter(namespace__handle=handle, name=name).first()
    if package is None:
        raise NotFound(
            _("No skill @%(handle)s/%(name)s.") % {"handle": handle, "name": name},
            code="skill_not_found",
        )
    return package


def parse_full_name(text: str) -> tuple[str, str]:
    """`@namespace/name` (the `@` is optional) → (namespace, name)."""
    match = re.fullmatch(r"@?([a-z0-9][a-z0-9-]{0,63})/([a-z0-9][a-z0-9-]{0,63})", text.strip())
    if match is None:
        raise InvalidInput(
            _("'%(text)s' is not a skill name like @namespace/name.") % {"text": text},
            code="invalid",
        )
    return match.group(1), match.group(2)


def versions_visible(actor, package: SkillPackage) -> QuerySet[SkillVersion]:
    versions = SkillVersion.objects.filter(package=package)
    if can_maintain(actor, package):
        return versions
    return versions.filter(status=SkillVersion.Status.PUBLISHED)


def ordered(versions) -> list[SkillVersion]:
    return sorted(versions, key=lambda v: sort_key(parse_version(v.version)), reverse=True)


def resolve_version(package: SkillPackage, spec: str | None = None) -> SkillVersion:
    """An installable version: an exact pin (yanked allowed), a dist-tag, or a range.

    Ranges and `latest` skip yanked versions; nothing unpublished is ever returned.
    """
    spec = (spec or "latest").strip()
    published = SkillVersion.objects.filter(package=package, status=SkillVersion.Status.PUBLISHED)
    try:
        exact = parse_version(spec)
    except InvalidInput:
        exact = None
    if exact is not None:
        found = published.filter(version=str(exact)).first()
        if found is None:
            raise NotFound(
                _("%(package)s has no published version %(spec)s.")
                % {"package": package.full_name, "spec": spec}
            )
        return found
    tag = DistTag.objects.filter(package=package, tag=spec).select_related("version").first()
    if (
        tag is not None
        and tag.version.status == SkillVersion.Status.PUBLISHED
        and not (tag.version.yanked and spec == "latest")
    ):
        return tag.version
    if spec == "latest":
        candidates = ordered(published.filter(yanked=False))
        if candidates:
            return candidates[0]
        raise NotFound(_("%(package)s has no published version.") % {"package": package.full_name})
    if tag is None and not re.search(r"[\d*xX]", spec):
        raise NotFound(
            _("%(package)s has no dist-tag '%(spec)s'.")
            % {"package": package.full_name, "spec": spec}
        )
    version_range = parse_range(spec)
    candidates = {v.version: v for v in published.filter(yanked=False)}
    best: Version | None = version_range.best(candidates)
    if best is None:
        raise NotFound(
            _("No published version of %(package)s matches '%(spec)s'.")
            % {"package": package.full_name, "spec": spec}
        )
    return candidates[str(best)]


def installs_since(package_ids, days: int = INSTALL_WINDOW_DAYS) -> dict[int, int]:
    since = timezone.now().date() - timedelta(days=days)
    rows = (
        SkillDailyStat.objects.filter(package_id__in=package_ids, day__gte=since)
        .values("package_id")
        .annotate(total=Sum("installs"))
    )
    return {row["package_id"]: row["total"] or 0 for row in rows}


def package_stats(package: SkillPackage) -> dict:
    totals = SkillDailyStat.objects.filter(package=package).aggregate(
        downloads=Coalesce(Sum("downloads"), 0),
        installs=Coalesce(Sum("installs"), 0),
        successes=Coalesce(Sum("successes"), 0),
        failures=Coalesce(Sum("failures"), 0),
    )

    # Outcomes of the runs that loaded the skill, plus any counted by `version_record_outcome`.
    usage = package_success_rates([package.pk]).get(package.pk, EMPTY_RATE)
    totals["successes"] += usage["successes"]
    totals["failures"] += usage["failures"]
    totals["uses"] = usage["uses"]
    runs = totals["successes"] + totals["failures"]
    totals["success_rate"] = round(totals["successes"] / runs, 4) if runs else None
    totals["installs_60d"] = installs_since([package.pk]).get(package.pk, 0)
    totals["versions"] = SkillVersion.objects.filter(
        package=package, status=SkillVersion.Status.PUBLISHED
    ).count()
    return totals


# --- search ------------------------------------------------------------------------------


def _text_query(query: str) -> SearchQuery | None:
    """Prefix match of every word (`pdf form` → `pdf:* & form:*`), words sanitised."""
    words = re.findall(r"\w+", query.lower())[:8]
    if not words:
        return None
    return SearchQuery(
        " & ".join(f"{word}:*" for word in words), search_type="raw", config="simple"
    )


def search(
    actor, query: str, *, limit: int = 20, semantic: bool = True
) -> list[tuple[SkillPackage, float]]:
    """Lexical search, then ranking by use.

    Step 1 (indexed): full-text match on name and description (`title_vector`, GIN) or a
    trigram match on the name (typos), best CANDIDATES by text rank; body-only matches
    (`search_vector`) fill up to CANDIDATES, newest first. Step 2: 60-day installs, success
    rate and freshness for those candidates only, in one aggregate query. An exact name
    match is a strong signal, but popularity decides between packages with the same name,
    so a brand-new package that copies an established name (squatting) does not outrank
    it; ties go to the older package.
    """
    query = (query or "").strip()[:200]
    lowered = query.lower()
    limit = max(1, min(limit, 100))
    published = SkillVersion.objects.filter(
        package=OuterRef("pk"), status=SkillVersion.Status.PUBLISHED
    )
    base = packages_visible(actor).filter(Exists(published))
    text = _text_query(lowered)
    slim = base.defer("search_text", "search_vector", "title_vector")
    if text is not None:
        # Stage 1: matches in the name, display name or description, ranked by text.
        rows = list(
            # names are lowercase, so a plain LIKE can use the trigram index on name
            slim.filter(
                Q(title_vector=text) | Q(name__trigram_similar=lowered) | Q(name__contains=lowered)
            )
            .annotate(
                similarity=SearchRank(F("title_vector"), text, normalization=1)
                + TrigramSimilarity("name", lowered)
            )
            .order_by("-similarity", "pk")[:CANDIDATES]
        )
        # Stage 2: body-only matches fill the rest, newest first (an index walk on
        # updated_at when matches are dense, a small bitmap when they are sparse).
        if len(rows) < CANDIDATES:
            body = (
                slim.filter(search_vector=text)
                .exclude(pk__in=[package.pk for package in rows])
                .order_by("-updated_at", "pk")[: CANDIDATES - len(rows)]
            )
            for package in body:
                package.similarity = 0.05
                rows.append(package)
    elif lowered:
        rows = []
    else:
        rows = list(slim.order_by("-updated_at", "pk")[:CANDIDATES])
    if semantic and lowered and len(rows) < limit:
        # Stage 1b: meaning, not words — only fills what the lexical stage left empty.

        for package, similarity in semantic_matches(
            base, lowered, limit=limit, exclude={p.pk for p in rows}
        ):
            package.similarity = 0.5 * similarity
            rows.append(package)
    _attach_usage(rows)
    now = timezone.now()
    scored = [(package, round(_score(package, lowered, now), 4)) for package in rows]
    # Ties go to the older package: a newcomer copying an established name never wins a tie.
    scored.sort(key=lambda item: (-item[1], item[0].created_at, item[0].pk))
    return scored[:limit]


def _attach_usage(packages: list[SkillPackage]) -> None:
    since = timezone.now().date() - timedelta(days=INSTALL_WINDOW_DAYS)
    rows = (
        SkillDailyStat.objects.filter(package_id__in=[p.pk for p in packages])
        .values("package_id")
        .annotate(
            installs_60d=Coalesce(Sum("installs", filter=Q(day__gte=since)), 0),
            successes=Coalesce(Sum("successes"), 0),
            failures=Coalesce(Sum("failures"), 0),
        )
    )
    usage = {row["package_id"]: row for row in rows}

    # Run outcomes of the agents that used each skill (feedback, else the run's status).
    outcomes = package_success_rates([p.pk for p in packages])
    for package in packages:
        row = usage.get(package.pk, {})
        ran = outcomes.get(package.pk, {})
        package.installs_60d = row.get("installs_60d", 0)
        package.successes = row.get("successes", 0) + ran.get("successes", 0)
        package.failures = row.get("failures", 0) + ran.get("failures", 0)


def _score(package: SkillPackage, query: str, now) -> float:
    """Relevance (trigram similarity, exact/partial name match) + use signals.

    Popularity is 60-day installs (square-root scaled, capped); success rate (run outcomes of
    the agents that loaded the skill, plus reported outcomes) is smoothed (unknown ≈ 0.5);
    freshness only counts for packages people actually install, so a brand-new copy of an
    established name gets no head start from being new.
    """
    relevance = getattr(package, "similarity", 0.0) or 0.0
    if query and package.name == query.replace(" ", "-"):
        relevance += 0.5
    elif query and query in package.name:
        relevance += 0.2
    runs = package.successes + package.failures
    # Smoothed (Laplace): a skill with few outcomes stays near 0.5; many outcomes dominate.
    success = (package.successes + 1) / (runs + 2)
    installs = package.installs_60d
    popularity = min(installs, 1000) ** 0.5 / 31.6
    age_days = max((now - package.updated_at).total_seconds() / 86400, 0)
    freshness = 0.5 ** (age_days / 90) if installs > 0 else 0.0
    score = relevance + 0.6 * popularity + 0.2 * success + 0.1 * freshness
    if package.deprecated:
        score -= 0.5
    return score


def annotate_latest(packages) -> dict[int, SkillVersion]:
    """package id → its `latest` version (one query)."""
    tags = DistTag.objects.filter(package__in=packages, tag="latest").select_related("version")
    return {tag.package_id: tag.version for tag in tags}


# --- distribution and outcomes -------------------------------------------------------------


def installs_visible(actor) -> QuerySet[SkillInstall]:
    """Skill installs of the agents the actor may see (employees: their own agents)."""
    return SkillInstall.objects.restrict(actor, "view")


def run_get(actor, run_id: int):
    """A run whose transcript the actor may read (`transcripts_readable`), else 404: which
    skills matched a run tells what it was asked, so `agent.view` alone (an auditor, a business
    admin) is not told a colleague's run exists, as the runs API does not tell them."""
    run = transcripts_readable(actor, Run.objects.all()).filter(pk=run_id).first()
    if run is None:
        raise NotFound(_("No such run."), code="run_not_found")
    return run


def run_to_rate(actor, run_id: int) -> tuple[Run, bool]:
    """A run the actor may rate as the runs API's rating allows it (the person it served, or a
    deployment manager: `run_may_act`), and whether they may read its transcript (else they
    are not shown its skills). Who may read it but not rate it is refused (403) before the
    body is read; anyone else gets 404."""
    run = Run.objects.restrict(actor, "view").filter(pk=run_id).first()
    readable = (
        run is not None and transcripts_readable(actor, Run.objects.filter(pk=run.pk)).exists()
    )
    may_act = run is not None and run_may_act(actor, run)
    if not (readable or may_act):
        raise NotFound(_("No such run."), code="run_not_found")
    if not may_act:
        raise NotPermitted(
            _("Only the person the run served, or a deployment manager, may do this.")
        )
    return run, readable
