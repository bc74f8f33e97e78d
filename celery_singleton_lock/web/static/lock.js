// One lock's page: every place of it (k of N), its holders and the last fence its bucket handed out,
// read from api/lock every second.
"use strict";

(function () {
  var key = new URLSearchParams(window.location.search).get("key") || "";
  document.getElementById("lock-key").textContent = key;

  function fact(list, term, value) {
    list.appendChild(CSL.el("dt", term));
    list.appendChild(CSL.el("dd", value));
  }

  function render(lock) {
    var now = Date.now();
    var facts = document.getElementById("lock-facts");
    facts.replaceChildren();
    var first = lock.places[0];
    fact(facts, "lock name", lock.name || first.task);
    fact(facts, "digest", first.digest);
    fact(facts, "call", first.describe || "- (not described: singleton_lock_describe is off)");
    fact(facts, "places", first.limit === null ? "one holder (a singleton lock)" :
      first.held + " of " + first.limit + " taken");
    fact(facts, "fencing token", lock.fence === null ? "none handed out yet" :
      lock.fence + " (the last fence this key's bucket handed out; a holder's fence is at most this)");
    var actions = document.getElementById("lock-actions");
    actions.replaceChildren();
    if (CSL.canRelease) actions.appendChild(CSL.releaseButton(lock.key, poll));
    var body = document.querySelector("#places tbody");
    body.replaceChildren();
    lock.places.forEach(function (r, i) {
      var tr = document.createElement("tr");
      [String(i + 1) + (first.limit === null ? "" : " of " + first.limit), CSL.stateText(r), CSL.holderText(r),
       r.describe || "-", CSL.duration(r.age_ms), CSL.duration(r.pttl_ms),
       r.since_renewal_ms === null ? "-" : CSL.duration(r.since_renewal_ms) + " ago", CSL.windowEnd(r, now),
       CSL.flags(r).join(", ") || "-", r.reason].forEach(function (text) { tr.appendChild(CSL.el("td", text)); });
      body.appendChild(tr);
    });
  }

  function poll() {
    return fetch("api/lock?key=" + encodeURIComponent(key), {credentials: "same-origin", cache: "no-store"})
      .then(function (response) {
        return response.json().then(function (body) { return {status: response.status, body: body}; });
      }).then(function (answer) {
        if (answer.status === 404) {
          document.getElementById("lock-facts").replaceChildren(CSL.el("p", answer.body.error));
          document.querySelector("#places tbody").replaceChildren();
          document.getElementById("lock-actions").replaceChildren();
          CSL.status("not held now (" + CSL.clock(Date.now()) + ")", false);
          return;
        }
        if (answer.status !== 200) throw new Error(answer.body.error || "HTTP " + answer.status);
        render(answer.body);
        CSL.status("updated " + CSL.clock(Date.now()), false);
      }).catch(function (error) {
        CSL.status("the lock store cannot be read: " + error.message + " (retrying)", true);
      });
  }

  function loop() { poll().then(function () { window.setTimeout(loop, 1000); }); }
  loop();
})();
