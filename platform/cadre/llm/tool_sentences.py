"""A tool call's result as a sentence for the person the agent serves: "Remembered this for
you.", "Sent to Alice and Bob.", "Could not send: no IM connector is set up." — never the
result's JSON, memory ids or scope keys (those stay in the transcript and the audit log, for
those who may read them). The offline model replies with these sentences, and the web chat
says a failed effect with them."""

from __future__ import annotations

import json
import re

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

# What a tool does, as the end of "Could not …": a tool not listed is named as it is.
# Whole sentences per tool, so that each language words them its own way.
FAILURES = {
    "im_send": gettext_lazy("Could not send: %(reason)s."),
    "memory_write": gettext_lazy("Could not remember this: %(reason)s."),
    "memory_search": gettext_lazy("Could not search memory: %(reason)s."),
    "task_create": gettext_lazy("Could not create the task: %(reason)s."),
    "http_request": gettext_lazy("Could not fetch that: %(reason)s."),
    "notify_subscribers": gettext_lazy("Could not publish that: %(reason)s."),
    "delegate": gettext_lazy("Could not ask the other agent: %(reason)s."),
    "await_event": gettext_lazy("Could not wait for that: %(reason)s."),
}
MEMORY_SCOPES = {
    "user": gettext_lazy("Remembered this for you."),
    "agent": gettext_lazy("Remembered this."),
    "position": gettext_lazy("Remembered this for everyone in your role."),
    "department": gettext_lazy("Remembered this for your department."),
    "organization": gettext_lazy("Remembered this for the whole organization."),
}
# The delivery's own words for "no connector" (cadre.agents.runtime.records.delivery and the
# connectors' router) -> what a person can act on.
_NO_CONNECTOR = re.compile(r"^no connector for channel\b.*$|^no active \w+ connector\b.*$", re.S)
_UNKNOWN_GROUP = re.compile(r"^no connector knows group (?P<group>'[^']*'|\S+).*$", re.S)
SHOWN_TEXT_CHARS = 300


