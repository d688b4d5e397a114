// The console's only script (docs/console.md, "Live updates"). It never builds markup from
// data: on a change it fetches the page again, parses it with DOMParser (which runs no
// scripts) and swaps in the server-rendered, escaped regions marked data-live. Everything
// works without it; it only saves the operator a reload.
"use strict";
(function () {
  var pending = null;

  function swap(html) {
    var doc = new DOMParser().parseFromString(html, "text/html");
    var focused = document.activeElement && document.activeElement.id;
    document.querySelectorAll("[data-live]").forEach(function (old) {
      var fresh = doc.getElementById(old.id);
      if (fresh && fresh.innerHTML !== old.innerHTML) {
        old.replaceWith(document.importNode(fresh, true));
      }
    });
    var oldCount = document.getElementById("pending-count");
    var newCount = doc.getElementById("pending-count");
    var link = document.querySelector('nav a[href="/ui/approvals"]');
    if (link) {
      if (oldCount) oldCount.remove();
      if (newCount) link.appendChild(document.importNode(newCount, true));
    }
    if (focused) {
      var again = document.getElementById(focused);
      if (again && again !== document.activeElement) again.focus();
    }
    tick();
    poll();
  }

  function refresh() {
    if (pending) return;
    pending = setTimeout(function () {
      pending = null;
      fetch(location.href, { credentials: "same-origin", cache: "no-store" })
        .then(function (r) {
          if (r.redirected || !r.ok) { location.reload(); return null; }
          return r.text();
        })
        .then(function (t) { if (t) swap(t); })
        .catch(function () {});
    }, 150);
  }

  // A running process's output tail refreshes on its own while it runs.
  var polling = null;
  function poll() {
    var el = document.querySelector("[data-poll]");
    if (polling) { clearTimeout(polling); polling = null; }
    if (el) polling = setTimeout(refresh, parseInt(el.getAttribute("data-poll"), 10) || 1000);
  }

  function span(s) {
    if (s < 60) return s + " s";
    if (s < 3600) return Math.floor(s / 60) + " min";
    if (s < 86400) { var m = Math.floor((s % 3600) / 60); return Math.floor(s / 3600) + " h " + (m < 10 ? "0" : "") + m + " min"; }
    return Math.floor(s / 86400) + " d";
  }

  // Relative times and expiry countdowns stay current between updates.
  function tick() {
    var now = Date.now();
    document.querySelectorAll("time[data-ms] .rel").forEach(function (el) {
      var d = Math.round((now - parseInt(el.parentNode.getAttribute("data-ms"), 10)) / 1000);
      el.textContent = Math.abs(d) < 2 ? "just now" : d > 0 ? span(d) + " ago" : "in " + span(-d);
    });
    document.querySelectorAll("[data-countdown]").forEach(function (el) {
      var left = Math.round((parseInt(el.getAttribute("data-countdown"), 10) - now) / 1000);
      el.textContent = left > 0 ? "in " + span(left) : "now";
    });
  }

  // The stream holds one of the browser's few connections to moat (six per host): it is
  // closed as soon as the page is left, so pages kept for "back" never pile them up.
  var es = null;
  function disconnect() { if (es) { es.close(); es = null; } }

  function connect() {
    var live = document.getElementById("live");
    if (!window.EventSource || !live || es) return;
    es = new EventSource("/ui/events");
    es.addEventListener("open", function () { live.classList.add("on"); live.title = "Live updates: connected"; });
    es.addEventListener("error", function () { live.classList.remove("on"); live.title = "Live updates: reconnecting"; });
    es.addEventListener("change", refresh);
  }

  window.addEventListener("pagehide", disconnect);
  window.addEventListener("pageshow", function (e) { if (e.persisted) { connect(); refresh(); } });

  document.addEventListener("DOMContentLoaded", function () {
    connect();
    tick();
    setInterval(tick, 1000);
    poll();
  });
})();
