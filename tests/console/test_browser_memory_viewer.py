# ruff: noqa: F811 - the fixtures imported from other test modules are parameters here
"""The Memory Viewer in a real browser (Debian's Chromium, under the CSP): each page draws its
chart on a canvas and clicking a point opens that memory. Screenshots in
var/screenshots/viewer-*.png (git-ignored)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, time, timedelta

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
TEXTS = [
    ("preference", "Bob prefers green tea in the afternoon"),
    ("preference", "Bob likes his reports as bullet points"),
    ("fact", "The Shanghai office is on the twelfth floor"),
    ("fact", "Bob's manager is Li Wei"),
    ("requirement", "Expense reports are due on Friday"),
    ("requirement", "Travel above 5000 needs a director's approval"),
]

# The pixel of a series' data item on its chart, and that item's memory id. For the map, the
# point farthest from its nearest neighbour, so the click cannot land on another memory.
POINT_JS = """([chartKey, seriesName]) => {
  const chart = window.cadreViewer.charts[chartKey];
  const series = chart.getOption().series;
  let candidates = [];
  series.forEach((s, index) => {
    if (seriesName && s.name !== seriesName) return;
    (s.data || []).forEach((d) => { if (d && d.id) candidates.push({ index, d }); });
  });
  const pixel = (c) => chart.convertToPixel({ seriesIndex: c.index }, c.d.value.slice(0, 2));
  const placed = candidates.map((c) => ({ c, p: pixel(c) }));
  const gap = (a) => Math.min(...placed.filter((b) => b !== a)
    .map((b) => Math.hypot(a.p[0] - b.p[0], a.p[1] - b.p[1])), 1e9);
  placed.sort((a, b) => gap(b) - gap(a));
  const best = placed[0];
  chart.getDom().scrollIntoView({ block: "center" });  // the mouse clicks in the viewport
  const box = chart.getDom().getBoundingClientRect();
  return { x: box.left + best.p[0], y: box.top + best.p[1], id: best.c.d.id };
}"""

# The x extents (ms) of the timeline's axes before and after zooming to the last tenth.
ZOOM_JS = """() => {
  const charts = window.cadreViewer.charts;
  const extent = (chart, index) =>
    chart.getModel().getComponent("xAxis", index).axis.scale.getExtent();
  const full = extent(charts.main, 0);
  charts.main.dispatchAction({ type: "dataZoom", start: 90, end: 100 });
  return [full, extent(charts.main, 0), extent(charts.main, 1), extent(charts.viewerSpans, 0)]
    .map((e) => e.map(Math.round));
}"""


@pytest.fixture
def viewer_data(bob):
    actor = actor_for(bob)
    memories = []
    for hours, (kind, text) in enumerate(TEXTS):
        memory = services.memory_add(
            actor=actor, scope="user", kind=kind, content=text, source_kind="user_statement"
        )
        moment = timezone.now() - timedelta(hours=10 * hours)
        Memory.objects.filter(pk=memory.pk).update(created_at=moment, valid_from=moment)
        memories.append(memory)
    embeddings.embed_memories(memories, embeddings.active_model())
    for day in range(3):
        record = ContextRecord.objects.create(
            organization=bob.organization,
            kind=ContextRecord.Kind.MODEL_CALL,
            run_id=str(day + 1),
            created_at=timezone.now() - timedelta(days=day),
        )
        for rank, memory in enumerate(memories[: 3 + day], start=1):
            ContextRecordItem.objects.create(
                context=record, memory=memory, memory_version=1, rank=rank, score=1.0
            )
    # The map the page asks for (its default selection), computed as the task would.
    keys = vector_map.map_scope_keys(actor, None)
    params = vector_map.map_params()
    model = embeddings.active_model()
    memory_map = MemoryMap.objects.create(
        organization=bob.organization,
        selection=vector_map.selection_hash(bob.organization.pk, keys, None, model.pk, params),
        scope_keys=keys,
        model=model,
        params=params,
    )
    vector_map.map_compute(memory_map)
    return memories


def _open(page, path: str, name: str):
    page.goto(path)
    expect(page.locator("#memory-viewer[data-ready=true]")).to_be_attached()
    expect(page.locator("[data-viewer-chart] canvas, [data-figure] canvas").first).to_be_visible()
    page.screenshot(path=str(SHOTS / f"viewer-{name}.png"), full_page=True)


def _click_point(page, chart: str, series: str | None = None) -> None:
    point = page.evaluate(POINT_JS, [chart, series])
    page.mouse.click(point["x"], point["y"])
    page.wait_for_url(re.compile(rf"/memory/{point['id']}/$"))
    expect(page.get_by_test_id("trail")).to_be_visible()


def _were_valid(count: int) -> str:
    """The status line's count as the page words it (one memory "was" valid)."""
    return f"{count} {'was' if count == 1 else 'were'} valid"


