// misstriage front-end behaviour. No inline scripts anywhere (Content-Security-Policy).
"use strict";

(function () {
  function review() { return document.getElementById("review"); }
  function status() { return document.getElementById("review-status"); }

  // Said at once (#errors is the page's assertive live region) and shown above the card.
  function tell(text) {
    const box = document.getElementById("errors");
    if (!box) return;
    box.innerHTML = "";
    const p = document.createElement("p");
    p.className = "banner error";
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
        if (form) {
          form.hidden = true;
          // Back to the button that opened the form, so the focus is not lost to <body>.
          const opener = form.id && document.querySelector('[data-opens="' + CSS.escape(form.id) + '"]');
          if (opener) opener.focus(); else field.blur();
        }
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
      [status(), document.getElementById("errors")].forEach(function (box) {
        if (box) box.innerHTML = "";
      });
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

// Focus and announcements across HTMX swaps (keyboard and screen-reader users).
(function () {
  // A text field the user is typing in keeps what they typed: htmx puts the focus and the
  // caret back on the new field with the same id, but with the value the server rendered,
  // which misses the keys pressed while the request was out. Those are put back, and the
  // field's input event fires again so the results catch up.
  let typing = null;
  document.body.addEventListener("htmx:beforeSwap", function () {
    const field = document.activeElement;
    typing = null;
    if (field && field.id && (field.tagName === "TEXTAREA" ||
        (field.tagName === "INPUT" && /^(text|search|email|number|url|)$/.test(field.type)))) {
      typing = { id: field.id, value: field.value, start: field.selectionStart, end: field.selectionEnd };
    }
  });

  // Where the focus goes when the element that had it was swapped away: the swapped
  // content's first heading (read out: the next card's query), else the content itself.
  function settle(candidates) {
    const active = document.activeElement;
    if (active && active !== document.body && active.isConnected) return;
    const place = candidates.find(function (e) {
      return e && e.isConnected && e !== document.body && e.querySelector;
    }) || document.getElementById("main");
    if (!place) return;
    const heading = place.querySelector("h1, h2") || place;
    if (!heading.hasAttribute("tabindex") && !heading.matches("a[href], button, input, select, textarea")) {
      heading.setAttribute("tabindex", "-1");
    }
    heading.focus({ preventScroll: true });
  }

  // The outcome of a swap (the review page's "Saved: ...", "Undone: ...") said politely;
  // errors come as role=alert and are said by themselves.
  function announce(root) {
    const region = document.getElementById("status");
    if (!root || !root.querySelector) return;
    const message = root.id === "message" ? root : root.querySelector("#message");
    if (!region || !message || message.getAttribute("role") === "alert") return;
    region.textContent = "";
    // A new text node after a tick: the same sentence twice in a row is said twice.
    window.setTimeout(function () { region.textContent = message.textContent.trim(); }, 50);
  }

  document.body.addEventListener("htmx:afterSettle", function (event) {
    const target = event.detail.target;
    if (typing) {
      const field = document.getElementById(typing.id);
      const kept = typing;
      typing = null;
      if (field) {
        // Keys pressed between the swap and now went into the new field, after the value
        // the server rendered (its defaultValue): they follow what the old field held.
        const rendered = field.defaultValue;
        const since = field.value !== rendered && field.value.startsWith(rendered)
          ? field.value.slice(rendered.length) : "";
        const value = field.value !== rendered && !since ? field.value : kept.value + since;
        if (field.value !== value || since) {
          const atEnd = kept.start === kept.value.length;
          field.value = value;
          if (document.activeElement !== field) field.focus({ preventScroll: true });
          const caret = atEnd ? value.length : kept.start;
          try { field.setSelectionRange(caret, atEnd ? caret : kept.end); } catch (e) { /* not a text field */ }
          // The answer shown is for the value the server rendered: ask again for this one
          // (the form's own submit trigger; an input event would not pass htmx's "changed"
          // check when the keys went into the new field).
          if (field.value !== rendered && field.form && window.htmx) {
            window.htmx.trigger(field.form, "submit");
          } else {
            field.dispatchEvent(new Event("input", { bubbles: true }));
          }
        }
      }
    }
    // htmx fires this on each settled element (the new content), not only on the target.
    // A panel that refreshes itself (data-polled: a job's progress) never takes the focus.
    const polled = event.target && event.target.closest && event.target.closest("[data-polled]");
    if (!polled) settle([event.target, target]);
    announce(event.target);
  });

  // A review page that opens on the miss the reviewer already holds (a reload, a second
  // visit) has no swap to settle: its card's heading gets the focus as a claimed card's does.
  function focusHeldCard() {
    const card = document.querySelector("#review .review-card");
    if (card) settle([document.getElementById("review")]);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", focusHeldCard);
  } else {
    focusHeldCard();
  }
})();
