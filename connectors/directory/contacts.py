"""IM contact directories: what every platform's `directory.py` reads, in Cadre's terms.

A platform's ``connectors/<name>/directory.py`` defines ``DIRECTORY``, a subclass of its own
transport (so tokens, retries with backoff on the platform's rate-limit codes and token refresh
are the transport's) that lists departments and users page by page and parses the platform's
contact-change events. Everything it returns is normalized into `DirectoryDepartment` and
`DirectoryUser`; the sync itself (`connectors.directory.sync`) knows no platform.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from connectors.base import registry
from connectors.base.transport import RateLimited, TokenInvalid, TransportError

# The member fields a directory provides, in the order the conflict queue shows them.
SYNCED_FIELDS = ("display_name", "email", "mobile", "employee_no", "title", "department", "manager")


class DirectoryRefused(Exception):
    """The platform refused the directory read: the run stops and writes nothing.

    `code` is Cadre's (permission_denied, rate_limited, credentials_invalid, platform_error);
    `platform_code` the platform's own error code, shown as is so an admin can look it up.
    """

    def __init__(self, code: str, message: str, *, platform_code: str = ""):
        super().__init__(message)
        self.code = code
        self.platform_code = platform_code

    def as_dict(self) -> dict:
        return {"code": self.code, "platform_code": self.platform_code, "message": str(self)}


class PermissionDenied(TransportError):
    """The app lacks the contact scope, or the department is outside its visibility."""

    def __init__(self, message: str, *, platform_code: str = ""):
        super().__init__(message, retryable=False)
        self.platform_code = platform_code


@dataclass
class DirectoryDepartment:
    id: str
    name: str
    parent_id: str = ""  # "" for a department directly under the company (the root)
    leader_user_id: str = ""


@dataclass
class DirectoryUser:
    id: str
    name: str
    email: str = ""
    mobile: str = ""
    employee_no: str = ""
    title: str = ""
    department_ids: list[str] = field(default_factory=list)
    leader_user_id: str = ""
    active: bool = True

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class DirectorySnapshot:
    """A whole directory, read to the end before anything is written."""

    departments: list[DirectoryDepartment] = field(default_factory=list)
    users: list[DirectoryUser] = field(default_factory=list)


@dataclass
class ContactChange:
    """One contact-change event: what changed, and the record when the event carries it."""

    kind: str  # user_created, user_updated, user_deleted, department_created/updated/deleted
    object_id: str
    user: DirectoryUser | None = None
    department: DirectoryDepartment | None = None

    @property
    def is_user(self) -> bool:
        return self.kind.startswith("user_")


Progress = Callable[[str, int, int], None]  # (phase, done, total)


def refused(error: TransportError) -> DirectoryRefused:
    """A transport failure as the refusal a run records."""
    if isinstance(error, PermissionDenied):
        return DirectoryRefused(
            "permission_denied",
            f"The platform refused access to the contact directory: {error}. Grant the app "
            "the contact read permission and make the whole directory visible to it.",
            platform_code=error.platform_code,
        )
    code = str(error).split(":", 1)[0].split(" ")[-1]
    if isinstance(error, RateLimited):
        return DirectoryRefused(
            "rate_limited",
            f"The platform kept rate-limiting the directory read after retries: {error}.",
            platform_code=code,
        )
    if isinstance(error, TokenInvalid):
        return DirectoryRefused(
            "credentials_invalid", f"The platform rejected the app's credentials: {error}."
        )
    return DirectoryRefused("platform_error", f"The directory read failed: {error}.")


class DirectoryClient:
    """What a platform's DIRECTORY offers (mixed into its transport)."""

    # A directory read is many calls in a row: more retries of a rate limit than a send.
    max_attempts = 6

    def read_directory(self, progress: Progress | None = None) -> DirectorySnapshot:
        raise NotImplementedError

    def read_user(self, user_id: str) -> DirectoryUser | None:
        """One user, fresh from the platform (None: gone)."""
        raise NotImplementedError

    def read_department(self, department_id: str) -> DirectoryDepartment | None:
        raise NotImplementedError


def directory_client(connector, **kwargs) -> DirectoryClient:
    """The connector's directory client; LookupError for a platform without a directory."""
    if not supports_directory(connector.platform):
        raise LookupError(f"{connector.platform} has no contact directory to sync")
    return registry()[connector.platform].part("directory").DIRECTORY(connector, **kwargs)


def supports_directory(platform: str) -> bool:
    platform_class = registry().get(platform)
    return platform_class is not None and platform_class.has_part("directory")