def test_each_viewer_page_draws_and_a_point_opens_its_memory(page, bob, viewer_data):
    assert _sign_in(page, bob.user.email, PASSWORD).status == 200
    _open(page, "/memory/timeline/", "timeline")
    expect(page.locator("[data-viewer-status]")).to_contain_text(
        "6 memories in range (written in it, not deleted)"
    )
    # Zoomed to the last tenth of the range (as the slider does): the counts, the points and
    # the validity spans show the same stretch of time.
    extents = page.evaluate(ZOOM_JS)
    full, counts, points, spans = extents
    assert counts == points == spans, extents
    assert abs((counts[1] - counts[0]) - (full[1] - full[0]) / 10) < 1000, extents
    # Back to the whole range (fitted to the data: the last tenth holds the newest only).
    page.evaluate(
        "() => window.cadreViewer.charts.main"
        ".dispatchAction({ type: 'dataZoom', start: 0, end: 100 })"
    )
    _click_point(page, "main", "memories")

    _open(page, "/memory/map/", "map")
    expect(page.locator("[data-viewer-status]")).to_contain_text("6 active memories on the map")
    _click_point(page, "main")
    page.screenshot(path=str(SHOTS / "viewer-map-opened.png"), full_page=True)

    _open(page, "/memory/map/?q=what+tea+does+Bob+drink", "map-query")
    expect(page.locator("[data-viewer-details]")).to_contain_text("green tea")

    _open(page, "/memory/heatmap/", "heatmap")
    expect(page.locator("[data-viewer-details]")).to_contain_text("Hottest")
    # Five memories used, fewer than a list holds: the coldest does not name them again.
    expect(page.locator("[data-viewer-details]")).to_contain_text(
        "Every memory used is listed as hottest."
    )
    _click_point(page, "viewerMemories")

    _open(page, "/memory/quality/", "quality")
    recall = page.locator('[data-figure="recall_hit_rate"]')
    expect(recall).to_contain_text("No signal")
    recall.get_by_text("Definition").click()
    expect(recall).to_contain_text("the share rated a success")
    expect(page.locator('[data-figure="memories_added"] .value')).to_have_text("6")
    page.screenshot(path=str(SHOTS / "viewer-quality-definition.png"), full_page=True)


def test_an_empty_viewer_says_how_memory_arrives(page, alice):
    assert _sign_in(page, alice.user.email, PASSWORD).status == 200
    page.goto("/memory/timeline/")
    expect(page.locator("#memory-viewer[data-ready=true]")).to_be_attached()
    expect(page.locator("[data-viewer-empty]")).to_be_visible()
    expect(page.locator("[data-viewer-empty]")).to_contain_text("POST /api/v1/memories/")
    page.screenshot(path=str(SHOTS / "viewer-empty.png"), full_page=True)


# The real points of the map (not the query, its hits or the cluster names) in page pixels.
MAP_POINTS_JS = """() => {
  const chart = window.cadreViewer.charts.main;
  chart.getDom().scrollIntoView({ block: "center" });
  const box = chart.getDom().getBoundingClientRect();
  const points = [];
  chart.getOption().series.forEach((s, index) => {
    if (["query", "top hits", "cluster names"].includes(s.name)) return;
    (s.data || []).forEach((d) => {
      const p = chart.convertToPixel({ seriesIndex: index }, d.value.slice(0, 2));
      points.push({ id: d.id, x: box.left + p[0], y: box.top + p[1] });
    });
  });
  return points;
}"""


def _first_chart_ms(page) -> int:
    page.wait_for_function("window.cadreViewer && window.cadreViewer.firstChartMs !== null")
    return page.evaluate("window.cadreViewer.firstChartMs")


