// Shared by the page's scripts. Data goes into the page as text only (textContent, attributes set
// one by one), never as markup: a key, an argument or a description cannot become an element.
"use strict";

var CSL = (function () {
  var config = document.getElementById("csl-config").dataset;

  function el(tag, text, className) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (className) node.className = className;
    return node;
  }

  function duration(ms) {
    if (ms === null || ms === undefined) return "?";
    if (ms < 0) return ms === -1 ? "never" : "?";
    if (ms < 1000) return ms + "ms";
    var s = ms / 1000;
    if (s < 60) return s.toFixed(1) + "s";
    var m = Math.floor(s / 60), sec = Math.floor(s % 60);
    if (m < 60) return m + "m" + String(sec).padStart(2, "0") + "s";
    var h = Math.floor(m / 60);
    if (h < 24) return h + "h" + String(m % 60).padStart(2, "0") + "m";
    return Math.floor(h / 24) + "d" + String(h % 24).padStart(2, "0") + "h";
  }

  function clock(epochMs) {
    return new Date(epochMs).toLocaleTimeString();
  }

  // Who holds it: a task, a task under a shared name (lock_name, SharedLock), or a SharedLock
  // held outside any task.
  function holderKind(r) {
    if (r.state === "foreign") return "not a lock";
    if (!r.task_id) return "SharedLock (outside a task)";
    if (r.name && r.task !== r.name) return "task " + r.task + " under " + r.name;
    return "task " + r.task;
  }

  function holderText(r) {
    return holderKind(r) + " · " + (r.host || "?") + " pid " + (r.pid || "?") + " · id " + (r.task_id || "-");
  }

  function stateText(r) {
    if (r.limit === null || r.limit === undefined) return r.state;
    return r.state + " (" + r.held + " of " + r.limit + ")";
  }

  function windowEnd(r, now) {
    return r.window_ms ? clock(now + r.window_ms) + " (in " + duration(r.window_ms) + ")" : "-";
  }

  function flags(r) {
    var names = [];
    if (r.state === "queued") names.push("queued");
    if (r.state === "foreign") names.push("foreign");
    if (r.stale) names.push("stale");
    if (r.lost) names.push("lost holder");
    return names;
  }

  function status(text, bad) {
    var node = document.getElementById("status");
    node.textContent = text;
    node.className = bad ? "bad" : "ok";
  }

  function message(text, bad) {
    var node = document.getElementById("message");
    node.textContent = text;
    node.hidden = !text;
    node.className = bad ? "bad" : "ok";
  }

  function post(url, fields) {
    fields.csrf_token = config.csrf;
    return fetch(url, {
      method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-CSRFToken": config.csrf},
      body: JSON.stringify(fields)
    }).then(function (response) {
      return response.json().then(function (body) { return {status: response.status, body: body}; },
        function () { return {status: response.status, body: {error: "HTTP " + response.status}}; });
    });
  }

  // The Release button's work: confirm, post, and for a live holder confirm the forced release.
  function release(key, done) {
    if (!window.confirm("Release the lock " + key + "?")) return;
    post("api/release", {key: key}).then(function (answer) {
      if (answer.status === 409 && answer.body.needs_force) {
        var why = (answer.body.messages || []).join("\n");
        if (!window.confirm(why + "\n\nIts holder still runs. Release it anyway (it logs the lock as lost)?")) {
          message("not released: " + why, true);
          return done && done();
        }
        return post("api/release", {key: key, force: "1"});
      }
      return answer;
    }).then(function (answer) {
      if (!answer) return;
      var text = answer.body.messages ? answer.body.messages.join("\n") : answer.body.error;
      message(text, answer.status !== 200);
      if (done) done();
    }).catch(function (error) { message("release failed: " + error, true); });
  }

  function releaseButton(key, done) {
    var button = el("button", "Release", "release");
    button.type = "button";
    button.dataset.key = key;
    button.addEventListener("click", function () { release(key, done); });
    return button;
  }

  function back() {
    if (!config.back) return;
    var nav = document.getElementById("back");
    if (!nav) return;
    var link = el("a", config.backLabel || "back");
    link.href = config.back;
    nav.appendChild(link);
  }

  return {config: config, canRelease: config.release === "1", el: el, duration: duration, clock: clock,
          holderKind: holderKind, holderText: holderText, stateText: stateText, windowEnd: windowEnd,
          flags: flags, status: status, message: message, releaseButton: releaseButton, back: back};
})();
