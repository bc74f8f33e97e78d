// The list of locks: polls api/locks every second (the next poll after the last answer), groups the
// locks by lock name, filters by name and searches keys and descriptions, and keeps each group's
// timeline. A store that does not answer is said at the top; the page keeps asking and recovers.
"use strict";

(function () {
  var EVERY_MS = 1000;
  var ROWS_SHOWN = 100;           // per group, until "show all" is clicked
  var groupsNode = document.getElementById("groups");
  var nameFilter = document.getElementById("name-filter");
  var search = document.getElementById("search");
  var template = document.getElementById("group-template");
  var expanded = {};              // lock name -> every row shown
  var last = [];                  // the last list read
  var timelines = TIMELINE.history();
  var rendered = 0;

  function groupName(r) { return r.name || r.task; }

  function matches(r, text) {
    if (!text) return true;
    text = text.toLowerCase();
    return r.key.toLowerCase().indexOf(text) >= 0 || (r.describe || "").toLowerCase().indexOf(text) >= 0 ||
      r.digest.indexOf(text) >= 0;
  }

  function names(records) {
    var seen = {};
    records.forEach(function (r) { seen[groupName(r)] = true; });
    return Object.keys(seen).sort();
  }

  function syncFilter(all) {
    var chosen = nameFilter.value;
    var have = Array.prototype.map.call(nameFilter.options, function (o) { return o.value; }).slice(1);
    if (have.join("\u0000") === all.join("\u0000")) return;
    while (nameFilter.options.length > 1) nameFilter.remove(1);
    all.forEach(function (name) {
      var option = CSL.el("option", name);
      option.value = name;
      nameFilter.appendChild(option);
    });
    nameFilter.value = all.indexOf(chosen) >= 0 ? chosen : "";
  }

  function copies(records) {
    // how many queued copies (a queued scope's enqueue lock) each digest has beside its holder
    var queued = {};
    records.forEach(function (r) {
      if (r.kind === "queued") queued[groupName(r) + " " + r.digest] = (queued[groupName(r) + " " + r.digest] || 0) + 1;
    });
    return queued;
  }

  function row(r, queued, now) {
    var tr = document.createElement("tr");
    tr.dataset.key = r.key;
    if (r.lost) tr.className = "lost";
    else if (r.stale) tr.className = "stale";
    var keyCell = CSL.el("td");
    var link = CSL.el("a", r.key);
    link.href = "lock?key=" + encodeURIComponent(r.key);
    keyCell.appendChild(link);
    tr.appendChild(keyCell);
    tr.appendChild(CSL.el("td", r.describe || "-", "call"));
    tr.appendChild(CSL.el("td", CSL.stateText(r)));
    tr.appendChild(CSL.el("td", CSL.holderText(r)));
    tr.appendChild(CSL.el("td", CSL.duration(r.age_ms)));
    tr.appendChild(CSL.el("td", CSL.duration(r.pttl_ms)));
    tr.appendChild(CSL.el("td", CSL.windowEnd(r, now)));
    var n = r.kind === "run" ? (queued[groupName(r) + " " + r.digest] || 0) : 0;
    var waits = r.waiting ? ["a copy waits"] : [];
    tr.appendChild(CSL.el("td", (n ? [n + " queued"] : []).concat(waits).join(", ") || "-"));
    tr.appendChild(CSL.el("td", CSL.flags(r).join(", ") || "-", "flags"));
    var actions = CSL.el("td", null, "actions");
    if (CSL.canRelease && r.state !== "released") actions.appendChild(CSL.releaseButton(r.key, poll));
    tr.appendChild(actions);
    return tr;
  }

  function render() {
    var now = Date.now();
    var all = names(last.concat(timelines.names().map(function (name) { return {name: name}; })));
    syncFilter(all);
    var text = search.value.trim();
    var byName = {};
    timelines.names().forEach(function (name) {  // a name whose locks are gone keeps its timeline
      if (!nameFilter.value || name === nameFilter.value) byName[name] = [];
    });
    last.forEach(function (r) {
      var name = groupName(r);
      if (nameFilter.value && name !== nameFilter.value) return;
      (byName[name] = byName[name] || []).push(r);
    });
    var fragment = document.createDocumentFragment();
    var shown = 0;
    Object.keys(byName).sort().forEach(function (name) {
      var records = byName[name];
      var chosen = records.filter(function (r) { return matches(r, text); });
      if (!chosen.length && (text || !records.length && !Object.keys(timelines.of(name)).length)) return;
      var group = template.content.firstElementChild.cloneNode(true);
      group.dataset.name = name;
      group.querySelector(".group-name").textContent = name;
      var keys = {};
      records.forEach(function (r) { keys[r.key] = true; });
      group.querySelector(".group-count").textContent = "· " + Object.keys(keys).length + " lock(s), " +
        records.length + " holder(s)";
      TIMELINE.draw(group.querySelector(".timeline"), timelines, name, now);
      var body = group.querySelector("tbody");
      var queued = copies(records);
      var limit = expanded[name] ? chosen.length : Math.min(chosen.length, ROWS_SHOWN);
      for (var i = 0; i < limit; i++) body.appendChild(row(chosen[i], queued, now));
      shown += chosen.length;
      if (limit < chosen.length) {
        var more = group.querySelector(".more");
        more.hidden = false;
        more.textContent = "show all " + chosen.length;
        more.addEventListener("click", function () { expanded[name] = true; render(); });
      }
      fragment.appendChild(group);
    });
    groupsNode.replaceChildren(fragment);
    document.getElementById("summary").textContent = shown + " of " + last.length + " holder(s) shown";
    if (!last.length) groupsNode.insertBefore(CSL.el("p", "no locks held", "empty"), groupsNode.firstChild);
    if (!rendered++ && window.performance) performance.mark("csl-first-render");  // the benchmark's first paint
  }

  function poll() {
    var started = Date.now();
    return fetch("api/locks", {credentials: "same-origin", cache: "no-store"}).then(function (response) {
      return response.json().then(function (body) { return {ok: response.ok, body: body}; });
    }).then(function (answer) {
      if (!answer.ok) throw new Error(answer.body.error || "no answer");
      if (!rendered && window.performance) performance.mark("csl-first-answer");
      last = answer.body;
      timelines.see(last, Date.now());
      render();
      CSL.status("updated " + CSL.clock(Date.now()) + " (read in " + (Date.now() - started) + " ms)", false);
    }).catch(function (error) {
      CSL.status("the lock store cannot be read: " + error.message + " (showing what was last read; retrying)", true);
    });
  }

  function loop() {
    poll().then(function () { window.setTimeout(loop, EVERY_MS); });
  }

  nameFilter.addEventListener("change", render);
  search.addEventListener("input", render);
  CSL.back();
  loop();
})();
