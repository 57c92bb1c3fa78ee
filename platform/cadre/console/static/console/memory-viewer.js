// The Memory Viewer pages: fetch the viewer API and draw it with ECharts (served from
// static/vendor, no CDN). Charts are exposed on window.cadreViewer for keyboard-free checks.
(function () {
  "use strict";
  const root = document.getElementById("memory-viewer");
  if (!root || !window.echarts) return;
  const page = root.dataset.page;
  const memoryUrl = (id) => root.dataset.memoryUrl.replace("/0/", "/" + id + "/");
  const form = root.querySelector("[data-viewer-filters]");
  const status = root.querySelector("[data-viewer-status]");
  const empty = root.querySelector("[data-viewer-empty]");
  const details = root.querySelector("[data-viewer-details]");
  const charts = {};
  window.cadreViewer = { charts: charts, ready: false };
  const KIND_COLOURS = ["#2453d4", "#1d7f46", "#9a6300", "#c2382f", "#6b4fbb", "#0f7c8c"];
  const base = { aria: { enabled: true }, animation: false, textStyle: { fontFamily: "inherit" } };

  function chart(element) {
    const key = element.dataset.viewerChart !== undefined ? "main" : Object.keys(element.dataset)[0];
    if (charts[key]) charts[key].dispose();
    charts[key] = echarts.init(element, null, { renderer: "canvas" });
    return charts[key];
  }

  function text(tag, value, attrs) {
    const node = document.createElement(tag);
    if (value !== undefined && value !== null) node.textContent = value;
    Object.entries(attrs || {}).forEach(([k, v]) => node.setAttribute(k, v));
    return node;
  }

  function memoryLink(memory, extra) {
    const item = text("li");
    const link = text("a", "#" + memory.id + " " + (memory.preview || ""), { href: memoryUrl(memory.id) });
    item.append(link);
    if (extra) item.append(text("span", " · " + extra, { class: "muted" }));
    return item;
  }

  function list(title, memories, extra) {
    const box = text("div");
    box.append(text("h3", title));
    if (!memories.length) box.append(text("p", "None.", { class: "muted" }));
    const ol = text("ol");
    memories.forEach((m) => ol.append(memoryLink(m, extra ? extra(m) : "")));
    box.append(ol);
    return box;
  }

  function openOnClick(instance) {
    instance.on("click", (event) => {
      const id = event.data && (event.data.id || (Array.isArray(event.data.value) && event.data.value[3]));
      if (id) window.location.href = memoryUrl(id);
    });
  }

  function query() {
    const params = new URLSearchParams();
    new FormData(form).forEach((value, key) => { if (value) params.append(key, value); });
    if (params.get("as_of")) params.set("as_of", params.get("as_of") + "T23:59:59Z");
    return params;
  }

  function showEmpty(isEmpty, message) {
    empty.hidden = !isEmpty;
    root.querySelectorAll(".viewer-chart").forEach((el) => { el.hidden = isEmpty; });
    status.textContent = message || "";
  }

  // --- timeline ---------------------------------------------------------------------------
  function drawTimeline(body) {
    if (!body.points.length && !body.by_event.length) return showEmpty(true, "");
    const kinds = [...new Set(body.by_kind.map((r) => r.kind))];
    const events = [...new Set(body.by_event.map((r) => r.event))];
    const pointKinds = [...new Set(body.points.map((p) => p.kind))];
    // ECharts stacks by position in the data, so every kind gets a value for every bucket.
    const buckets = [...new Set(body.by_kind.map((r) => r.t))].sort();
    const count = (kind, t) => (body.by_kind.find((r) => r.kind === kind && r.t === t) || { count: 0 }).count;
    const series = kinds.map((kind) => ({
      name: "added: " + kind, type: "bar", stack: "kinds", xAxisIndex: 0, yAxisIndex: 0,
      data: buckets.map((t) => [t, count(kind, t)]),
    }));
    events.forEach((event) => series.push({
      name: event, type: "line", xAxisIndex: 0, yAxisIndex: 0, symbolSize: 6,
      data: body.by_event.filter((r) => r.event === event).map((r) => [r.t, r.count]),
    }));
    series.push({
      name: "memories", type: "scatter", xAxisIndex: 1, yAxisIndex: 1, symbolSize: 9,
      data: body.points.map((p) => ({ id: p.id, value: [p.created_at, p.kind, p.preview, p.id] })),
    });
    const main = chart(root.querySelector("[data-viewer-chart]"));
    main.setOption(Object.assign({}, base, {
      color: KIND_COLOURS,
      legend: { type: "scroll", top: 0 },
      tooltip: { trigger: "item", formatter: (p) => p.seriesName === "memories"
        ? "#" + p.value[3] + " " + echarts.format.encodeHTML(p.value[2])
        : echarts.format.encodeHTML(p.seriesName) + ": " + p.value[1] },
      grid: [{ top: 40, height: 200, left: 60, right: 30 }, { top: 290, height: 90, left: 60, right: 30 }],
      xAxis: [{ type: "time", gridIndex: 0 }, { type: "time", gridIndex: 1 }],
      yAxis: [{ type: "value", gridIndex: 0, minInterval: 1 }, { type: "category", gridIndex: 1, data: pointKinds }],
      dataZoom: [{ type: "slider", xAxisIndex: [0, 1], bottom: 8 }, { type: "inside", xAxisIndex: [0, 1] }],
      series: series,
    }));
    openOnClick(main);
    drawSpans(body);
    const total = body.points_total;
    const shown = body.points.length;
    let message = total + " memories in range" + (shown < total ? " (newest " + shown + " drawn)" : "");
    if (body.as_of) message += " · " + body.as_of.count + " were valid on " + body.as_of.at.slice(0, 10);
    showEmpty(false, message);
  }

  function drawSpans(body) {
    const element = root.querySelector("[data-viewer-spans]");
    const points = body.points.slice(0, 200);
    const now = new Date().toISOString();
    const spans = chart(element);
    spans.setOption(Object.assign({}, base, {
      tooltip: { formatter: (p) => "#" + p.data.id + " valid " + p.value[1].slice(0, 10) + " → " + (p.data.open ? "now" : p.value[2].slice(0, 10)) },
      grid: { top: 10, bottom: 30, left: 60, right: 30 },
      xAxis: { type: "time" },
      yAxis: { type: "category", data: points.map((p) => "#" + p.id), axisLabel: { show: false } },
      series: [{
        type: "custom", name: "validity",
        renderItem: (params, api) => {
          const start = api.coord([api.value(1), api.value(0)]);
          const end = api.coord([api.value(2), api.value(0)]);
          const height = Math.max(2, api.size([0, 1])[1] * 0.6);
          return { type: "rect", shape: { x: start[0], y: start[1] - height / 2, width: Math.max(2, end[0] - start[0]), height: height }, style: api.style() };
        },
        encode: { x: [1, 2], y: 0 },
        data: points.map((p, i) => ({ id: p.id, open: !p.valid_to, value: [i, p.valid_from, p.valid_to || now] })),
      }],
    }));
    openOnClick(spans);
  }

  // --- map -----------------------------------------------------------------------------------
  let polling = null;
  function drawMap(body) {
    clearTimeout(polling);
    if (body.status === "computing") {
      showEmpty(false, "Computing the map in the background…");
      polling = setTimeout(load, 2000);
      return;
    }
    if (!body.points.length) return showEmpty(true, "");
    const clusters = body.clusters;
    const large = body.points.length > 5000;
    const series = clusters.map((cluster) => ({
      name: cluster.label, type: "scatter", symbolSize: large ? 3 : 8, large: large,
      data: body.points.filter((p) => p.cluster === cluster.id).map((p) => ({ id: p.id, value: [p.x, p.y, p.preview, p.id], kind: p.kind })),
      markPoint: { symbol: "pin", symbolSize: 1, label: { show: true, formatter: cluster.label, color: "#18202b", fontWeight: 600 }, data: [{ coord: [cluster.x, cluster.y] }] },
    }));
    if (body.query && body.query.x !== null) {
      series.push({ name: "query", type: "effectScatter", symbol: "diamond", symbolSize: 18, z: 10,
        data: [{ value: [body.query.x, body.query.y, body.query.text] }] });
      const hits = body.query.hits.filter((h) => h.on_map);
      series.push({ name: "top hits", type: "scatter", symbolSize: 14, z: 9, itemStyle: { borderColor: "#c2382f", borderWidth: 2, color: "transparent" },
        data: hits.map((h) => ({ id: h.id, value: [h.x, h.y, "hit #" + h.rank, h.id] })) });
    }
    const main = chart(root.querySelector("[data-viewer-chart]"));
    main.setOption(Object.assign({}, base, {
      color: KIND_COLOURS,
      legend: { type: "scroll", top: 0 },
      tooltip: { formatter: (p) => (p.value[3] ? "#" + p.value[3] + " " : "") + echarts.format.encodeHTML(String(p.value[2] || "")) },
      grid: { top: 40, left: 40, right: 30, bottom: 30 },
      xAxis: { type: "value", scale: true, splitLine: { show: false } },
      yAxis: { type: "value", scale: true, splitLine: { show: false } },
      toolbox: { feature: { brush: { type: ["rect", "polygon", "clear"] } } },
      brush: { xAxisIndex: 0, throttleType: "debounce" },
      dataZoom: [{ type: "inside" }],
      series: series,
    }));
    openOnClick(main);
    main.on("brushSelected", (event) => {
      const picked = [];
      (event.batch[0] ? event.batch[0].selected : []).forEach((s) => {
        const data = main.getOption().series[s.seriesIndex].data;
        s.dataIndex.forEach((i) => picked.push({ id: data[i].id, preview: data[i].value[2] }));
      });
      // ECharts reports an empty selection when the chart is drawn: keep the hits list then.
      if (picked.length) details.replaceChildren(list("Selected (" + picked.length + ")", picked.slice(0, 200)));
    });
    let message = body.sample_size + " of " + body.total + " memories" + (body.sample_size < body.total ? " (a random sample)" : "");
    message += " · " + clusters.length + " clusters · computed " + (body.computed_at || "").slice(0, 16).replace("T", " ") + " in " + body.compute_ms + " ms";
    if (body.association_strength !== null) message += " · association strength " + body.association_strength;
    showEmpty(false, message);
    if (body.query) {
      details.replaceChildren(list("Top hits for “" + body.query.text + "”", body.query.hits.map((h) => {
        const point = body.points.find((p) => p.id === h.id);
        return { id: h.id, preview: point ? point.preview : "(not on the map: outside the sample)" };
      })));
    }
  }

  // --- heatmap -------------------------------------------------------------------------------
  function drawHeatmap(body) {
    if (!body.by_kind.length && !body.unused.count) return showEmpty(true, "");
    const days = body.days;
    const kinds = [...new Set(body.by_kind.map((r) => r.kind))];
    const cells = body.by_kind.map((r) => [days.indexOf(r.day), kinds.indexOf(r.kind), r.sent, r.retrieved]);
    const max = Math.max(1, ...cells.map((c) => c[3]));
    const main = chart(root.querySelector("[data-viewer-chart]"));
    main.setOption(Object.assign({}, base, {
      tooltip: { formatter: (p) => days[p.value[0]] + " · " + kinds[p.value[1]] + ": sent " + p.value[2] + ", retrieved " + p.value[3] },
      grid: { top: 20, left: 110, right: 30, bottom: 70 },
      xAxis: { type: "category", data: days },
      yAxis: { type: "category", data: kinds },
      visualMap: { min: 0, max: max, dimension: 3, orient: "horizontal", left: "center", bottom: 0, text: ["retrieved", ""], calculable: true },
      series: [{ type: "heatmap", name: "retrieved by kind", data: cells, label: { show: true, formatter: (p) => p.value[2] + "/" + p.value[3] } }],
    }));
    const hot = body.hottest.slice(0, 15);
    const memCells = body.by_memory.filter((r) => hot.some((h) => h.id === r.memory_id))
      .map((r) => ({ id: r.memory_id, value: [days.indexOf(r.day), hot.findIndex((h) => h.id === r.memory_id), r.sent, r.retrieved] }));
    const memories = chart(root.querySelector("[data-viewer-memories]"));
    memories.setOption(Object.assign({}, base, {
      tooltip: { formatter: (p) => "#" + p.data.id + " " + days[p.value[0]] + ": sent " + p.value[2] + ", retrieved " + p.value[3] },
      grid: { top: 20, left: 110, right: 30, bottom: 70 },
      xAxis: { type: "category", data: days },
      yAxis: { type: "category", data: hot.map((h) => "#" + h.id) },
      visualMap: { min: 0, max: Math.max(1, ...memCells.map((c) => c.value[3])), dimension: 3, orient: "horizontal", left: "center", bottom: 0, calculable: true },
      series: [{ type: "heatmap", name: "hottest memories", data: memCells }],
    }));
    openOnClick(memories);
    const lists = text("div", null, { class: "viewer-lists" });
    const uses = (m) => "sent " + m.sent + ", retrieved " + m.retrieved;
    lists.append(list("Hottest", body.hottest, uses), list("Coldest (used least)", body.coldest, uses),
      list("Not sent to any model call for " + body.unused.days + " days (" + body.unused.count + ")", body.unused.memories));
    details.replaceChildren(lists);
    showEmpty(false, "Cells: sent / retrieved, per day over " + days.length + " days.");
  }

  // --- quality -------------------------------------------------------------------------------
  function drawQuality(body) {
    const grid = text("div", null, { class: "viewer-figures" });
    const sparks = [];
    body.figures.forEach((figure) => {
      const card = text("section", null, { class: "viewer-figure", "data-figure": figure.key });
      card.append(text("h3", figure.name));
      const shown = !figure.signal ? "No signal"
        : figure.value === null ? "—"
        : figure.unit === "ratio" ? (figure.value * 100).toFixed(1) + "%" : String(figure.value);
      card.append(text("div", shown, { class: "value" }));
      if (figure.note) card.append(text("p", figure.note, { class: "muted" }));
      const definition = text("details");
      definition.append(text("summary", "Definition"), text("p", figure.definition));
      card.append(definition);
      if (figure.series.length) {
        const spark = text("div", null, { class: "spark", role: "img", "aria-label": figure.name + " over " + body.days + " days" });
        card.append(spark);
        sparks.push([spark, figure]);
      }
      grid.append(card);
    });
    details.replaceChildren(grid);
    const main = root.querySelector("[data-viewer-chart]");
    const added = body.figures.find((f) => f.key === "memories_added");
    if (!added || !added.value) showEmpty(true, "");
    else showEmpty(false, "Over the last " + body.days + " days, from " + body.since.slice(0, 10) + ".");
    main.hidden = true;
    sparks.forEach(([element, figure], index) => {
      charts["spark" + index] = echarts.init(element, null, { renderer: "canvas" });
      charts["spark" + index].setOption(Object.assign({}, base, {
        grid: { top: 4, bottom: 4, left: 4, right: 4 },
        tooltip: { trigger: "axis" },
        xAxis: { type: "category", show: false, data: figure.series.map((p) => p.day) },
        yAxis: { type: "value", show: false },
        series: [{ type: "line", name: figure.name, showSymbol: false, connectNulls: false, data: figure.series.map((p) => p.value) }],
      }));
    });
  }

  const DRAW = { timeline: drawTimeline, map: drawMap, heatmap: drawHeatmap, quality: drawQuality };

  function load() {
    const params = query();
    history.replaceState(null, "", "?" + params.toString());
    fetch(root.dataset.api + "?" + params.toString(), { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then((response) => response.json().then((body) => ({ ok: response.ok, body: body })))
      .then(({ ok, body }) => {
        if (!ok) { status.textContent = (body.error && body.error.message) || "The viewer could not load."; return; }
        DRAW[page](body);
        window.cadreViewer.ready = true;
        if (page !== "map" || body.status !== "computing") root.dataset.ready = "true";
      })
      .catch(() => { status.textContent = "The viewer could not reach the server."; });
  }

  // A shared link keeps its query (the scope and kind selects are set by the server).
  new URLSearchParams(window.location.search).forEach((value, key) => {
    const field = form.elements[key];
    if (field && field.tagName === "INPUT") field.value = key === "as_of" ? value.slice(0, 10) : value;
  });
  form.addEventListener("submit", (event) => { event.preventDefault(); load(); });
  window.addEventListener("resize", () => Object.values(charts).forEach((c) => c.resize()));
  load();
})();
