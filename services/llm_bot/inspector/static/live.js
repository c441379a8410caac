// llm-bot inspector: a conversation's new turns appear without a reload.
// Polls the page's JSON twin (?format=json) every 2 s while the tab is visible; when the
// conversation changed (last turn, memory version or raw trace length), fetches the page
// again and swaps its <main> (markup the server escaped; no script in it runs).
(function () {
  "use strict";
  var marker = document.querySelector("[data-live]");
  if (!marker) { return; }
  var seen = marker.getAttribute("data-live");
  var busy = false;

  function stateOf(data) {
    return [data.last_turn, data.version, (data.raw_trace || []).length].join(":");
  }

  function swap(html) {
    var fresh = new DOMParser().parseFromString(html, "text/html").querySelector("main");
    var main = document.querySelector("main");
    if (fresh && main) {
      main.replaceChildren.apply(main, Array.from(fresh.childNodes));
    }
  }

  function poll() {
    if (busy || document.hidden) { return; }
    busy = true;
    var url = window.location.pathname;
    fetch(url + "?format=json", { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (data) {
        if (!data || stateOf(data) === seen) { return null; }
        seen = stateOf(data);
        return fetch(url, { credentials: "same-origin", cache: "no-store" })
          .then(function (r) { return r.ok ? r.text() : null; })
          .then(function (html) { if (html) { swap(html); } });
      })
      .catch(function () { /* the next poll tries again */ })
      .then(function () { busy = false; });
  }

  window.setInterval(poll, 2000);
})();
