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
  const tableBox = root.querySelector("[data-viewer-table]");
  window.cadreViewer = { charts: charts, ready: false, firstChartMs: null };
  // Scopes by the names the scope filter shows ("You", "Member: Bob", an agent's name).
  const namesNode = document.getElementById("viewer-scope-names");
  const SCOPE_NAMES = new Map(namesNode ? JSON.parse(namesNode.textContent) : []);
  const scopeName = (key) => SCOPE_NAMES.get(key) || key;
  // Kinds and events by the names a person reads, in their language (codes in the API).
  const kindsNode = document.getElementById("viewer-kind-names");
  const KIND_NAMES = new Map(kindsNode ? JSON.parse(kindsNode.textContent) : []);
  const kindName = (kind) => KIND_NAMES.get(kind) || kind;
  const EVENT_NAMES = {
    updated: gettext("updated"), corrected: gettext("corrected"), superseded: gettext("superseded"),
    merged: gettext("merged"), deleted: gettext("deleted"), expired: gettext("expired"),
    archived: gettext("archived"), added: gettext("added"),
  };
  const eventName = (event) => EVENT_NAMES[event] || event;
  // Series the code finds again by name.
  const MEMORIES = gettext("memories");
  const QUERY = gettext("query");
  const TOP_HITS = gettext("top hits");
  const CLUSTER_NAMES = gettext("cluster names");
  let firstChartMarked = false;
  const KIND_COLOURS = ["#2453d4", "#1d7f46", "#9a6300", "#c2382f", "#6b4fbb", "#0f7c8c"];
  const base = { aria: { enabled: true }, animation: false, textStyle: { fontFamily: "inherit" } };

  // The first chart drawn on the page: a performance mark (ms since navigation start).
  function markFirstChart(instance) {
    if (firstChartMarked) return;
    firstChartMarked = true;
    instance.on("finished", function once() {
      instance.off("finished", once);
      const mark = performance.mark("viewer:first-chart");
      window.cadreViewer.firstChartMs = Math.round(mark ? mark.startTime : performance.now());
    });
  }

  // Charts follow their box: drawn at its width on first load (ECharts reads the size once,
  // at init) and resized whenever the box changes (a scrollbar appearing, the window, print).
  const sized = new ResizeObserver((entries) => entries.forEach((entry) => {
    const instance = echarts.getInstanceByDom(entry.target);
    if (instance && !instance.isDisposed()) instance.resize();
  }));

  function init(element) {
    // Shown before ECharts measures it: an empty chart box is display:none (cadre.css), and
    // ECharts would draw at its 100 px fallback until the window was resized.
    element.classList.add("viewer-drawn");
    element.hidden = false;
    const instance = echarts.init(element, null, { renderer: "canvas" });
    sized.observe(element);
    markFirstChart(instance);
    return instance;
  }

  function chart(element) {
    const key = element.dataset.viewerChart !== undefined ? "main" : Object.keys(element.dataset)[0];
    if (charts[key]) charts[key].dispose();
    charts[key] = init(element);
    return charts[key];
  }

  // The chart's data as a table (reachable by keyboard, readable in print): rows of cells,
  // a cell either text or {id, text} (a link to that memory).
  function dataTable(caption, headers, rows, note) {
    if (!tableBox) return;
    const box = text("details", null, { class: "viewer-table", "data-viewer-table-details": "" });
    box.append(text("summary", interpolate(ngettext("%(caption)s as a table (%(count)s row)", "%(caption)s as a table (%(count)s rows)", rows.length), { caption: caption, count: rows.length }, true)));
    const table = text("table");
    const head = text("tr");
    headers.forEach((h) => head.append(text("th", h, { scope: "col" })));
    const thead = text("thead");
    thead.append(head);
    const tbody = text("tbody");
    rows.forEach((row) => {
      const tr = text("tr");
      row.forEach((cell) => {
        const td = text("td");
        if (cell && typeof cell === "object") td.append(text("a", "#" + cell.id + (cell.text ? " " + cell.text : ""), { href: memoryUrl(cell.id), "data-memory": cell.id }));
        else td.textContent = cell === null || cell === undefined ? "" : String(cell);
        tr.append(td);
      });
      tbody.append(tr);
    });
    table.append(thead, tbody);
    box.append(table);
    if (note) box.append(text("p", note, { class: "muted" }));
    box.open = window.matchMedia("print").matches;
    tableBox.replaceChildren(box);
  }

  function text(tag, value, attrs) {
    const node = document.createElement(tag);
    if (value !== undefined && value !== null) node.textContent = value;
    Object.entries(attrs || {}).forEach(([k, v]) => node.setAttribute(k, v));
    return node;
  }

  function memoryLink(memory, extra) {
    const item = text("li", null, { "data-memory": memory.id });
    const link = text("a", "#" + memory.id + " " + (memory.preview || ""), { href: memoryUrl(memory.id) });
    item.append(link);
    if (extra) item.append(text("span", " · " + extra, { class: "muted" }));
    return item;
  }

  function list(title, memories, extra, empty) {
    const box = text("div");
    box.append(text("h3", title));
    if (!memories.length) box.append(text("p", empty || gettext("None."), { class: "muted" }));
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
    // A bucket's bar stands over the middle of its hour, day, week or month (its time is the
    // bucket's start), so a day's additions are drawn on that day.
    const series = kinds.map((kind) => ({
      name: interpolate(gettext("added: %(kind)s"), { kind: kindName(kind) }, true), type: "bar", stack: "kinds", xAxisIndex: 0, yAxisIndex: 0, barMaxWidth: 24,
      data: buckets.map((t) => [bucketMiddle(t, body), count(kind, t)]),
    }));
    events.forEach((event) => series.push({
      name: eventName(event), type: "line", xAxisIndex: 0, yAxisIndex: 0, symbolSize: 6,
      data: body.by_event.filter((r) => r.event === event).map((r) => [bucketMiddle(r.t, body), r.count]),
    }));
    // With as_of, the memories valid then are drawn full, the others faded.
    const validThen = body.as_of ? new Set(body.as_of.memory_ids) : null;
    series.push({
      name: MEMORIES, type: "scatter", xAxisIndex: 1, yAxisIndex: 1, symbolSize: 9,
      data: body.points.map((p) => ({ id: p.id, value: [p.created_at, kindName(p.kind), p.preview, p.id],
        itemStyle: validThen && !validThen.has(p.id) ? { opacity: 0.18 } : undefined })),
      markLine: body.as_of ? { symbol: "none", label: { formatter: interpolate(gettext("as of %(day)s"), { day: body.as_of.at.slice(0, 10) }, true) }, lineStyle: { color: "#c2382f", type: "dashed" }, data: [{ xAxis: body.as_of.at }] } : undefined,
    });
    const main = chart(root.querySelector("[data-viewer-chart]"));
    main.setOption(Object.assign({}, base, {
      color: KIND_COLOURS,
      legend: { type: "scroll", top: 0 },
      tooltip: { trigger: "item", formatter: (p) => p.seriesName === MEMORIES
        ? "#" + p.value[3] + " " + echarts.format.encodeHTML(p.value[2])
        : echarts.format.encodeHTML(p.seriesName) + ": " + p.value[1] },
      grid: [{ top: 40, height: 200, left: 60, right: 30 }, { top: 290, height: 90, left: 60, right: 30 }],
      // Both axes span the range asked for, so the counts and the points line up and the
      // slider zooms them together.
      xAxis: [0, 1].map((gridIndex) => Object.assign(rangeAxis(body), { gridIndex: gridIndex })),
      yAxis: [{ type: "value", gridIndex: 0, minInterval: 1 }, { type: "category", gridIndex: 1, data: pointKinds.map(kindName) }],
      dataZoom: [{ type: "slider", xAxisIndex: [0, 1], bottom: 8 }, { type: "inside", xAxisIndex: [0, 1] }],
      series: series,
    }));
    openOnClick(main);
    const spans = drawSpans(body, validThen);
    // The spans follow the slider: the same share of the same range.
    main.on("datazoom", () => {
      const zoom = main.getOption().dataZoom[0];
      spans.dispatchAction({ type: "dataZoom", start: zoom.start, end: zoom.end });
    });
    setSlider(body);
    dataTable(gettext("Memories in range"), [gettext("Memory"), gettext("Kind"), gettext("Written"), gettext("Valid from"), gettext("Valid to")]
      .concat(body.as_of ? [interpolate(gettext("Valid on %(day)s"), { day: body.as_of.at.slice(0, 10) }, true)] : []),
      body.points.map((p) => [{ id: p.id, text: p.preview }, kindName(p.kind), p.created_at.slice(0, 16).replace("T", " "), p.valid_from.slice(0, 10), p.valid_to ? p.valid_to.slice(0, 10) : gettext("open")]
        .concat(validThen ? [validThen.has(p.id) ? gettext("yes") : gettext("no")] : [])));
    const total = body.points_total;
    const shown = body.points.length;
    // Said as what it counts: every memory written in the range and not deleted; the map counts
    // those still active (a superseded or archived one stays in the history).
    let message = interpolate(ngettext("%(count)s memory in range (written in it, not deleted)", "%(count)s memories in range (written in it, not deleted)", total), { count: total }, true)
      + (shown < total ? " · " + interpolate(gettext("newest %(count)s drawn"), { count: shown }, true) : "");
    const inactive = body.points.filter((p) => p.status !== "active").length;
    if (shown === total && inactive) message += " · " + interpolate(gettext("%(count)s still active (as on the map)"), { count: total - inactive }, true);
    if (body.as_of) message += " · " + interpolate(ngettext("%(count)s was valid on %(day)s", "%(count)s were valid on %(day)s", body.as_of.count), { count: body.as_of.count, day: body.as_of.at.slice(0, 10) }, true);
    showEmpty(false, message);
  }

  // A time axis over the range asked for (ECharts' containShape would widen it around a lone
  // bar), with a fortieth of it to spare after its end: the newest memory, written a moment
  // ago, is drawn whole rather than cut in half by the edge.
  function rangeAxis(body) {
    const since = Date.parse(body.since), until = Date.parse(body.until);
    return { type: "time", min: since, max: until + (until - since) / 40, containShape: false };
  }

  // The middle of the part of a bucket inside the range: today's bucket ends tomorrow, and
  // a bar at its middle would fall past the axis's end (now) and not be drawn.
  function bucketMiddle(start, body) {
    const bucket = body.bucket;
    const from = new Date(start);
    const to = new Date(from.getTime());
    if (bucket === "hour") to.setUTCHours(to.getUTCHours() + 1);
    else if (bucket === "day") to.setUTCDate(to.getUTCDate() + 1);
    else if (bucket === "week") to.setUTCDate(to.getUTCDate() + 7);
    else to.setUTCMonth(to.getUTCMonth() + 1);
    const first = Math.max(from.getTime(), Date.parse(body.since));
    const last = Math.min(to.getTime(), Date.parse(body.until));
    return new Date((first + Math.max(first, last)) / 2).toISOString();
  }

  // The as-of slider: one step a day over the range shown; moving it shows the set as it was.
  const slider = root.querySelector("[data-as-of-slider]");
  const asOfField = form.elements.as_of;
  function setSlider(body) {
    if (!slider) return;
    // Steps are whole UTC days from the range's first day to its last (today by default), so
    // the time of day the range starts at never moves a step to a neighbouring day.
    const dayOf = (t) => Date.parse(new Date(t).toISOString().slice(0, 10) + "T00:00:00Z");
    const firstDay = dayOf(Date.parse(body.since));
    const days = Math.max(0, Math.round((dayOf(Date.parse(body.until)) - firstDay) / 86400000));
    slider.min = "0"; slider.max = String(days);
    slider.dataset.since = String(firstDay);
    const step = asOfField.value
      ? Math.round((Date.parse(asOfField.value + "T00:00:00Z") - firstDay) / 86400000)
      : days;
    slider.value = String(Math.min(days, Math.max(0, step)));
    slider.disabled = false;
  }
  function sliderDate() {
    return new Date(Number(slider.dataset.since) + Number(slider.value) * 86400000).toISOString().slice(0, 10);
  }
  if (slider) {
    slider.addEventListener("input", () => { asOfField.value = sliderDate(); });
    slider.addEventListener("change", () => { asOfField.value = sliderDate(); load(); });
  }

  function drawSpans(body, validThen) {
    const element = root.querySelector("[data-viewer-spans]");
    const points = body.points.slice(0, 200);
    const spans = chart(element);
    spans.setOption(Object.assign({}, base, {
      tooltip: { formatter: (p) => "#" + p.data.id + " valid " + p.value[1].slice(0, 10) + " → " + (p.data.open ? "now" : p.value[2].slice(0, 10)) },
      grid: { top: 10, bottom: 30, left: 60, right: 30 },
      // The range asked for, as the chart above: a span reaching past it is cut at its edge.
      xAxis: rangeAxis(body),
      yAxis: { type: "category", data: points.map((p) => "#" + p.id), axisLabel: { show: false } },
      // Zoomed from the chart above only (see drawTimeline).
      dataZoom: [{ type: "inside", xAxisIndex: 0, zoomOnMouseWheel: false, moveOnMouseMove: false, moveOnMouseWheel: false }],
      series: [{
        type: "custom", name: "validity", clip: true,
        renderItem: (params, api) => {
          const start = api.coord([api.value(1), api.value(0)]);
          const end = api.coord([api.value(2), api.value(0)]);
          const height = Math.max(2, api.size([0, 1])[1] * 0.6);
          // A span of seconds on a month's axis is still drawn, ending where it ends.
          const width = Math.max(3, end[0] - start[0]);
          return { type: "rect", shape: { x: Math.min(start[0], end[0] - width), y: start[1] - height / 2, width: width, height: height }, style: api.style() };
        },
        encode: { x: [1, 2], y: 0 },
        data: points.map((p, i) => ({ id: p.id, open: !p.valid_to, value: [i, p.valid_from, p.valid_to || body.until],
          itemStyle: validThen && !validThen.has(p.id) ? { opacity: 0.25 } : undefined })),
        markLine: body.as_of ? { symbol: "none", label: { show: false }, lineStyle: { color: "#c2382f", type: "dashed" }, data: [{ xAxis: body.as_of.at }] } : undefined,
      }],
    }));
    openOnClick(spans);
    return spans;
  }

  // --- map -----------------------------------------------------------------------------------
  let polling = null;
  let lastMap = null;
  const colourSelect = root.querySelector("[data-colour-by]");
  const AGES = [[gettext("today"), 1], [gettext("this week"), 7], [gettext("this month"), 30], [gettext("this year"), 365], [gettext("older"), Infinity]];
  function mapGroups(body, by) {
    const groups = new Map();
    const add = (name, p) => { if (!groups.has(name)) groups.set(name, []); groups.get(name).push(p); };
    const labels = new Map(body.clusters.map((c) => [c.id, c.label]));
    const now = Date.now();
    body.points.forEach((p) => {
      if (by === "kind") add(kindName(p.kind), p);
      else if (by === "scope") add(scopeName(p.scope_key), p);
      else if (by === "age") {
        const days = (now - Date.parse(p.created_at)) / 86400000;
        add(AGES.find(([, limit]) => days < limit)[0], p);
      } else add(labels.get(p.cluster) || interpolate(gettext("cluster %(id)s"), { id: p.cluster }, true), p);
    });
    const order = by === "age" ? AGES.map(([name]) => name) : [...groups.keys()];
    return order.filter((name) => groups.has(name)).map((name) => ({ name: name, points: groups.get(name) }));
  }
  if (colourSelect) colourSelect.addEventListener("change", () => {
    if (!lastMap) return;
    const url = new URL(window.location.href);
    url.searchParams.set("colour", colourSelect.value);
    history.replaceState(null, "", url.toString());
    drawMap(lastMap);
  });
  function drawMap(body) {
    clearTimeout(polling);
    if (body.status === "computing") {
      showEmpty(false, gettext("Computing the map in the background…"));
      polling = setTimeout(load, 2000);
      return;
    }
    if (!body.points.length) return showEmpty(true, "");
    lastMap = body;
    const clusters = body.clusters;
    const large = body.points.length > 5000;
    const colourBy = colourSelect ? colourSelect.value : "cluster";
    const groups = mapGroups(body, colourBy);
    const series = groups.map((group) => ({
      name: group.name, type: "scatter", symbolSize: large ? 3 : 8, large: large,
      data: group.points.map((p) => ({ id: p.id, value: [p.x, p.y, p.preview, p.id], kind: p.kind })),
    }));
    // Cluster names stay on the map whatever the colours show.
    series.push({ name: CLUSTER_NAMES, type: "scatter", symbolSize: 0, silent: true, data: [],
      markPoint: { symbol: "pin", symbolSize: 1, silent: true, label: { show: true, color: "#18202b", fontWeight: 600 },
        data: clusters.map((c) => ({ coord: [c.x, c.y], value: c.label, label: { formatter: c.label } })) } });
    if (body.query && body.query.x !== null) {
      series.push({ name: QUERY, type: "effectScatter", symbol: "diamond", symbolSize: 18, z: 10,
        data: [{ value: [body.query.x, body.query.y, body.query.text] }] });
      const hits = body.query.hits.filter((h) => h.on_map);
      series.push({ name: TOP_HITS, type: "scatter", symbolSize: 14, z: 9, itemStyle: { borderColor: "#c2382f", borderWidth: 2, color: "transparent" },
        data: hits.map((h) => ({ id: h.id, value: [h.x, h.y, interpolate(gettext("hit #%(rank)s"), { rank: h.rank }, true), h.id] })) });
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
      const seen = new Set();
      const all = main.getOption().series;
      (event.batch[0] ? event.batch[0].selected : []).forEach((s) => {
        if ([QUERY, TOP_HITS, CLUSTER_NAMES].includes(all[s.seriesIndex].name)) return;
        const data = all[s.seriesIndex].data;
        s.dataIndex.forEach((i) => {
          if (seen.has(data[i].id)) return;
          seen.add(data[i].id);
          picked.push({ id: data[i].id, preview: data[i].value[2] });
        });
      });
      // ECharts reports an empty selection when the chart is drawn: keep the hits list then.
      if (picked.length) {
        details.replaceChildren(list(interpolate(gettext("Selected (%(count)s)"), { count: picked.length }, true), picked.slice(0, 200)));
        details.firstChild.setAttribute("data-viewer-selection", "");
      }
    });
    const clusterName = new Map(clusters.map((c) => [c.id, c.label]));
    const rows = body.points.slice(0, 500);
    dataTable(gettext("Points"), [gettext("Memory"), gettext("Kind"), gettext("Cluster"), gettext("Scope"), gettext("Written"), "x", "y"],
      rows.map((p) => [{ id: p.id, text: p.preview }, kindName(p.kind), clusterName.get(p.cluster) || p.cluster, scopeName(p.scope_key), (p.created_at || "").slice(0, 10), p.x.toFixed(3), p.y.toFixed(3)]),
      rows.length < body.points.length ? interpolate(gettext("The first %(shown)s of %(total)s points; the memory list has them all."), { shown: rows.length, total: body.points.length }, true) : "");
    // Said as what it counts: the active memories you may read with a vector (those the
    // timeline counts, less superseded and archived ones and any still waiting for a vector).
    let message = (body.sample_size < body.total
      ? interpolate(gettext("%(shown)s of %(total)s active memories on the map (a random sample)"), { shown: body.sample_size, total: body.total }, true)
      : interpolate(ngettext("%(count)s active memory on the map", "%(count)s active memories on the map", body.total), { count: body.total }, true));
    message += " · " + interpolate(ngettext("%(count)s cluster", "%(count)s clusters", clusters.length), { count: clusters.length }, true)
      + " · " + interpolate(gettext("computed %(when)s in %(ms)s ms"), { when: (body.computed_at || "").slice(0, 16).replace("T", " "), ms: body.compute_ms }, true);
    if (body.association_strength !== null) message += " · " + interpolate(gettext("association strength %(value)s"), { value: body.association_strength }, true);
    // Memories written since this map was computed: a new one is on its way (shown when ready).
    if (body.computing_id) {
      message += " · " + gettext("memories changed since: recomputing…");
      polling = setTimeout(load, 2000);
    }
    showEmpty(false, message);
    if (body.query) {
      details.replaceChildren(list(interpolate(gettext("Top hits for “%(query)s”"), { query: body.query.text }, true), body.query.hits.map((h) => {
        const point = body.points.find((p) => p.id === h.id);
        return { id: h.id, preview: point ? point.preview : gettext("(not on the map: outside the sample)") };
      })));
    }
  }

  // --- heatmap -------------------------------------------------------------------------------
  // The colour scale sits above the grid, on the right, its ends labelled beside it: below
  // the chart its labels fell on the date axis.
  const heatGrid = { top: 44, left: 110, right: 30, bottom: 40 };
  function heatScale(max) {
    return { min: 0, max: max, dimension: 3, orient: "horizontal", right: 30, top: 4, itemWidth: 12, itemHeight: 140,
      text: [interpolate(gettext("%(count)s retrieved"), { count: max }, true), "0"], calculable: false };
  }
  // Days as "Nov 7" (the year is the range's), every label room enough to stand apart.
  function dayAxis(days) {
    const short = (day) => new Date(day + "T00:00:00Z").toLocaleDateString(document.documentElement.lang || undefined, { month: "short", day: "numeric", timeZone: "UTC" });
    return { type: "category", data: days, axisLabel: { formatter: short, hideOverlap: true } };
  }
  function drawHeatmap(body) {
    if (!body.by_kind.length && !body.unused.count) return showEmpty(true, "");
    const days = body.days;
    const kinds = [...new Set(body.by_kind.map((r) => r.kind))];
    const kindNames = kinds.map(kindName);
    const sentRetrieved = (sent, retrieved) => interpolate(gettext("sent %(sent)s, retrieved %(retrieved)s"), { sent: sent, retrieved: retrieved }, true);
    const cells = body.by_kind.map((r) => [days.indexOf(r.day), kinds.indexOf(r.kind), r.sent, r.retrieved]);
    const max = Math.max(1, ...cells.map((c) => c[3]));
    const main = chart(root.querySelector("[data-viewer-chart]"));
    main.setOption(Object.assign({}, base, {
      tooltip: { formatter: (p) => days[p.value[0]] + " · " + echarts.format.encodeHTML(kindNames[p.value[1]]) + ": " + sentRetrieved(p.value[2], p.value[3]) },
      grid: heatGrid,
      xAxis: dayAxis(days),
      yAxis: { type: "category", data: kindNames },
      visualMap: heatScale(max),
      series: [{ type: "heatmap", name: gettext("retrieved by kind"), data: cells, label: { show: true, formatter: (p) => p.value[2] + "/" + p.value[3] } }],
    }));
    // The hottest memories' rows read as what they are: the scope's name and the memory's
    // first words ("You: Bob prefers green tea…"), not "#15".
    const hot = body.hottest.slice(0, 15);
    const rowName = (m) => (m.scope_label ? m.scope_label + ": " : "") + (m.preview || "#" + m.id);
    const memCells = body.by_memory.filter((r) => hot.some((h) => h.id === r.memory_id))
      .map((r) => ({ id: r.memory_id, value: [days.indexOf(r.day), hot.findIndex((h) => h.id === r.memory_id), r.sent, r.retrieved] }));
    const memories = chart(root.querySelector("[data-viewer-memories]"));
    memories.setOption(Object.assign({}, base, {
      tooltip: { formatter: (p) => echarts.format.encodeHTML(rowName(hot[p.value[1]])) + "<br>" + days[p.value[0]] + ": " + sentRetrieved(p.value[2], p.value[3]) },
      grid: Object.assign({}, heatGrid, { left: 250 }),
      xAxis: dayAxis(days),
      yAxis: { type: "category", data: hot.map(rowName), axisLabel: { width: 236, overflow: "truncate" } },
      visualMap: heatScale(Math.max(1, ...memCells.map((c) => c.value[3]))),
      series: [{ type: "heatmap", name: gettext("hottest memories"), data: memCells }],
    }));
    openOnClick(memories);
    const lists = text("div", null, { class: "viewer-lists" });
    const uses = (m) => sentRetrieved(m.sent, m.retrieved);
    // With few memories used the two lists would name the same ones: the coldest leaves out
    // those already listed as hottest.
    const hotIds = new Set(body.hottest.map((m) => m.id));
    const cold = body.coldest.filter((m) => !hotIds.has(m.id));
    const allHot = body.hottest.length ? gettext("Every memory used is listed as hottest.") : gettext("None.");
    lists.append(list(gettext("Hottest"), body.hottest, uses), list(gettext("Coldest (used least)"), cold, uses, allHot),
      list(interpolate(gettext("Not sent to any model call for %(days)s days (%(count)s)"), { days: body.unused.days, count: body.unused.count }, true), body.unused.memories));
    details.replaceChildren(lists);
    dataTable(gettext("Use by kind and day"), [gettext("Day"), gettext("Kind"), gettext("Sent"), gettext("Retrieved")], body.by_kind.map((r) => [r.day, kindName(r.kind), r.sent, r.retrieved]));
    showEmpty(false, interpolate(ngettext("Cells: sent / retrieved, per day over %(count)s day.", "Cells: sent / retrieved, per day over %(count)s days.", days.length), { count: days.length }, true));
  }

  // --- quality -------------------------------------------------------------------------------
  function drawQuality(body) {
    const grid = text("div", null, { class: "viewer-figures" });
    const sparks = [];
    body.figures.forEach((figure) => {
      const card = text("section", null, { class: "viewer-figure", "data-figure": figure.key });
      card.append(text("h3", figure.name));
      const shown = !figure.signal ? gettext("No signal")
        : figure.value === null ? "—"
        : figure.unit === "ratio" ? (figure.value * 100).toFixed(1) + "%" : String(figure.value);
      card.append(text("div", shown, { class: "value" }));
      if (figure.note) card.append(text("p", figure.note, { class: "muted" }));
      const definition = text("details");
      definition.append(text("summary", gettext("Definition")), text("p", figure.definition));
      card.append(definition);
      if (figure.series.length) {
        const spark = text("div", null, { class: "spark", role: "img", "aria-label": interpolate(gettext("%(name)s over %(days)s days"), { name: figure.name, days: body.days }, true) });
        card.append(spark);
        sparks.push([spark, figure]);
      }
      grid.append(card);
    });
    details.replaceChildren(grid);
    const main = root.querySelector("[data-viewer-chart]");
    const added = body.figures.find((f) => f.key === "memories_added");
    if (!added || !added.value) showEmpty(true, "");
    else showEmpty(false, interpolate(gettext("Over the last %(days)s days, from %(day)s."), { days: body.days, day: body.since.slice(0, 10) }, true));
    main.hidden = true;
    sparks.forEach(([element, figure], index) => {
      charts["spark" + index] = init(element);
      charts["spark" + index].setOption(Object.assign({}, base, {
        // Room for a dot on the edge: today is the last day, 0 % and 100 % the bottom and top.
        grid: { top: 8, bottom: 8, left: 8, right: 8 },
        tooltip: { trigger: "axis" },
        xAxis: { type: "category", show: false, data: figure.series.map((p) => p.day) },
        yAxis: { type: "value", show: false },
        // Days without a value leave gaps; a day standing alone gets a dot (a line needs two).
        series: [{ type: "line", name: figure.name, showSymbol: figure.series.filter((p) => p.value !== null).length < 3, symbolSize: 6, showAllSymbol: true, clip: false, connectNulls: false, data: figure.series.map((p) => p.value) }],
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
        if (!ok) { status.textContent = (body.error && body.error.message) || gettext("The viewer could not load."); return; }
        DRAW[page](body);
        window.cadreViewer.ready = true;
        if (page !== "map" || body.status !== "computing") root.dataset.ready = "true";
      })
      .catch(() => { status.textContent = gettext("The viewer could not reach the server."); });
  }

  // A shared link keeps its query (the scope and kind selects are set by the server).
  new URLSearchParams(window.location.search).forEach((value, key) => {
    const field = form.elements[key];
    if (field && field.tagName === "INPUT") field.value = key === "as_of" ? value.slice(0, 10) : value;
    if (key === "colour" && colourSelect) colourSelect.value = value;
  });
  form.addEventListener("submit", (event) => { event.preventDefault(); load(); });
  // On paper the chart's table is printed open.
  const openTables = () => root.querySelectorAll("[data-viewer-table] details").forEach((d) => { d.open = true; });
  window.addEventListener("beforeprint", openTables);
  window.matchMedia("print").addEventListener("change", (event) => { if (event.matches) openTables(); });
  window.addEventListener("resize", () => Object.values(charts).forEach((c) => c.resize()));
  load();
})();
