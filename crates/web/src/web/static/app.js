// memfs web: follows the memory live. Every 700 ms it asks /head for the
// number of the next version; when it moved, it fetches this page's main
// part again (rendered and escaped by the server) and swaps it in.
(function () {
  "use strict";
  var main = document.getElementById("main");
  if (!main) return;
  var busy = false;
  function tick() {
    if (busy) return;
    busy = true;
    fetch((main.getAttribute("data-base") || "") + "/head", { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (h) {
        if (!h) return null;
        var count = document.getElementById("review-count");
        if (count) count.textContent = String(h.review);
        if (String(h.next) === main.getAttribute("data-head")) return null;
        var u = new URL(window.location.href);
        u.searchParams.set("partial", "1");
        return fetch(u.toString(), { credentials: "same-origin", cache: "no-store" })
          .then(function (p) { return p.ok ? p.text() : null; })
          .then(function (html) {
            if (html === null) return;
            main.innerHTML = html;
            main.setAttribute("data-head", String(h.next));
            var live = document.getElementById("live");
            if (live) {
              live.classList.add("changed");
              setTimeout(function () { live.classList.remove("changed"); }, 800);
            }
          });
      })
      .catch(function () {})
      .then(function () { busy = false; });
  }
  setInterval(tick, 700);
})();
