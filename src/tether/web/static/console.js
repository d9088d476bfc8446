// tether console: live updates of a run page, without a reload.
// Polls the element's data-src every second (ETag: an unchanged page costs a 304) and
// swaps in the new HTML; stops once the run has ended. No inline script: CSP allows only
// this file.
"use strict";
(function () {
  const live = document.getElementById("live");
  if (!live || !live.dataset.src) return;
  let etag = null;
  let delay = 1000;
  function finished() {
    const summary = live.querySelector("[data-final]");
    return summary !== null && summary.dataset.final === "true";
  }
  async function poll() {
    try {
      const headers = etag ? { "If-None-Match": etag } : {};
      const response = await fetch(live.dataset.src, { headers, credentials: "same-origin" });
      if (response.status === 200) {
        etag = response.headers.get("ETag");
        const html = await response.text();
        const parsed = new DOMParser().parseFromString(html, "text/html");
        live.replaceChildren(...parsed.body.childNodes);
        live.dataset.updated = String(Date.now());
      }
      delay = 1000;
    } catch (error) {
      delay = Math.min(delay * 2, 15000);
    }
    if (!finished()) window.setTimeout(poll, delay);
  }
  if (!finished()) window.setTimeout(poll, delay);
})();
