// Cadre console chat — streams a conversation over the ws/chat/<session>/ websocket.
// Without it (or when the socket is closed) the page's forms post as usual and the page
// reloads; with it, messages and confirmation decisions go over the socket and the agent's
// reply appears as the run's events arrive. A skill proposal drafted from the person's
// correction (`skill_proposal` event) shows as a card whose "Save as skill" / "Dismiss" call
// the skill proposals API. A reply's frame names the model that answered (`answered_by`),
// shown under it as the page shows it after a reload. A queued message shows how long it has
// waited and, after a grace period, whether any worker is taking runs (the socket's `queue`
// frame, asked again while it waits), with Retry and Cancel. Enter sends, Shift+Enter is a
// new line — also for the first message of a new conversation, which posts the form.
(function () {
  "use strict";

  // Strings come from Django's JavaScript catalog (gettext, ngettext, interpolate).
  var LABELS = {
    queued: gettext("Queued"), running: gettext("Running"), waiting: gettext("Waiting"),
    completed: gettext("Completed"), failed: gettext("Failed"), cancelled: gettext("Cancelled")
  };
  var RISKS = {
    low: pgettext("risk level", "low"), medium: pgettext("risk level", "medium"),
    high: pgettext("risk level", "high"), critical: pgettext("risk level", "critical")
  };
  // What a step does, as its reply's status line says it ("Working: remembering").
  var STEP_WORDS = {
    model_call: gettext("thinking"), memory_write: gettext("remembering"),
    memory_search: gettext("searching memory"), im_send: gettext("sending a message"),
    task_create: gettext("creating a task"), http_request: gettext("fetching"),
    delegate: gettext("asking another agent"), notify_subscribers: gettext("publishing"),
    await_event: gettext("waiting for an event")
  };
  var NO_WORKER = gettext("No worker is taking runs right now: nothing will answer until one starts.") +
    " " + interpolate(gettext("Ask your administrator (%(command)s checks the workers)."),
      { command: "cadre doctor" }, true);
  var BUSY = gettext("The workers are busy with other messages; yours waits its turn.");
  var QUEUE_ASK_EVERY_MS = 10000;
  var QUEUE_SHOW_MS = 2000;

  // Enter sends, Shift+Enter starts a new line (and an IME's Enter composes).
  function sendOnEnter(form) {
    var area = form && form.querySelector("textarea[name=text]");
    if (!area) return;
    area.addEventListener("keydown", function (event) {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        form.requestSubmit();
      }
    });
  }

  function init() {
    var chat = document.getElementById("chat");
    if (!chat) return;
    var form = document.getElementById("chat-form");
    sendOnEnter(form);
    if (!chat.getAttribute("data-ws-path") || !window.WebSocket) return;
    var log = document.getElementById("chat-log");
    var statusLine = document.getElementById("chat-status");
    var socket = null;
    var retries = 0;
    var after = null;
    // The user's bubble of a message sent over the socket, until the server accepts it
    // ("accepted") or refuses it ("error"): a refused message is marked and its text returned.
    var pending = null;

    function scrollDown() { log.scrollTop = log.scrollHeight; }

    function setStatus(text) { if (statusLine) statusLine.textContent = text; }

    function element(tag, className, text) {
      var node = document.createElement(tag);
      if (className) node.className = className;
      if (text !== undefined) node.textContent = text;
      return node;
    }

    function removeEmptyNote() {
      var empty = document.getElementById("chat-empty");
      if (empty) empty.remove();
    }

    // The agent's bubble of one run: the text, then a small status line.
    function bubble(runId) {
      var node = log.querySelector('.bubble.agent[data-run="' + runId + '"]');
      if (!node) {
        removeEmptyNote();
        node = element("div", "bubble agent");
        node.setAttribute("data-run", runId);
        node.appendChild(document.createTextNode("…"));
        node.appendChild(element("span", "meta", LABELS.queued));
        log.appendChild(node);
      }
      return node;
    }

    function textNode(node) {
      if (!node.firstChild || node.firstChild.nodeType !== 3) {
        node.insertBefore(document.createTextNode(""), node.firstChild);
      }
      return node.firstChild;
    }

    // Which model answered, under the reply's status line ("offline model" when offline).
    function answeredBy(node, text) {
      if (!text) return;
      var line = node.querySelector(".answered-by");
      if (!line) {
        line = element("span", "answered-by");
        line.setAttribute("data-answered-by", "");
        node.appendChild(line);
      }
      var model = text === "offline model" ? gettext("offline model") : text;
      line.textContent = interpolate(gettext("Answered by: %(model)s"), { model: model }, true);
    }

    function setMeta(node, text) {
      var meta = node.querySelector(".meta");
      if (!meta) { meta = element("span", "meta"); node.appendChild(meta); }
      meta.textContent = text;
    }

    // A tool's effect that failed after the reply (an im_send no connector delivered), told
    // as the server's sentence ("Could not send: no IM connector is set up.").
    function effectFailed(node, data, sentence) {
      // A send refused before any message existed has no message id: its run and step name it.
      var which = data.message_id != null ? data.message_id
        : node.getAttribute("data-run") + "-" + data.step;
      var id = "effect-" + data.tool + "-" + which;
      if (log.querySelector('[data-effect="' + id + '"]')) return;
      var note = element("div", "effect-failed", sentence || gettext("Could not send it."));
      note.setAttribute("data-effect", id);
      node.parentNode.insertBefore(note, node.nextSibling);
    }

    // A run its model endpoint failed: those who manage models get a link to the Models page
    // (the page renders the attribute, and the socket sends a run's error, only for them).
    function modelsHint(node, error, runId) {
      var url = chat.getAttribute("data-models-url");
      var prefix = chat.getAttribute("data-model-failure");
      if (!url || !prefix || error.indexOf(prefix) !== 0) return;
      if (log.querySelector('[data-models-hint="' + runId + '"]')) return;
      var note = element("div", "effect-failed models-hint",
        error + ". " + gettext("You can fix this:") + " ");
      var link = element("a", "", gettext("check it under Models"));
      link.setAttribute("href", url);
      note.appendChild(link);
      note.appendChild(document.createTextNode("."));
      note.setAttribute("data-models-hint", runId);
      node.parentNode.insertBefore(note, node.nextSibling);
    }

    function confirmationBox(runId, confirmation) {
      var existing = log.querySelector('[data-confirmation="' + confirmation.id + '"]');
      if (existing) return existing;
      var box = element("div", "confirm-box");
      box.setAttribute("data-confirmation", confirmation.id);
      box.setAttribute("data-confirmation-status", confirmation.status);
      box.appendChild(element("strong", "",
        confirmation.status === "pending" ? gettext("Confirmation needed") : gettext("Confirmation")));
      var risk = interpolate(gettext("%(risk)s risk"),
        { risk: RISKS[confirmation.risk_level] || confirmation.risk_level }, true);
      box.appendChild(document.createTextNode(" (" + risk + "): " + confirmation.summary));
      if (confirmation.decision) {
        box.appendChild(decisionLine(confirmation.decision));
      } else if (confirmation.can_decide) {
        var actions = element("div", "form-actions");
        [["approve", gettext("Approve"), "btn btn-primary btn-small"],
         ["reject", gettext("Reject"), "btn btn-danger-quiet btn-small"]].forEach(function (spec) {
          var button = element("button", spec[2], spec[1]);
          button.type = "button";
          button.addEventListener("click", function () { decide(confirmation.id, spec[0]); });
          actions.appendChild(button);
        });
        box.appendChild(actions);
      } else {
        box.appendChild(element("div", "cell-sub", gettext("Waiting for someone allowed to decide.")));
      }
      var anchor = bubble(runId);
      anchor.parentNode.insertBefore(box, anchor.nextSibling);
      return box;
    }

    function decisionLine(text) {
      var line = element("div", "cell-sub", text);
      line.setAttribute("data-decision", "");
      return line;
    }

    // The decision stays on the card, as the page shows it after a reload.
    function markDecided(confirmation) {
      var box = log.querySelector('[data-confirmation="' + confirmation.id + '"]');
      if (!box || confirmation.status === "pending") return;
      var actions = box.querySelector(".form-actions");
      if (actions) actions.remove();
      Array.prototype.forEach.call(box.querySelectorAll(".cell-sub"), function (n) { n.remove(); });
      box.setAttribute("data-confirmation-status", confirmation.status);
      var heading = box.querySelector("strong");
      if (heading) heading.textContent = gettext("Confirmation");
      box.appendChild(decisionLine(confirmation.decision ||
        interpolate(gettext("Decision: %(status)s"), { status: confirmation.status }, true)));
    }

    // --- a queued message: how long it waits, whether workers take runs, Retry and Cancel ---

    function duration(seconds) {
      if (seconds < 60) {
        return interpolate(ngettext("%(n)s second", "%(n)s seconds", seconds), { n: seconds }, true);
      }
      var minutes = Math.floor(seconds / 60);
      if (minutes < 60) {
        return interpolate(ngettext("%(n)s minute", "%(n)s minutes", minutes), { n: minutes }, true);
      }
      var hours = Math.floor(minutes / 60);
      return interpolate(ngettext("%(hours)s hour %(minutes)s min", "%(hours)s hours %(minutes)s min", hours),
        { hours: hours, minutes: minutes % 60 }, true);
    }

    function actionUrl(kind, runId) {
      var url = chat.getAttribute(kind === "retry" ? "data-retry-url" : "data-cancel-url") || "";
      return url.replace(/\/0\/(cancel|retry)\/$/, "/" + runId + "/$1/");
    }

    function queueBox(runId) {
      var box = log.querySelector('[data-queue-run="' + runId + '"]');
      if (box) return box;
      box = element("div", "queue-box");
      box.setAttribute("data-queue-run", runId);
      box.setAttribute("data-waited", "0");
      box.setAttribute("data-workers", "");
      var waited = element("span", "cell-sub",
        interpolate(gettext("Waiting for %(waited)s."), { waited: duration(0) }, true));
      waited.setAttribute("data-queue-waited", "");
      box.appendChild(waited);
      var workers = element("span", "queue-workers");
      workers.setAttribute("data-queue-workers", "");
      box.appendChild(workers);
      var actions = element("div", "form-actions");
      [["retry", gettext("Retry"), "btn btn-ghost btn-small"],
       ["cancel", gettext("Cancel"), "btn btn-danger-quiet btn-small"]].forEach(function (spec) {
        var action = element("form", "inline-form");
        action.method = "post";
        action.action = actionUrl(spec[0], runId);
        action.setAttribute("data-queue-action", spec[0]);
        var token = element("input");
        token.type = "hidden";
        token.name = "csrfmiddlewaretoken";
        token.value = csrfToken();
        action.appendChild(token);
        var button = element("button", spec[2], spec[1]);
        button.type = "submit";
        action.appendChild(button);
        actions.appendChild(action);
      });
      box.appendChild(actions);
      var anchor = bubble(runId);
      anchor.parentNode.insertBefore(box, anchor.nextSibling);
      adoptQueueBox(box);
      return box;
    }

    // Counts from the waited seconds the server gave, on this page's clock.
    function adoptQueueBox(box) {
      box.__since = Date.now() - Number(box.getAttribute("data-waited") || 0) * 1000;
      tickQueue(box);
    }

    function tickQueue(box) {
      var seconds = Math.max(0, Math.floor((Date.now() - box.__since) / 1000));
      var line = box.querySelector("[data-queue-waited]");
      if (line) {
        line.textContent = interpolate(gettext("Waiting for %(waited)s."),
          { waited: duration(seconds) }, true);
      }
    }

    function queueState(frame) {
      if (frame.status && frame.status !== "queued") { queueGone(frame.run); return; }
      var box = queueBox(frame.run);
      box.setAttribute("data-waited", String(frame.waited || 0));
      adoptQueueBox(box);
      box.setAttribute("data-workers", frame.workers || "");
      var workers = box.querySelector("[data-queue-workers]");
      if (workers) {
        workers.textContent = frame.workers === "none" ? NO_WORKER :
          (frame.workers === "busy" ? BUSY : "");
      }
    }

    function queueGone(runId) {
      delete queuedSince[runId];
      var box = log.querySelector('[data-queue-run="' + runId + '"]');
      if (box) box.remove();
    }

    // A message a worker takes at once never shows the box: it appears after QUEUE_SHOW_MS.
    var queuedSince = {};
    function queued(runId) {
      if (!(runId in queuedSince)) queuedSince[runId] = Date.now();
    }

    // Once a second the waiting times move; every QUEUE_ASK_EVERY_MS (after the grace
    // period) the socket is asked again how each queued message waits.
    window.setInterval(function () {
      var now = Date.now();
      Object.keys(queuedSince).forEach(function (runId) {
        if (now - queuedSince[runId] < QUEUE_SHOW_MS) return;
        if (!log.querySelector('[data-queue-run="' + runId + '"]')) {
          var box = queueBox(runId);
          box.setAttribute("data-waited", String(Math.floor((now - queuedSince[runId]) / 1000)));
          adoptQueueBox(box);
        }
      });
      var boxes = log.querySelectorAll("[data-queue-run]");
      if (!boxes.length) return;
      var grace = Number(chat.getAttribute("data-queue-grace") || 10) * 1000;
      Array.prototype.forEach.call(boxes, function (box) {
        tickQueue(box);
        if (now - box.__since >= grace && (!box.__asked || now - box.__asked >= QUEUE_ASK_EVERY_MS)) {
          if (send({ type: "queue", run: Number(box.getAttribute("data-queue-run")) })) {
            box.__asked = now;
          }
        }
      });
    }, 1000);

    // Retry and Cancel go over the socket when it is open; otherwise the forms post.
    log.addEventListener("submit", function (event) {
      var target = event.target;
      var action = target.getAttribute && target.getAttribute("data-queue-action");
      var box = action && target.closest("[data-queue-run]");
      if (!box) return;
      var runId = Number(box.getAttribute("data-queue-run"));
      if (send({ type: action, run: runId })) {
        event.preventDefault();
        box.__asked = Date.now();
      }
    });

    Array.prototype.forEach.call(log.querySelectorAll("[data-queue-run]"), adoptQueueBox);

    // --- skill proposals ------------------------------------------------------------------

    function csrfToken() {
      var input = document.querySelector("input[name=csrfmiddlewaretoken]");
      return input ? input.value : "";
    }

    // A JSON POST to the API with the session's CSRF token: resolves to {ok, status, body}.
    function postJson(url, payload) {
      return fetch(url, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
        body: JSON.stringify(payload)
      }).then(function (response) {
        return response.json().catch(function () { return {}; }).then(function (body) {
          return { ok: response.ok, status: response.status, body: body };
        });
      });
    }

    function proposalBox(runId, proposal) {
      var existing = log.querySelector('[data-proposal="' + proposal.proposal + '"]');
      if (existing) return existing;
      var box = element("div", "proposal-box");
      box.setAttribute("data-proposal", proposal.proposal);
      box.setAttribute("data-run", runId);
      // A correction of the template's SOP is proposed the same way, as a change to review.
      box.appendChild(element("strong", "",
        proposal.corrects ? gettext("Send this change to review?") : gettext("Save as a skill?")));
      box.appendChild(document.createTextNode(" " + (proposal.summary || "")));
      var what = element("div", "cell-sub");
      what.appendChild(document.createTextNode(
        (proposal.package ? gettext("New version of") : gettext("New skill")) + " "));
      what.appendChild(element("span", "mono", proposal.package || proposal.name || ""));
      what.appendChild(document.createTextNode(
        " · " + gettext("your team's agents learn it once a reviewer approves.")));
      box.appendChild(what);
      var actions = element("div", "form-actions");
      [["confirm", gettext("Save as skill"), "btn btn-primary btn-small"],
       ["dismiss", gettext("Dismiss"), "btn btn-ghost btn-small"]].forEach(function (spec) {
        var button = element("button", spec[2], spec[1]);
        button.type = "button";
        button.setAttribute("data-proposal-action", spec[0]);
        actions.appendChild(button);
      });
      box.appendChild(actions);
      var anchor = bubble(runId);
      var place = anchor;  // after the run's rating and confirmation boxes, as the page has them
      while (place.nextSibling && place.nextSibling.classList &&
             (place.nextSibling.classList.contains("confirm-box") ||
              place.nextSibling.classList.contains("rate-box"))) {
        place = place.nextSibling;
      }
      anchor.parentNode.insertBefore(box, place.nextSibling);
      return box;
    }

    // What the person's correction did to memory ("Updated memory: …", or that nothing
    // was changed), under the answer it followed.
    function memoryFeedback(runId, data) {
      if (!data.message || log.querySelector('[data-memory-feedback="' + runId + '"]')) return;
      var line = element("div", "memory-feedback", data.message);
      line.setAttribute("data-memory-feedback", runId);
      var anchor = bubble(runId);
      anchor.parentNode.insertBefore(line, anchor.nextSibling);
    }

    function proposalDecided(box, text, link) {
      var actions = box.querySelector(".form-actions");
      if (actions) actions.remove();
      var old = box.querySelector(".proposal-outcome");
      if (old) old.remove();
      var line = element("div", "cell-sub proposal-outcome", text);
      if (link) {
        line.appendChild(document.createTextNode(" "));
        var anchor = element("a", "", gettext("Open the review"));
        anchor.href = link;
        line.appendChild(anchor);
      }
      box.appendChild(line);
      box.classList.add("decided");
    }

    function decideProposal(box, action) {
      var id = box.getAttribute("data-proposal");
      var api = chat.getAttribute("data-proposals-api");
      var buttons = box.querySelectorAll("button");
      Array.prototype.forEach.call(buttons, function (b) { b.disabled = true; });
      postJson(api + id + "/" + action + "/", {}).then(function (answer) {
        var body = answer.body;
        if (!answer.ok) {
          proposalDecided(box, (body.error && body.error.message) ||
            interpolate(gettext("Error %(status)s"), { status: answer.status }, true));
          return;
        }
        if (action === "confirm") {
          proposalDecided(box,
            interpolate(gettext("Saved as a skill: “%(name)s” is waiting for review."),
              { name: body.name }, true),
            chat.getAttribute("data-reviews-url") + body.id + "/");
        } else {
          proposalDecided(box, gettext("Dismissed: nothing was sent to review."));
        }
      }).catch(function () {
        Array.prototype.forEach.call(buttons, function (b) { b.disabled = false; });
        setStatus(gettext("Could not reach the server; try again."));
      });
    }

    // "Was this helpful?" under a finished answer: the run's rating (the Memory Viewer's
    // recall hit rate and the Hub's skill outcomes count it).
    function rateBox(runId) {
      var existing = log.querySelector('[data-rate-run="' + runId + '"]');
      if (existing) return existing;
      var box = element("div", "rate-box");
      box.setAttribute("data-rate-run", runId);
      box.appendChild(element("span", "cell-sub", gettext("Was this helpful?")));
      [["success", gettext("Helpful")], ["failure", gettext("Not helpful")]].forEach(function (spec) {
        var button = element("button", "btn btn-ghost btn-small", spec[1]);
        button.type = "button";
        button.setAttribute("data-rate", spec[0]);
        box.appendChild(button);
      });
      var anchor = bubble(runId);
      anchor.parentNode.insertBefore(box, anchor.nextSibling);
      return box;
    }

    function rate(box, outcome) {
      var buttons = box.querySelectorAll("button");
      Array.prototype.forEach.call(buttons, function (b) { b.disabled = true; });
      var url = chat.getAttribute("data-runs-api") + box.getAttribute("data-rate-run") + "/rating/";
      postJson(url, { outcome: outcome }).then(function (answer) {
        if (!answer.ok) {
          Array.prototype.forEach.call(buttons, function (b) { b.disabled = false; });
          setStatus((answer.body.error && answer.body.error.message) ||
            interpolate(gettext("Error %(status)s"), { status: answer.status }, true));
          return;
        }
        box.replaceChildren(element("span", "cell-sub",
          outcome === "success" ? gettext("Thanks: you rated this answer helpful.")
            : gettext("Thanks: you rated this answer not helpful.")));
      }).catch(function () {
        Array.prototype.forEach.call(buttons, function (b) { b.disabled = false; });
        setStatus(gettext("Could not reach the server; try again."));
      });
    }

    log.addEventListener("click", function (event) {
      var rating = event.target.closest && event.target.closest("button[data-rate]");
      var ratingBox = rating && rating.closest("[data-rate-run]");
      if (ratingBox) return rate(ratingBox, rating.getAttribute("data-rate"));
      var button = event.target.closest && event.target.closest("button[data-proposal-action]");
      var box = button && button.closest("[data-proposal]");
      if (box) decideProposal(box, button.getAttribute("data-proposal-action"));
    });

    // The page's own proposal forms (rendered with the conversation) use the API too.
    log.addEventListener("submit", function (event) {
      var target = event.target;
      var action = target.getAttribute && target.getAttribute("data-proposal-action");
      var box = action && target.closest("[data-proposal]");
      if (!box || !window.fetch) return;
      event.preventDefault();
      decideProposal(box, action);
    });

    function onEvent(frame) {
      var node = bubble(frame.run);
      var data = frame.data || {};
      if (frame.kind === "delta") {
        var text = textNode(node);
        if (text.data === "…") text.data = "";
        text.data += data.text || "";
      } else if (frame.kind === "reply") {
        textNode(node).data = data.text || "";
        answeredBy(node, frame.answered_by);
      } else if (frame.kind === "notice") {
        // A run that ended without a reply: the line its IM conversation got too.
        textNode(node).data = data.text || "";
      } else if (frame.kind === "status") {
        setMeta(node, LABELS[data.status] || data.status);
        if (data.status === "queued") queued(frame.run);
        else queueGone(frame.run);
        if (data.status === "failed") node.classList.add("failed");
        if (data.status === "failed" && data.error) modelsHint(node, data.error, frame.run);
        if (data.status === "completed") rateBox(frame.run);
      } else if (frame.kind === "step" && data.status === "started") {
        queueGone(frame.run);
        setMeta(node, interpolate(gettext("Working: %(step)s"),
          { step: STEP_WORDS[data.name] || STEP_WORDS[data.kind] || data.name }, true));
      } else if (frame.kind === "wait") {
        setMeta(node, gettext("Waiting"));
        if (frame.confirmation) confirmationBox(frame.run, frame.confirmation);
      } else if (frame.kind === "resume") {
        setMeta(node, gettext("Resumed"));
      } else if (frame.kind === "skill_proposal") {
        proposalBox(frame.run, data);
      } else if (frame.kind === "memory_feedback") {
        memoryFeedback(frame.run, data);
      } else if (frame.kind === "effect" && data.status === "failed") {
        effectFailed(node, data, frame.sentence);
      }
      scrollDown();
    }

    function onFrame(message) {
      var frame;
      try { frame = JSON.parse(message.data); } catch (e) { return; }
      if (frame.id) after = frame.id;
      if (frame.type === "ready") {
        if (after === null) after = frame.after;
        retries = 0;
        setStatus(gettext("Live"));
      } else if (frame.type === "event") {
        onEvent(frame);
      } else if (frame.type === "accepted") {
        if (pending) { pending.node.classList.remove("pending"); pending = null; }
        bubble(frame.run);
        scrollDown();
      } else if (frame.type === "decided") {
        markDecided(frame.confirmation);
      } else if (frame.type === "queue") {
        queueState(frame);
      } else if (frame.type === "error") {
        if (pending) {
          refused(pending, frame.message || gettext("Error"));
          pending = null;
        } else {
          setStatus(frame.message || gettext("Error"));
        }
      }
    }

    // A message the server refused: its bubble says so and the text goes back to the field.
    function refused(message, reason) {
      message.node.classList.remove("pending");
      message.node.classList.add("failed");
      setMeta(message.node, interpolate(gettext("Not sent: %(reason)s"), { reason: reason }, true));
      var field = form && form.querySelector("textarea[name=text]");
      if (field && !field.value) field.value = message.text;
    }

    function connect() {
      var path = chat.getAttribute("data-ws-path");
      if (after !== null) path = path.replace(/after=\d*/, "after=" + after);
      var scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
      socket = new WebSocket(scheme + window.location.host + path);
      socket.addEventListener("message", onFrame);
      socket.addEventListener("close", function (event) {
        socket = null;
        if (event.code === 4404 || event.code === 4401) {
          setStatus(gettext("This conversation is not available."));
          return;
        }
        // Reconnect with a growing delay; events are resumed after the last one seen.
        retries += 1;
        setStatus(gettext("Reconnecting…"));
        window.setTimeout(connect, Math.min(15000, 500 * Math.pow(2, retries)));
      });
    }

    function send(frame) {
      if (!socket || socket.readyState !== WebSocket.OPEN) return false;
      socket.send(JSON.stringify(frame));
      return true;
    }

    function decide(confirmationId, decision) {
      send({ type: "decide", confirmation: confirmationId, decision: decision });
    }

    if (form) {
      form.addEventListener("submit", function (event) {
        var field = form.querySelector("textarea[name=text]");
        var text = field ? field.value.trim() : "";
        if (!text) return;  // the server shows the "required" error
        if (!send({ type: "message", text: text })) return;  // falls back to posting
        event.preventDefault();
        removeEmptyNote();
        var node = element("div", "bubble user pending", text);
        log.appendChild(node);
        pending = { node: node, text: text };
        field.value = "";
        scrollDown();
      });
    }

    // Server-rendered confirmation forms decide over the socket when it is open.
    log.addEventListener("submit", function (event) {
      var target = event.target;
      var id = target.getAttribute && target.getAttribute("data-decide");
      if (!id || !event.submitter) return;
      if (send({ type: "decide", confirmation: Number(id), decision: event.submitter.value })) {
        event.preventDefault();
      }
    });

    scrollDown();
    connect();
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
