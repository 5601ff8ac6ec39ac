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

// Uploads: a progress bar while the files travel (htmx:xhr:progress), then the time the
// server has spent importing, until the answer comes (a redirect with what happened, or the
// form again with the error).
(function () {
  function parts(form) {
    const box = form.querySelector("[data-upload-progress]");
    if (!box) return null;
    return { box: box, bar: box.querySelector("progress"), status: box.querySelector(".upload-status") };
  }
  function megabytes(n) { return (n / 1048576).toFixed(1) + " MB"; }

  document.body.addEventListener("htmx:xhr:progress", function (event) {
    const form = event.target.closest && event.target.closest("form[data-upload]");
    const p = form && parts(form);
    if (!p || !event.detail.lengthComputable) return;
    const loaded = event.detail.loaded, total = event.detail.total || 1;
    p.box.hidden = false;
    p.bar.value = Math.round((100 * loaded) / total);
    if (loaded < total) {
      p.status.textContent = "Uploading: " + p.bar.value + "% (" + megabytes(loaded) + " of " + megabytes(total) + ")";
      return;
    }
    if (form.dataset.importing) return;
    const started = Date.now();
    form.dataset.importing = "1";
    p.bar.removeAttribute("value"); // indeterminate: the server is reading the file
    let said = "The server is importing the file.";
    const show = function () {
      p.status.textContent = "Uploaded " + megabytes(total) + ". " + said + " (" +
        Math.round((Date.now() - started) / 1000) + " s)";
    };
    // The server's own account of its reading (plain text, shown as text).
    const ask = function () {
      const url = p.box.dataset.progressUrl;
      if (!url || !form.dataset.importing) return;
      window.fetch(url, { credentials: "same-origin", headers: { "Accept": "text/plain" } })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (text) { if (text && form.dataset.importing) { said = text.slice(0, 200); show(); } })
        .catch(function () { /* the import's own answer will say what happened */ });
    };
    show();
    ask();
    form._importTimer = window.setInterval(function () { show(); ask(); }, 1000);
  });

  document.body.addEventListener("htmx:beforeRequest", function (event) {
    const form = event.target.closest && event.target.closest("form[data-upload]");
    const p = form && parts(form);
    if (!p) return;
    p.box.hidden = false;
    p.bar.value = 0;
    p.status.textContent = "Uploading…";
    const button = form.querySelector("button[type=submit]");
    if (button) button.disabled = true;
  });

  document.body.addEventListener("htmx:afterRequest", function (event) {
    const form = event.target.closest && event.target.closest("form[data-upload]");
    if (!form) return;
    if (form._importTimer) window.clearInterval(form._importTimer);
    delete form.dataset.importing;
    const button = form.querySelector("button[type=submit]");
    if (button) button.disabled = false;
    const p = parts(form);
    if (p && !event.detail.successful) p.box.hidden = true;
  });
})();
