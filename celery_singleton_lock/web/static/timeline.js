// Each lock name's timeline, drawn from what this page has read (no history is kept in the store):
// a row per key, each hold a bar from its start (the holder's clock) to when it was last seen, a
// copy waiting or queued a mark when seen, a window a shaded span until it ends. History is kept for
// the last minutes only and for a bounded number of keys, so a page left open stays small.
"use strict";

var TIMELINE = (function () {
  var SVG = "http://www.w3.org/2000/svg";
  var PAST_MS = 5 * 60 * 1000, AHEAD_MS = 60 * 1000;
  var MAX_KEYS = 500, ROWS = 12, WIDTH = 900, ROW = 14, LABEL = 220;

  function history() {
    var names = {};               // name -> key -> {seen, spans: [], marks: [], windows: []}

    function entry(name, key, now) {
      var keys = names[name] = names[name] || {};
      var e = keys[key] = keys[key] || {seen: now, spans: [], marks: [], windows: []};
      e.seen = now;
      return e;
    }

    function mark(e, kind, t) {
      var previous = e.marks.length ? e.marks[e.marks.length - 1] : null;
      if (previous && previous.kind === kind && t - previous.t < 5000) return;
      e.marks.push({kind: kind, t: t});
    }

    function see(records, now) {
      records.forEach(function (r) {
        var name = r.name || r.task;
        var key = r.kind === "queued" ? r.key.replace(/:queued$/, "") : r.key;
        var e = entry(name, key, now);
        if (r.kind === "queued" || r.state === "queued") mark(e, "queued", now);
        if (r.waiting) mark(e, "wait", now);
        if (r.state === "running") {
          var id = r.task_id + " " + r.since_ms + " " + r.pid;
          var span = e.spans.filter(function (s) { return s.id === id; })[0];
          if (!span) e.spans.push(span = {id: id, start: r.since_ms || now, who: r.host + " pid " + r.pid});
          span.end = now;
        }
        if (r.window_ms) {
          var w = e.windows.length ? e.windows[e.windows.length - 1] : null;
          if (w && w.end >= now) w.end = Math.max(w.end, now + r.window_ms);
          else e.windows.push({start: now, end: now + r.window_ms});
        }
      });
      prune(now);
    }

    function prune(now) {
      var since = now - PAST_MS;
      Object.keys(names).forEach(function (name) {
        var keys = names[name];
        var all = Object.keys(keys);
        all.forEach(function (key) {
          var e = keys[key];
          e.spans = e.spans.filter(function (s) { return s.end >= since; });
          e.marks = e.marks.filter(function (m) { return m.t >= since; });
          e.windows = e.windows.filter(function (w) { return w.end >= since; });
          if (!e.spans.length && !e.marks.length && !e.windows.length) delete keys[key];
        });
        all = Object.keys(keys);
        if (all.length > MAX_KEYS) {
          all.sort(function (a, b) { return keys[a].seen - keys[b].seen; });
          all.slice(0, all.length - MAX_KEYS).forEach(function (key) { delete keys[key]; });
        }
        if (!Object.keys(keys).length) delete names[name];
      });
    }

    return {see: see, of: function (name) { return names[name] || {}; },
            names: function () { return Object.keys(names); }};
  }

  function node(tag, attributes, title) {
    var n = document.createElementNS(SVG, tag);
    Object.keys(attributes).forEach(function (a) { n.setAttribute(a, String(attributes[a])); });
    if (title) {
      var t = document.createElementNS(SVG, "title");
      t.textContent = title;
      n.appendChild(t);
    }
    return n;
  }

  function draw(figure, store, name, now) {
    var keys = store.of(name);
    var chosen = Object.keys(keys).sort(function (a, b) { return keys[b].seen - keys[a].seen; }).slice(0, ROWS);
    var old = figure.querySelector("svg");
    if (old) old.remove();
    if (!chosen.length) return;
    var from = now - PAST_MS, to = now + AHEAD_MS;
    var x = function (t) { return LABEL + (Math.max(from, Math.min(to, t)) - from) / (to - from) * (WIDTH - LABEL); };
    var height = chosen.length * ROW + 16;
    var svg = node("svg", {viewBox: "0 0 " + WIDTH + " " + height, width: WIDTH, height: height, "class": "timeline-svg",
                           role: "img", "aria-label": "timeline of " + name});
    chosen.forEach(function (key, i) {
      var e = keys[key], y = i * ROW;
      var label = node("text", {x: 2, y: y + ROW - 3, "class": "tl-key"}, key);
      label.appendChild(document.createTextNode(key.length > 34 ? "…" + key.slice(-33) : key));
      svg.appendChild(label);
      e.windows.forEach(function (w) {
        svg.appendChild(node("rect", {x: x(w.start), y: y + 1, width: Math.max(1, x(w.end) - x(w.start)),
                                      height: ROW - 2, "class": "tl-window"},
                             "window until " + CSL.clock(w.end)));
      });
      e.spans.forEach(function (s) {
        svg.appendChild(node("rect", {x: x(s.start), y: y + 3, width: Math.max(2, x(s.end) - x(s.start)),
                                      height: ROW - 6, "class": "tl-hold"},
                             "held by " + s.who + " from " + CSL.clock(s.start) + " to " + CSL.clock(s.end)));
      });
      e.marks.forEach(function (m) {
        svg.appendChild(node("circle", {cx: x(m.t), cy: y + ROW / 2, r: 3, "class": "tl-" + m.kind},
                             (m.kind === "wait" ? "a copy waits" : "a copy queued") + " at " + CSL.clock(m.t)));
      });
    });
    svg.appendChild(node("line", {x1: x(now), x2: x(now), y1: 0, y2: height - 14, "class": "tl-now"}));
    var axis = node("text", {x: LABEL, y: height - 2, "class": "tl-axis"});
    axis.textContent = CSL.clock(from) + " … now " + CSL.clock(now) + " … +1 min";
    svg.appendChild(axis);
    figure.appendChild(svg);
  }

  return {history: history, draw: draw};
})();
