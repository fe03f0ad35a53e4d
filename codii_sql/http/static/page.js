// codii-sql's page, a little quicker: "/" focuses the search, "j"/"k" move between results,
// Enter opens the current one, and the results follow the query as it is typed. The page works
// without this script: search and results are rendered by the server.
(function () {
  "use strict";
  var current = -1, timer = null, pending = null;
  var q = document.getElementById("q"), form = q && q.form;
  function results() { return Array.prototype.slice.call(document.querySelectorAll(".result")); }
  function typing(target) {
    var tag = target && target.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (target && target.isContentEditable);
  }
  function select(index) {
    var all = results();
    if (!all.length) { return; }
    current = Math.max(0, Math.min(all.length - 1, index));
    all.forEach(function (el, i) { el.classList.toggle("current", i === current); });
    all[current].scrollIntoView({block: "nearest"});
  }
  // The form's state as a URL without its empty fields: the link to paste.
  function address() {
    var params = new URLSearchParams();
    new FormData(form).forEach(function (value, key) { if (String(value).trim()) { params.append(key, value); } });
    return "/?" + params.toString();
  }
  // Ask for the page of the query typed so far; show its results if the query is still that one.
  function instant() {
    var asked = q.value.trim(), url = address();
    if (asked.length < 3) { return; }
    if (pending) { pending.abort(); }
    pending = new AbortController();
    fetch(url, {signal: pending.signal, credentials: "same-origin"}).then(function (response) {
      return response.ok || response.status === 400 ? response.text() : null;
    }).then(function (html) {
      if (html === null || q.value.trim() !== asked) { return; }
      var page = new DOMParser().parseFromString(html, "text/html");
      var fresh = page.querySelector("main"), old = document.querySelector("main");
      if (!fresh || !old) { return; }
      old.replaceWith(document.importNode(fresh, true));
      document.title = page.title;
      history.replaceState(null, "", url);
      current = -1;
    }).catch(function () { /* aborted by a newer query, or the server is away: Enter still works */ });
  }
  if (form && window.fetch && window.AbortController && window.DOMParser) {
    q.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(instant, 250); });
    form.addEventListener("submit", function (event) { event.preventDefault(); window.location.href = address(); });
  }
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) { return; }
    if (event.key === "Escape" && typing(event.target)) { event.target.blur(); return; }
    if (typing(event.target)) { return; }
    if (event.key === "/") {
      if (q) { event.preventDefault(); q.focus(); q.select(); }
    } else if (event.key === "j") {
      select(current + 1);
    } else if (event.key === "k") {
      select(current - 1);
    } else if (event.key === "Enter" && current >= 0) {
      var href = results()[current].getAttribute("data-href");
      if (href) { window.location.href = href; }
    }
  });
})();
