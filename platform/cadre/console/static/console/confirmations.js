// Cadre console — live confirmation queue. Listens on the ws/confirmations/ websocket and,
// when a confirmation is created, voted on or decided, fetches the queue fragment the server
// renders (same permissions as the page) and swaps it in. Without this script (or without a
// websocket) the page still shows the queue as of its last load.
(function () {
  "use strict";

  var wrap = document.getElementById("confirmation-queue-wrap");
  if (!wrap || !window.WebSocket) return;
  var status = document.getElementById("live-status");
  var queueUrl = wrap.getAttribute("data-queue-url");
  var socketPath = wrap.getAttribute("data-socket-path") || "/ws/confirmations/";
  var retryDelay = 1000;
  var refreshTimer = null;
  var inFlight = false;
  var again = false;

  function showStatus(text, live) {
    if (!status) return;
    status.hidden = false;
    status.textContent = text;
    status.className = "badge " + (live ? "badge-active" : "badge-archived");
  }

  function refresh() {
    // Coalesce bursts of events into one request; never run two at once.
    if (inFlight) { again = true; return; }
    inFlight = true;
    fetch(queueUrl, { credentials: "same-origin", headers: { "X-Requested-With": "fetch" } })
      .then(function (response) {
        if (!response.ok) throw new Error("queue " + response.status);
        return response.text();
      })
      .then(function (html) {
        var current = document.getElementById("confirmation-queue");
        if (current) current.outerHTML = html;
      })
      .catch(function () { showStatus(gettext("Live updates paused"), false); })
      .then(function () {
        inFlight = false;
        if (again) { again = false; refresh(); }
      });
  }

  function scheduleRefresh() {
    clearTimeout(refreshTimer);
    refreshTimer = setTimeout(refresh, 150);
  }

  function connect() {
    var scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    var socket = new WebSocket(scheme + window.location.host + socketPath);
    socket.onopen = function () {
      retryDelay = 1000;
      showStatus(gettext("Live"), true);
    };
    socket.onmessage = function (event) {
      var message;
      try { message = JSON.parse(event.data); } catch (e) { return; }
      if (message.type === "queue") {
        // The server's view on (re)connect: catch up on anything missed while offline.
        scheduleRefresh();
      } else if (message.type === "created" || message.type === "vote" || message.type === "decided") {
        scheduleRefresh();
      }
    };
    socket.onclose = function (event) {
      if (event.code === 4401) { showStatus(gettext("Sign in again for live updates"), false); return; }
      showStatus(gettext("Reconnecting…"), false);
      setTimeout(connect, retryDelay);
      retryDelay = Math.min(retryDelay * 2, 30000);
    };
  }

  connect();
})();
