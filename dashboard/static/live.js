// cairn's dashboard: when the server says something this page shows changed
// (server-sent events), fetch the page again and swap in its <main>. The page
// reads without this script; it only keeps it fresh.
(function () {
  "use strict";
  var body = document.body;
  if (!window.EventSource || !window.fetch || !window.DOMParser || body.dataset.live !== "on") {
    return;
  }
  var busy = false, again = false;
  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html === null) { return; }
        var next = new DOMParser().parseFromString(html, "text/html").querySelector("main");
        var main = document.querySelector("main");
        if (next && main) {
          var open = {};
          main.querySelectorAll("details").forEach(function (d, i) { open[i] = d.open; });
          next.querySelectorAll("details").forEach(function (d, i) { if (i in open) { d.open = open[i]; } });
          main.replaceWith(next);
          body.dataset.updated = String(Date.now());
        }
      })
      .catch(function () {})
      .then(function () { busy = false; if (again) { again = false; refresh(); } });
  }
  var es = new EventSource("/events?scope=" + encodeURIComponent(body.dataset.scope || ""));
  es.addEventListener("change", refresh);
  es.addEventListener("open", function () { body.dataset.live = "connected"; });
})();
