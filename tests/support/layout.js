// The layout measures of tests/support/layout.py, in one pass of the page as it is now
// (no scrolling, nothing clicked); minField: the narrowest a field may be, in rem.
(minField) => {
  const vw = document.documentElement.clientWidth;
  const rem = parseFloat(getComputedStyle(document.documentElement).fontSize) || 16;
  const shown = e => { const r = e.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== 'hidden'; };
  const name = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '')
    + (e.getAttribute('name') ? '[name=' + e.getAttribute('name') + ']' : '')
    + (typeof e.className === 'string' && e.className.trim() ? '.' + e.className.trim().split(/\s+/).join('.') : '');
  const inner = b => { const s = getComputedStyle(b); const r = b.getBoundingClientRect();
    return {left: r.left + parseFloat(s.borderLeftWidth) + parseFloat(s.paddingLeft),
            right: r.right - parseFloat(s.borderRightWidth) - parseFloat(s.paddingRight)}; };
  const out = {scroll: document.documentElement.scrollWidth, inner: window.innerWidth,
               wide: [], controls: [], lines: [], tables: []};
  for (const e of document.querySelectorAll('body *')) {
    const r = e.getBoundingClientRect();
    if (r.right > window.innerWidth + 1 && (!e.parentElement
        || e.parentElement.getBoundingClientRect().right <= window.innerWidth + 1))
      out.wide.push(name(e) + ' right=' + Math.round(r.right));
  }
  out.wide = out.wide.slice(0, 8);
  // (b) a control narrower than its content needs, or past its box's content edge
  const typed = 'input:not([type=checkbox]):not([type=radio]):not([type=hidden]):not([type=number]), textarea';
  for (const e of document.querySelectorAll('input:not([type=hidden]), select, button, textarea, a.button-link')) {
    if (!shown(e) || e.closest('table')) continue;
    const r = e.getBoundingClientRect();
    if (e.matches(typed) && r.width < minField * rem - 0.5)
      out.controls.push(name(e) + ' is ' + Math.round(r.width) + ' px wide (under ' + minField + 'rem)');
    if (e.matches('button, a.button-link') && e.scrollWidth > e.clientWidth + 1)
      out.controls.push(name(e) + ' clips its text');
    const box = e.parentElement.closest('.panel, .card, dialog, .empty-state, fieldset, .banner');
    if (box) { const b = inner(box);
      const past = Math.max(r.right - b.right, b.left - r.left);
      if (past > 1) out.controls.push(name(e) + ' sticks out of ' + name(box) + ' by ' + Math.round(past) + ' px'); }
  }
  // (b) a row of filters keeps its controls in line: in each line of the row, the same bottom
  for (const form of document.querySelectorAll('form.inline, form.toolbar')) {
    if (!shown(form)) continue;
    // a flex line: the labels whose boxes overlap vertically
    const lines = [];
    for (const label of form.querySelectorAll(':scope > label:not(.check)')) {
      const control = label.querySelector('input:not([type=hidden]), select');
      if (!control || !shown(control)) continue;
      const r = label.getBoundingClientRect();
      const line = lines.find(l => r.top < l.bottom && r.bottom > l.top);
      if (line) { line.controls.push(control); line.top = Math.min(line.top, r.top); line.bottom = Math.max(line.bottom, r.bottom); }
      else lines.push({top: r.top, bottom: r.bottom, controls: [control]});
    }
    for (const {controls} of lines) {
      const tops = controls.map(c => c.getBoundingClientRect().top);
      if (Math.max(...tops) - Math.min(...tops) > 2)
        out.lines.push(name(form) + ': ' + controls.map(c => name(c) + ' top=' + Math.round(c.getBoundingClientRect().top)).join(', '));
    }
  }
  // (c) a table's scroll box that hides columns while the table could fit, or cuts a row
  for (const e of document.querySelectorAll('.table-scroll')) {
    if (!shown(e)) continue;
    const table = e.querySelector('table');
    const hidden = e.scrollWidth - e.clientWidth;
    if (table && hidden > 1) {
      const room = vw - e.getBoundingClientRect().right;
      const before = table.style.width; table.style.width = 'min-content';
      const least = table.getBoundingClientRect().width; table.style.width = before;
      if (room > hidden || least <= e.clientWidth + 1)
        out.tables.push(name(e) + ' hides ' + hidden + ' px of its table (the page has ' + Math.round(room)
          + ' px more, the table needs ' + Math.round(least) + ' of ' + e.clientWidth + ')');
    }
    if (e.scrollHeight > e.clientHeight + 1) {
      const bottom = e.getBoundingClientRect().top + e.clientTop + e.clientHeight;
      for (const row of e.querySelectorAll('tbody tr')) {
        const r = row.getBoundingClientRect();
        if (r.top < bottom - 1 && r.bottom > bottom + 1) {
          out.tables.push(name(e) + ' cuts a row in half at its foot (' + Math.round(bottom - r.top) + ' of ' + Math.round(r.height) + ' px shown)');
          break; }
      }
    }
  }
  return out;
}