def test_viewer_timing_box_selection_colours_slider_keyboard_and_print(page, bob, viewer_data):
    assert _sign_in(page, bob.user.email, PASSWORD).status == 200
    timings = {}
    for name in ("timeline", "map", "heatmap", "quality"):
        _open(page, f"/memory/{name}/", name)
        timings[name] = _first_chart_ms(page)
    (SHOTS / "viewer-timings.txt").write_text(
        "".join(
            f"{name} first chart drawn {ms} ms after navigation start\n"
            for name, ms in timings.items()
        )
    )
    print("first chart drawn (ms since navigation start):", timings)

    # Map: colour by kind, then a box drawn with the mouse lists exactly the memories inside.
    _open(page, "/memory/map/", "map")
    page.get_by_label("Colour by").select_option("kind")
    names = page.evaluate(
        "() => window.cadreViewer.charts.main.getOption().series.map((s) => s.name)"
    )
    assert set(names) - {"cluster names"} == {"Preference", "Fact", "Requirement"}
    page.screenshot(path=str(SHOTS / "viewer-map-by-kind.png"), full_page=True)
    page.get_by_label("Colour by").select_option("age")
    names = page.evaluate(
        "() => window.cadreViewer.charts.main.getOption().series.map((s) => s.name)"
    )
    assert set(names) - {"cluster names"} <= {"today", "this week"}
    points = page.evaluate(MAP_POINTS_JS)
    assert len(points) == 6
    xs = sorted(p["x"] for p in points)
    # A box around the left part of the map: between the 3rd and 4th point from the left.
    right = (xs[2] + xs[3]) / 2
    top, bottom = min(p["y"] for p in points) - 12, max(p["y"] for p in points) + 12
    left = xs[0] - 12
    expected = {p["id"] for p in points if left < p["x"] < right and top < p["y"] < bottom}
    assert len(expected) == 3
    # The box the toolbox's rectangle brush draws, given in pixels of the chart.
    page.evaluate(
        """([l, t, r, b]) => {
          const chart = window.cadreViewer.charts.main;
          const box = chart.getDom().getBoundingClientRect();
          const a = chart.convertFromPixel({ gridIndex: 0 }, [l - box.left, b - box.top]);
          const z = chart.convertFromPixel({ gridIndex: 0 }, [r - box.left, t - box.top]);
          chart.dispatchAction({ type: "brush", areas: [{ brushType: "rect", gridIndex: 0,
            coordRange: [[a[0], z[0]], [a[1], z[1]]] }] });
        }""",
        [left, top, right, bottom],
    )
    selection = page.locator("[data-viewer-selection]")
    expect(selection).to_contain_text("Selected (3)")
    listed = {
        int(pk)
        for pk in selection.locator("li").evaluate_all(
            "(items) => items.map((li) => li.dataset.memory)"
        )
    }
    assert listed == expected
    page.screenshot(path=str(SHOTS / "viewer-map-box-selection.png"), full_page=True)

    # Timeline: the as-of slider by keyboard. One day back = the memories written by
    # yesterday 23:59:59 UTC, End = today (all 6), Home = the range's first day (the range
    # fits the data: it starts a little before the oldest memory).
    _open(page, "/memory/timeline/", "timeline")
    slider = page.locator("[data-as-of-slider]")
    slider.focus()
    page.keyboard.press("ArrowLeft")
    yesterday = (timezone.now() - timedelta(days=1)).date()
    cutoff = datetime.combine(yesterday, time.max, tzinfo=UTC)
    valid = sum(
        1
        for m in Memory.objects.filter(pk__in=[m.pk for m in viewer_data])
        if m.created_at <= cutoff
    )
    expect(page.locator("[data-viewer-status]")).to_contain_text(
        f"{_were_valid(valid)} on {yesterday.isoformat()}"
    )
    expect(page.get_by_label("The set as it was on")).to_have_value(yesterday.isoformat())
    faded = page.evaluate(
        """() => window.cadreViewer.charts.main.getOption().series
             .find((s) => s.name === "memories").data.filter((d) => d.itemStyle).length"""
    )
    assert faded == 6 - valid
    page.screenshot(path=str(SHOTS / "viewer-timeline-as-of.png"), full_page=True)
    page.keyboard.press("End")
    expect(page.locator("[data-viewer-status]")).to_contain_text("6 were valid on")
    page.keyboard.press("Home")
    first_day = datetime.fromtimestamp(int(slider.get_attribute("data-since")) / 1000, UTC).date()
    first_cutoff = datetime.combine(first_day, time.max, tzinfo=UTC)
    valid_then = sum(
        1
        for m in Memory.objects.filter(pk__in=[m.pk for m in viewer_data])
        if m.created_at <= first_cutoff
    )
    assert valid_then < 6
    expect(page.locator("[data-viewer-status]")).to_contain_text(
        f"{_were_valid(valid_then)} on {first_day.isoformat()}"
    )

    # Keyboard: from the Show button, Tab reaches the chart's table; Enter opens it; a link
    # in it opens its memory.
    page.get_by_role("button", name="Show").focus()
    for _ in range(12):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.matches('[data-viewer-table] summary')"):
            break
    else:
        raise AssertionError("the data table is not reachable by Tab")
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    target = page.evaluate("document.activeElement.dataset.memory")
    assert target
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(rf"/memory/{target}/$"))

    # Print and the light theme: every page readable, its table opened for paper.
    page.emulate_media(media="print", color_scheme="light")
    for name in ("timeline", "map", "heatmap", "quality"):
        _open(page, f"/memory/{name}/", f"print-{name}")
    page.emulate_media(media="screen")


def test_memory_search_page_shows_why_each_memory_was_retrieved(page, bob, viewer_data):
    assert _sign_in(page, bob.user.email, PASSWORD).status == 200
    page.goto("/memory/search/?q=what+tea+does+Bob+drink&top_k=3")
    hits = page.locator("[data-search-hits] > li")
    expect(hits).to_have_count(3)
    expect(hits.first.locator('[data-why-bar="vector"] .why-bar > span')).to_be_visible()
    expect(hits.first.locator("[data-why-decision]")).to_contain_text("diversity (MMR")
    page.screenshot(path=str(SHOTS / "memory-search-why.png"), full_page=True)
    page.emulate_media(media="print", color_scheme="light")
    page.screenshot(path=str(SHOTS / "memory-search-why-print.png"), full_page=True)
