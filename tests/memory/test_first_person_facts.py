"""A plain first-person fact ("I work from the Hangzhou office on Fridays.", "我周五在杭州办公室
上班。") stated through any API that accepts one (MemOS add/message, Mem0 add, the REST memories
API, the MCP memory_add tool) is kept by the offline extractor and found by every search surface
(MemOS, Mem0, REST, MCP memory_search), in English and Chinese; questions, requests and passing
remarks are not kept."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from cadre.mcp_server import tools as mcp_tools
from cadre.memory.extraction import RuleExtractor
from cadre.memory.models import Memory
from cadre.tenancy import services as tenancy
from cadre.tenancy.actors import api_key_actor, member_actor

pytestmark = pytest.mark.django_db

SCOPES = ["memory:read", "memory:write"]

# (fact stated, a question it answers) — each question shares words with its fact only.
FACTS = {
    "en": [
        ("I work from the Hangzhou office on Fridays.", "Which office on Fridays?"),
        ("My manager is Li Wei.", "Who is my manager?"),
        ("I speak German and French with customers.", "Which languages do I speak?"),
    ],
    "zh": [
        ("我周五在杭州办公室上班。", "周五在哪个办公室？"),
        ("我的经理是李伟。", "我的经理是谁？"),
        ("我负责华东区的客户。", "我负责哪个区域的客户？"),
    ],
}


class Clients:
    """One API key of Alice's, spoken over REST (Bearer), Mem0 and MemOS (Token) and MCP."""

    def __init__(self, member):
        api_key, secret = tenancy.api_key_create(
            actor=member_actor(member), name="every api", scopes=SCOPES
        )
        self.rest, self.compat = APIClient(), APIClient()
        self.rest.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
        self.compat.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
        self.mcp = api_key_actor(api_key)
        self.email = member.email


@pytest.fixture
def apis(alice):
    return Clients(alice)


def _write_memos(apis, text):
    response = apis.compat.post(
        "/memos/add/message",
        {"user_id": apis.email, "messages": [{"role": "user", "content": text}]},
        format="json",
    )
    assert response.status_code == 200 and response.json()["code"] == 0, response.content


def _write_mem0(apis, text):
    response = apis.compat.post(
        "/mem0/v3/memories/add/",
        {"user_id": apis.email, "messages": [{"role": "user", "content": text}]},
        format="json",
    )
    assert response.status_code == 200, response.content


def _write_rest(apis, text):
    response = apis.rest.post(
        "/api/v1/memories/",
        {"scope": "user", "messages": [{"role": "user", "content": text}]},
        format="json",
    )
    assert response.status_code == 201, response.content
    assert response.json()["candidates"] == 1


def _write_mcp(apis, text):
    mcp_tools.memory_add(apis.mcp, client="test", content=text, scope="user")


def _search_memos(apis, query):
    response = apis.compat.post(
        "/memos/search/memory", {"user_id": apis.email, "query": query}, format="json"
    )
    data = response.json()["data"]
    return [hit["memory_value"] for hit in data["memory_detail_list"]]


def _search_mem0(apis, query):
    response = apis.compat.post(
        "/mem0/v3/memories/search/", {"user_id": apis.email, "query": query}, format="json"
    )
    return [hit["memory"] for hit in response.json()["results"]]


def _search_rest(apis, query):
    response = apis.rest.post("/api/v1/memories/search/", {"query": query}, format="json")
    return [hit["memory"]["content"] for hit in response.json()["hits"]]


def _search_mcp(apis, query):
    return [
        hit["memory"]["content"] for hit in mcp_tools.memory_search(apis.mcp, query=query)["hits"]
    ]


WRITERS = {"memos": _write_memos, "mem0": _write_mem0, "rest": _write_rest, "mcp": _write_mcp}
SEARCHES = {"memos": _search_memos, "mem0": _search_mem0, "rest": _search_rest, "mcp": _search_mcp}


@pytest.mark.parametrize("language", sorted(FACTS))
@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_first_person_fact_is_kept_and_found_through_every_api(apis, writer, language):
    for fact, _ in FACTS[language]:
        WRITERS[writer](apis, fact)
    assert sorted(Memory.objects.values_list("content", flat=True)) == sorted(
        fact for fact, _ in FACTS[language]
    )
    for surface, search in SEARCHES.items():
        for fact, question in FACTS[language]:
            found = search(apis, question)
            assert found and found[0] == fact, (surface, question, found)


@pytest.mark.parametrize(
    "text",
    [
        "I work from the Hangzhou office on Fridays.",
        "My manager is Li Wei.",
        "I'm vegetarian.",
        "Our office is in Porto.",
        "I report to the regional director.",
        "我周五在杭州办公室上班。",
        "我的经理是李伟。",
        "我们公司在深圳。",
        "我来自杭州。",
    ],
)
def test_rules_keep_a_plain_first_person_fact(text):
    [candidate] = RuleExtractor().extract([{"role": "user", "content": text}])
    assert (candidate.kind, candidate.content) == ("fact", text)
    assert candidate.attributes["rule"] == "first_person"


@pytest.mark.parametrize(
    "text",
    [
        "Which office on Fridays?",
        "Do I work on Fridays?",
        "I need you to draft an email to the team.",
        "I want a summary of the Q3 report.",
        "I'd like a table.",
        "I think it is fine.",
        "I see.",
        "I'm not sure.",
        "I have a meeting today.",
        "I was wondering about the budget.",
        "My desk phone, can you look it up?",
        "周五在哪个办公室？",
        "我在哪个办公室上班？",
        "我想要一份总结。",
        "帮我写个邮件。",
        "我知道了。",
        "我今天请假。",
        "我刚到。",
    ],
)
def test_rules_keep_no_question_request_or_passing_remark(text):
    assert RuleExtractor().extract([{"role": "user", "content": text}]) == []