def _clip(text: str, limit: int = SHOWN_TEXT_CHARS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def reason_sentence(reason: str) -> str:
    """Why an effect failed, in words a person can act on (no channel names or codes)."""
    reason = str(reason or "").strip().rstrip(".")
    if not reason:
        return _("it was not delivered")
    if _NO_CONNECTOR.match(reason):
        return _("no IM connector is set up")
    if found := _UNKNOWN_GROUP.match(reason):
        return _("no IM connector knows the group %(group)s") % {
            "group": _group_name(found["group"].strip(chr(39)))
        }
    return _clip(reason)


def failure_sentence(tool: str, reason: str) -> str:
    """ "Could not send: no IM connector is set up." """
    sentence = FAILURES.get(tool)
    if sentence is None:
        return _("Could not finish %(tool)s: %(reason)s.") % {
            "tool": tool,
            "reason": reason_sentence(reason),
        }
    return str(sentence) % {"reason": reason_sentence(reason)}


def _group_name(raw: str) -> str:
    """`group:all-staff` names the group "All staff"; a platform's chat id stays as it is."""
    name = str(raw).removeprefix("group:")
    if ":" in name or not name.replace("-", "").replace("_", "").isalnum():
        return name
    words = name.replace("_", " ").replace("-", " ").strip()
    return words[:1].upper() + words[1:] if words.islower() else words


def _people(count: int) -> str:
    return ngettext("%(count)s person", "%(count)s people", count) % {"count": count}


def _names(names: list[str]) -> str:
    if len(names) <= 1:
        return "".join(names)
    if len(names) == 2:
        return _("%(first)s and %(second)s") % {"first": names[0], "second": names[1]}
    if len(names) == 3:
        return _("%(first)s, %(second)s and %(third)s") % {
            "first": names[0],
            "second": names[1],
            "third": names[2],
        }
    return ngettext(
        "%(first)s, %(second)s and %(count)s other",
        "%(first)s, %(second)s and %(count)s others",
        len(names) - 2,
    ) % {"first": names[0], "second": names[1], "count": len(names) - 2}


def _recipients(recipients: list) -> str:
    """Who a message went to: members by name, a group by its name and, when the result
    counted them, how many people it reached."""
    members = [item for item in recipients if isinstance(item, dict) and "member" in item]
    groups = [item for item in recipients if isinstance(item, dict) and "group" in item]
    parts = []
    if members:
        parts.append(_names([str(item.get("name") or _("a colleague")) for item in members]))
    for group in groups:
        name = _group_name(group["group"])
        counts = [group.get(key) for key in ("people", "members", "count")]
        count = next((value for value in counts if isinstance(value, int)), None)
        parts.append(
            _("%(people)s in %(group)s") % {"people": _people(count), "group": name}
            if count is not None
            else name
        )
    return _names(parts) if parts else _("no one")


def _im_send(data: dict) -> str:
    if data.get("status") == "failed":
        return failure_sentence("im_send", data.get("reason", ""))
    to = _recipients(data.get("recipients") or [])
    if data.get("status") == "queued":
        return _("Sending to %(recipients)s.") % {"recipients": to}
    return _("Sent to %(recipients)s.") % {"recipients": to}


def _memory_write(data: dict) -> str:
    scope = str(data.get("scope") or "").partition(":")[0]
    return str(MEMORY_SCOPES.get(scope, MEMORY_SCOPES["agent"]))


def _memory_search(data: dict) -> str:
    hits = data.get("memories") or []
    if not hits:
        return _("I found nothing in memory about that.")
    # Quoted exactly (each cut at 160): deleting a memory finds, and redacts, its copy here.
    return _("From memory: %(memories)s") % {
        "memories": " | ".join(str(hit.get("content", ""))[:160] for hit in hits[:3])
    }


def _task_create(data: dict) -> str:
    task = data.get("task") if isinstance(data.get("task"), dict) else data  # a recorded result
    title = _clip(str(task.get("title") or ""), 200)
    due = str(task.get("due_at") or "")[:16].replace("T", " ")
    if title and due:
        return _("Added a task: %(title)s, due %(due)s.") % {"title": title, "due": due}
    if title:
        return _("Added a task: %(title)s.") % {"title": title}
    if due:
        return _("Added the task, due %(due)s.") % {"due": due}
    return _("Added the task.")


def _readable_body(body: str) -> str:
    """What a fetched body says, for a person: its text, a JSON object's fields as
    "name: value", nothing of a page's markup or a structure without plain fields."""
    body = " ".join(body.split())
    if body.startswith("<"):
        return ""
    if body[:1] in "{[":
        try:
            value = json.loads(body)
        except ValueError:
            return ""
        if not isinstance(value, dict):
            return ""
        return "; ".join(
            f"{key}: {item}"
            for key, item in value.items()
            if isinstance(item, str | int | float) and not isinstance(item, bool)
        )
    return body


def _http_request(data: dict) -> str:
    status = data.get("status")
    if isinstance(status, int) and 200 <= status < 400:
        body = _readable_body(str(data.get("body") or ""))
        if body:
            return _("Fetched it (the site answered %(status)s): %(body)s") % {
                "status": status,
                "body": _clip(body, 300),
            }
        return _("Fetched it (the site answered %(status)s).") % {"status": status}
    return _("The site answered with an error (%(status)s).") % {"status": status}


def _notify_subscribers(data: dict) -> str:
    delivered = data.get("delivered") or []
    count = len(delivered) if isinstance(delivered, list) else int(delivered or 0)
    return _("Published on %(topic)s to %(count)s subscriber(s).") % {
        "topic": data.get("topic"),
        "count": count,
    }


def _delegate(data: dict) -> str:
    if not data.get("reply"):
        return _("Asked the other agent; it has not answered.")
    return _("The other agent answered: %(reply)s") % {"reply": data["reply"]}


def _await_event(data: dict) -> str:
    event = data.get("event") if isinstance(data.get("event"), dict) else data
    if event.get("timeout"):
        return _("Waited, but the event did not come in time.")
    plain = [(key, value) for key, value in event.items() if not isinstance(value, dict | list)]
    told = "; ".join(f"{key}: {_clip(value, 80)}" for key, value in plain)
    if told:
        return _("The event arrived (%(event)s).") % {"event": _clip(told, 200)}
    return _("The event arrived.")


SENTENCES = {
    "await_event": _await_event,
    "im_send": _im_send,
    "memory_write": _memory_write,
    "memory_search": _memory_search,
    "task_create": _task_create,
    "http_request": _http_request,
    "notify_subscribers": _notify_subscribers,
    "delegate": _delegate,
}


def tool_sentence(tool: str, result) -> str:
    """The sentence for one tool call's result (the dict the tool returned, or the runtime's
    `{"error", "message"}` of a call that failed)."""
    if isinstance(result, dict) and result.get("error"):
        return failure_sentence(tool, result.get("message") or str(result["error"]))
    sentence = SENTENCES.get(tool)
    if sentence is not None and isinstance(result, dict):
        return sentence(result)
    # Another tool (an MCP server's, a skill's): its own words when it has some.
    if isinstance(result, str) and result.strip():
        return f"{tool}: {_clip(result)}"
    if isinstance(result, dict):
        for key in ("text", "message", "summary", "content", "reply"):
            if isinstance(result.get(key), str) and result[key].strip():
                return f"{tool}: {_clip(result[key])}"
    return _("Done: %(tool)s.") % {"tool": tool}


def _quoted(text, limit: int = 200) -> str:
    return f"“{_clip(text, limit)}”"


def request_sentence(tool: str, arguments: dict) -> str:
    """What a tool call asks to do, for the person asked to confirm it ("Send “hello” to All
    staff."); "" for a tool whose arguments have no plain reading (its JSON stays shown)."""
    arguments = arguments if isinstance(arguments, dict) else {}
    if tool == "im_send" and arguments.get("text"):
        to = [str(item) for item in arguments.get("to") or []]
        names = [_group_name(item) if item.startswith("group:") else item for item in to]
        return _("Send %(text)s to %(recipients)s.") % {
            "text": _quoted(arguments["text"]),
            "recipients": _names(names) or _("no one"),
        }
    if tool == "task_create" and arguments.get("title"):
        due = str(arguments.get("due_at") or "")[:16].replace("T", " ")
        title = _quoted(arguments["title"])
        if due:
            return _("Create the task %(title)s, due %(due)s.") % {"title": title, "due": due}
        return _("Create the task %(title)s.") % {"title": title}
    if tool == "memory_write" and arguments.get("content"):
        return _("Remember %(content)s.") % {"content": _quoted(arguments["content"])}
    if tool == "http_request" and arguments.get("url"):
        return f"{arguments.get('method', 'GET')} {_clip(arguments['url'], 200)}."
    return ""
