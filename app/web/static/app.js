// misstriage front-end behaviour. No inline scripts anywhere (Content-Security-Policy).
"use strict";

(function () {
  function review() { return document.getElementById("review"); }
  function status() { return document.getElementById("review-status"); }

  function tell(text) {
    const box = status();
    if (!box) return;
    box.innerHTML = "";
    const p = document.createElement("p");
    p.className = "banner error";
    p.setAttribute("role", "alert");
    p.textContent = text;
    box.appendChild(p);
  }

  function open(id) {
    const target = document.getElementById(id);
    if (!target) return;
    if (target.tagName === "DIALOG") { target.showModal(); return; }
    target.hidden = false;
    const input = target.querySelector("input:not([type=hidden])");
    if (input) input.focus();
  }

  document.addEventListener("click", function (event) {
    const opener = event.target.closest("[data-opens]");
    if (opener) { event.preventDefault(); open(opener.dataset.opens); }
  });

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const field = event.target.closest("input, textarea, select");
    if (field) {
      if (event.key === "Escape") {
        const form = field.closest(".inline-form");
        if (form) { form.hidden = true; field.blur(); }
      }
      return;
    }
    const section = review();
    if (!section) return;
    const button = section.querySelector('[data-key="' + CSS.escape(event.key) + '"]');
    if (!button) return;
    event.preventDefault();
    // A fast reviewer can press the next key before htmx has wired the card it just swapped
    // in (it does so after settling): wire it now, so the key is never lost.
    if (window.htmx) window.htmx.process(section);
    button.click();
  });

  // A label is never dropped silently: network failures and server errors are said aloud.
  document.body.addEventListener("htmx:sendError", function () {
    tell("Network error: your last action was NOT saved. Check the connection and press the key again.");
  });
  document.body.addEventListener("htmx:responseError", function (event) {
    const code = event.detail.xhr ? event.detail.xhr.status : "?";
    if (code >= 500) tell("The server failed (" + code + "): your last action was NOT saved. Press the key again.");
  });
  document.body.addEventListener("htmx:beforeRequest", function (event) {
    if (event.detail.elt && event.detail.elt.closest && event.detail.elt.closest("#review")) {
      const box = status();
      if (box) box.innerHTML = "";
    }
  });
})();
