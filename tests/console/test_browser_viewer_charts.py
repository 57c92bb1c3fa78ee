# ruff: noqa: F811 - the fixtures imported from other test modules are parameters here
"""The Memory Viewer's charts as a person sees them at 1400x900 on first load (no resize):
each canvas as wide as its box, the timeline's axis fitted to today's memories, the map and
the timeline counting the same memories, the heatmap's labels apart and its rows named.
Screenshots in var/screenshots/viewer-charts-*.png (git-ignored)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from cadre.memory import embeddings, services
from cadre.memory.models import ContextRecord, ContextRecordItem, Memory, MemoryMap
from cadre.viewer import vector_map
from tests.conftest import PASSWORD, actor_for
from tests.console.test_browser_chat import (  # noqa: F401 - fixtures and helpers
    browser_page,
    chromium,
    expect,
    live_server_url,
)
from tests.console.test_browser_csp import SHOTS, _sign_in, page  # noqa: F401 - fixture

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
VIEWPORT = {"width": 1400, "height": 900}
TEXTS = [
    ("preference", "Bob prefers green tea in the afternoon"),
    ("preference", "Bob likes his reports as bullet points"),
    ("fact", "The Shanghai office is on the twelfth floor"),
    ("fact", "Bob's manager is Li Wei"),
    ("requirement", "Expense reports are due on Friday"),
    ("requirement", "Travel above 5000 needs a director's approval"),
    ("fact", "The VPN needs the new client since March"),
    ("preference", "Bob wants meeting notes within a day"),
    ("fact", "The Berlin office opens at eight"),
    ("requirement", "Invoices above 1000 need two signatures"),
    ("fact", "The team stand-up is at half past nine"),
    ("preference", "Bob reads summaries before details"),
]

# Every chart's drawing width (ECharts' and its canvas's, in CSS pixels) beside its box's.
WIDTHS_JS = """() => Object.entries(window.cadreViewer.charts)
  .filter(([, chart]) => !chart.isDisposed())
  .map(([key, chart]) => {
    const box = chart.getDom();
    const canvas = box.querySelector("canvas");
    return { key, box: box.clientWidth, chart: chart.getWidth(),
             canvas: canvas ? Math.round(canvas.getBoundingClientRect().width) : 0 };
  })"""

# The timeline's time axis (ms) and, in page pixels, where its points and bars fall.
TIMELINE_JS = """() => {
  const chart = window.cadreViewer.charts.main;
  const axis = chart.getModel().getComponent("xAxis", 0).axis;
  const [min, max] = axis.scale.getExtent();
  const grid = chart.getModel().getComponent("grid", 0).coordinateSystem.getRect();
  const series = chart.getOption().series;
  const points = series.find((s) => s.name === "memories").data
    .map((d) => chart.convertToPixel({ xAxisIndex: 1, yAxisIndex: 1 }, d.value.slice(0, 2))[0]);
  const bars = series.filter((s) => s.type === "bar")
    .flatMap((s) => s.data.filter((d) => d[1] > 0).map((d) => ({ t: Date.parse(d[0]), n: d[1] })));
  return { min, max, gridLeft: grid.x, gridWidth: grid.width, points, bars };
}"""

# Every text ECharts drew on a chart, with its box in the chart's pixels.
TEXTS_JS = """(key) => {
  const chart = window.cadreViewer.charts[key];
  const boxes = [];
  chart.getZr().storage.getDisplayList(true).forEach((el) => {
    if (el.type !== "tspan" || el.ignore || el.invisible || !el.style.text) return;
    const rect = el.getBoundingRect().clone();
    rect.applyTransform(el.getComputedTransform());
    if (rect.width > 0 && rect.height > 0)
      boxes.push({ text: el.style.text, x: rect.x, y: rect.y, w: rect.width, h: rect.height });
  });
  return boxes;
}"""


def _memories(member, *, minutes: int, texts=TEXTS) -> list[Memory]:
    """Memories written over the last `minutes` (today's, as a first chat leaves them), each
    with its vector."""
    actor = actor_for(member)
    written = []
    for index, (kind, text) in enumerate(texts):
        memory = services.memory_add(
            actor=actor, scope="user", kind=kind, content=text, source_kind="user_statement"
        )
        moment = timezone.now() - timedelta(minutes=minutes * (len(texts) - index) / len(texts))
        Memory.objects.filter(pk=memory.pk).update(created_at=moment, valid_from=moment)
        written.append(memory)
    embeddings.embed_memories(written, embeddings.active_model())
    return written


def _compute_maps() -> int:
    """Compute the maps the viewer asked for, as the map task would; how many."""
    pending = list(MemoryMap.objects.filter(status=MemoryMap.Status.COMPUTING))
    for memory_map in pending:
        vector_map.map_compute(memory_map)
    return len(pending)


def _ask_for_map(page) -> None:
    """Open the map page first: it asks for the map and says it is being computed."""
    page.goto("/memory/map/")
    expect(page.locator("[data-viewer-status]")).to_contain_text("Computing the map")
    assert _compute_maps() == 1


def _open(page, path: str):
    page.goto(path)
    expect(page.locator("#memory-viewer[data-ready=true]")).to_be_attached()
    expect(page.locator("[data-viewer-chart] canvas, [data-figure] canvas").first).to_be_visible()


def _shot(page, name: str) -> None:
    # After measuring: a full-page screenshot resizes the viewport, which would hide a chart
    # drawn at the wrong width by redrawing it.
    page.screenshot(path=str(SHOTS / f"viewer-charts-{name}.png"), full_page=True)


def _overlaps(boxes: list[dict]) -> list[tuple[str, str]]:
    found = []
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            if (
                a["x"] < b["x"] + b["w"]
                and b["x"] < a["x"] + a["w"]
                and a["y"] < b["y"] + b["h"]
                and b["y"] < a["y"] + a["h"]
            ):
                found.append((a["text"], b["text"]))
    return found


@pytest.fixture
def used(bob):
    """Bob's twelve memories of the last 40 minutes, five of them used by model calls today."""
    memories = _memories(bob, minutes=40)
    record = ContextRecord.objects.create(
        organization=bob.organization, kind=ContextRecord.Kind.MODEL_CALL, run_id="1"
    )
    for rank, memory in enumerate(memories[:5], start=1):
        ContextRecordItem.objects.create(
            context=record, memory=memory, memory_version=1, rank=rank, score=1.0
        )
    return memories


def test_each_chart_is_as_wide_as_its_box_on_first_load(page, bob, used):
    page.set_viewport_size(VIEWPORT)
    assert _sign_in(page, bob.user.email, PASSWORD).status == 200
    _ask_for_map(page)
    for name in ("timeline", "map", "heatmap", "quality"):
        _open(page, f"/memory/{name}/")
        widths = page.evaluate(WIDTHS_JS)
        assert widths, name
        for chart in widths:
            # The main charts fill the card (1,074 px wide at this viewport, not ECharts'
            # 100 px fallback); each canvas is exactly its box's width.
            assert chart["box"] > 200, (name, chart)
            assert chart["chart"] == chart["canvas"] == chart["box"], (name, chart)
        main = [chart for chart in widths if chart["key"] == "main"]
        assert name == "quality" or main[0]["box"] > 1000, (name, widths)
        _shot(page, name)


def test_the_timeline_axis_fits_todays_memories(page, bob, used):
    page.set_viewport_size(VIEWPORT)
    assert _sign_in(page, bob.user.email, PASSWORD).status == 200
    _open(page, "/memory/timeline/")
    expect(page.locator("[data-viewer-status]")).to_contain_text(
        "12 memories in range (written in it, not deleted)"
    )
    drawn = page.evaluate(TIMELINE_JS)
    _shot(page, "timeline")
    span_minutes = (drawn["max"] - drawn["min"]) / 60_000
    # Forty minutes of memories on an axis of about as long (not 30 days).
    assert 40 <= span_minutes <= 60, drawn
    left, width = drawn["gridLeft"], drawn["gridWidth"]
    points = drawn["points"]
    assert len(points) == 12
    # The points spread over the chart rather than sitting on its right edge.
    assert min(points) < left + width * 0.2, drawn
    assert max(points) - min(points) > width * 0.7, drawn
    assert max(points) < left + width, drawn
    # Every bar stands inside the axis (the current hour's bar was past its end) and they
    # count all twelve.
    assert all(drawn["min"] <= bar["t"] <= drawn["max"] for bar in drawn["bars"]), drawn
    assert sum(bar["n"] for bar in drawn["bars"]) == 12, drawn


def test_the_map_and_the_timeline_count_the_same_memories(page, bob):
    page.set_viewport_size(VIEWPORT)
    _memories(bob, minutes=30, texts=TEXTS[:3])
    assert _sign_in(page, bob.user.email, PASSWORD).status == 200
    _ask_for_map(page)
    _open(page, "/memory/map/")
    status = page.locator("[data-viewer-status]")
    expect(status).to_contain_text("3 active memories on the map")
    _shot(page, "map-before")

    # A conversation later: nine more memories. The map first says it is behind, then counts
    # the twelve the timeline counts.
    _memories(bob, minutes=10, texts=TEXTS[3:])
    _open(page, "/memory/timeline/")
    expect(page.locator("[data-viewer-status]")).to_contain_text(
        "12 memories in range (written in it, not deleted)"
    )
    _open(page, "/memory/map/")
    expect(status).to_contain_text("recomputing")
    assert _compute_maps() == 1
    expect(status).to_contain_text("12 active memories on the map")
    expect(status).not_to_contain_text("recomputing")
    assert (
        len(
            page.evaluate(
                "() => window.cadreViewer.charts.main.getOption().series"
                ".filter((s) => s.name !== 'cluster names')"
                ".flatMap((s) => s.data)"
            )
        )
        == 12
    )
    _shot(page, "map-after")


def test_the_heatmap_labels_stand_apart_and_rows_carry_names(page, bob, used):
    page.set_viewport_size(VIEWPORT)
    assert _sign_in(page, bob.user.email, PASSWORD).status == 200
    _open(page, "/memory/heatmap/")
    for key in ("main", "viewerMemories"):
        boxes = page.evaluate(TEXTS_JS, key)
        assert len(boxes) > 5, (key, boxes)
        assert _overlaps(boxes) == [], key
    rows = page.evaluate("() => window.cadreViewer.charts.viewerMemories.getOption().yAxis[0].data")
    assert len(rows) == 5
    # Bob reads his own memories: the scope is "You", and each row names its memory.
    assert all(row.startswith("You: ") and not row.startswith("#") for row in rows), rows
    texts = {text for _, text in TEXTS}
    assert all(row.removeprefix("You: ") in texts for row in rows), rows
    _shot(page, "heatmap")
